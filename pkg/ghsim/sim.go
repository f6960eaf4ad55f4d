package ghsim

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// Options configures a Sim.
type Options struct {
	// Dir is where the bare repositories live. Required; tests pass t.TempDir().
	Dir string
	// Now is the clock. Default: a fake clock starting at DefaultStart
	// (2026-01-01T00:00:00Z) that moves only by Advance.
	Now func() time.Time
	// RealClock uses time.Now instead of the fake clock.
	RealClock bool
	// PrimaryLimit is the requests per token per hour; default 5000.
	PrimaryLimit int
	// AnonymousLimit is the requests per client address per hour without a
	// token; default 60, as GitHub.
	AnonymousLimit int
	// SecondaryPerMinute, when positive, answers a token's requests beyond
	// that many in a sliding minute with GitHub's secondary-limit 403.
	SecondaryPerMinute int
	// SearchPerMinute is the search API's limit per user and minute;
	// default GitHub's 30 (a benchmark that compresses time scales it).
	SearchPerMinute int
	// MaxPerPage caps the page size of every list, whatever per_page a
	// client asks for, as GitHub caps it at 100 (the default). Tests set it
	// small, e.g. 3, so that a few items cross a page boundary. SetMaxPerPage
	// changes it while serving.
	MaxPerPage int
	// BaseURL is where the sim is served, for urls in bodies and Link
	// headers. Empty: derived from each request's Host.
	BaseURL string
	// Logger receives a debug line per request (never a token) and
	// warnings; default: discard.
	Logger *slog.Logger
	// FaultRate, between 0 and 1, is the share of requests answered with a
	// random fault (see randomFault), besides those InjectFault asks for:
	// a flaky GitHub for chaos runs. FaultSeed seeds the choice.
	FaultRate float64
	FaultSeed int64
	// GitHTTP serves the repositories over git's smart HTTP protocol at
	// BaseURL/git/<owner>/<name>.git (then each repository's clone_url),
	// asking for a token as the Basic auth password on every request,
	// reads included, and for write permission to push; so a test sees
	// every use of a credential. It needs BaseURL. Without it clone_url
	// is a file:// URL.
	GitHTTP bool
}

// DefaultStart is where the fake clock starts.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const docsURL = "https://docs.github.com/rest"

// Sim is an in-memory GitHub REST API backed by bare git repositories. It
// is an http.Handler; all methods are safe for concurrent use.
type Sim struct {
	opts   Options
	log    *slog.Logger
	dir    string
	home   string
	gitEnv []string
	gitSem chan struct{}
	mux    *http.ServeMux
	closed chan struct{}
	once   sync.Once
	seed   maphash.Seed

	clockMu sync.Mutex
	fake    time.Time

	nextID     atomic.Int64
	reqID      atomic.Int64
	maxPerPage atomic.Int64
	// mergeDelay is how long mergeability stays unknown after a push
	// (SetMergeabilityDelay), in nanoseconds of the sim clock.
	mergeDelay atomic.Int64

	mu     sync.RWMutex
	users  map[string]*user // lower login
	byID   map[int64]*user
	tokens map[string]*user
	// scopes are the X-OAuth-Scopes of classic tokens (SetTokenScopes)
	scopes map[string]string
	repos  map[string]*repo // ghref.Repo.Key()
	// installations are the App installation tokens and their
	// repositories (SetInstallationRepos).
	installations map[string][]ghref.Repo

	rateMu  sync.Mutex
	buckets map[string]*bucket
	// searches holds each user's searches of the last minute (search.go).
	searches     map[int64][]time.Time
	searchPerMin atomic.Int64 // SetSearchPerMinute

	faultMu     sync.Mutex
	faults      []*faultState
	faultRand   *rand.Rand
	faultCounts map[FaultKind]int

	writeMu sync.Mutex
	writes  []WriteRecord

	teams teamBook // SetTeamMember

	statsMu sync.Mutex
	stats   Stats

	// actState is GitHub Actions (actions.go), made on first use.
	actOnce  sync.Once
	actState *actions
	apps     apps // registered from manifests (apps.go)
}

// New creates a simulator storing its repositories under opts.Dir.
func New(opts Options) (*Sim, error) {
	if opts.Dir == "" {
		return nil, errors.New("ghsim: Options.Dir is required")
	}
	if opts.GitHTTP && opts.BaseURL == "" {
		return nil, errors.New("ghsim: Options.GitHTTP needs Options.BaseURL, where git finds the repositories")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("ghsim: resolve %s: %w", opts.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ghsim: create %s: %w", dir, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("ghsim: the git binary is required: %w", err)
	}
	home, err := os.MkdirTemp("", "ghsim-home-*")
	if err != nil {
		return nil, fmt.Errorf("ghsim: create git home: %w", err)
	}
	if opts.PrimaryLimit <= 0 {
		opts.PrimaryLimit = 5000
	}
	if opts.AnonymousLimit <= 0 {
		opts.AnonymousLimit = 60
	}
	opts.BaseURL = strings.TrimSuffix(opts.BaseURL, "/")
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Sim{
		opts:    opts,
		log:     log,
		dir:     dir,
		home:    home,
		gitSem:  make(chan struct{}, max(2, 2*runtime.NumCPU())),
		closed:  make(chan struct{}),
		seed:    maphash.MakeSeed(),
		fake:    DefaultStart,
		users:   map[string]*user{},
		byID:    map[int64]*user{},
		tokens:  map[string]*user{},
		scopes:  map[string]string{},
		repos:   map[string]*repo{},
		buckets: map[string]*bucket{},
	}
	s.SetMaxPerPage(opts.MaxPerPage)
	s.faultRand = rand.New(rand.NewPCG(uint64(opts.FaultSeed), 0x9e3779b97f4a7c15))
	s.faultCounts = map[FaultKind]int{}
	s.gitEnv = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + filepath.Join(home, "gitconfig"),
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	}
	s.nextID.Store(100000)
	s.resetStatsLocked()
	s.routes()
	return s, nil
}

// Close releases requests hanging on FaultTimeout and removes the sim's
// scratch git home. The repositories under Options.Dir stay.
func (s *Sim) Close() error {
	s.once.Do(func() { close(s.closed) })
	return os.RemoveAll(s.home)
}

// Now returns the sim's clock.
func (s *Sim) Now() time.Time {
	switch {
	case s.opts.Now != nil:
		return s.opts.Now().UTC()
	case s.opts.RealClock:
		return time.Now().UTC()
	}
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	return s.fake
}

// Advance moves the fake clock; it has no effect with Options.Now or
// RealClock.
func (s *Sim) Advance(d time.Duration) {
	s.clockMu.Lock()
	s.fake = s.fake.Add(d)
	s.clockMu.Unlock()
}

func (s *Sim) newID() int64 { return s.nextID.Add(1) }

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// webBase maps the API base to the base of html_url links. The sim serves
// both from one address.
func webBase(api string) string { return strings.TrimSuffix(api, "/api/v3") }

func (s *Sim) apiBase(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return s.opts.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ---- request pipeline ----

type handlerFunc func(c *reqCtx) *result

type reqCtx struct {
	s     *Sim
	r     *http.Request
	user  *user
	base  string
	now   time.Time
	route string
	// scopes is the X-OAuth-Scopes answer of a classic token (classic).
	scopes  string
	classic bool
}

type result struct {
	status       int
	body         []byte
	header       http.Header
	lastModified time.Time
}

func (res *result) setHeader(k, v string) *result {
	if res.header == nil {
		res.header = http.Header{}
	}
	res.header.Set(k, v)
	return res
}

func jsonResult(status int, v any) *result {
	b, err := json.Marshal(v)
	if err != nil {
		return &result{status: 500, body: errBody(500, "ghsim: encode: "+err.Error())}
	}
	return &result{status: status, body: b}
}

func errBody(status int, msg string, items ...jErrItem) []byte {
	errs := make([]any, 0, len(items))
	for _, it := range items {
		errs = append(errs, it)
	}
	return errBodyAny(status, msg, errs)
}

// errBodyAny also serves GitHub's "Validation Error Simple", whose errors
// are plain strings.
func errBodyAny(status int, msg string, errs []any) []byte {
	b, _ := json.Marshal(jError{Message: msg, Errors: errs, DocumentationURL: docsURL, Status: strconv.Itoa(status)})
	return b
}

func errResult(status int, msg string, items ...jErrItem) *result {
	return &result{status: status, body: errBody(status, msg, items...)}
}

func notFound() *result { return errResult(404, "Not Found") }

func validation(items ...jErrItem) *result { return errResult(422, "Validation Failed", items...) }

// ServeHTTP serves the REST API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v3/"); ok {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		r2.URL.RawPath = ""
		r = r2
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Sim) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, pattern, h) })
}

type bucket struct {
	limit  int
	used   int
	reset  time.Time
	userID int64
	addr   string
	recent []time.Time
}

func (b *bucket) roll(now time.Time) {
	if b.reset.IsZero() || !now.Before(b.reset) {
		b.used = 0
		b.reset = now.Add(time.Hour).Truncate(time.Second)
	}
}

func (b *bucket) remaining() int { return max(0, b.limit-b.used) }

func credentials(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok {
		return h, true // malformed: will not match any token
	}
	switch strings.ToLower(scheme) {
	case "token", "bearer":
		return strings.TrimSpace(tok), true
	}
	return h, true
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Sim) serve(w http.ResponseWriter, r *http.Request, route string, h handlerFunc) {
	now := s.Now()
	c := &reqCtx{s: s, r: r, base: s.apiBase(r), now: now, route: route}
	exempt := route == "GET /rate_limit"

	tok, hasTok := credentials(r)
	badCreds := false
	key, limit := "ip:"+remoteHost(r), s.opts.AnonymousLimit
	if hasTok {
		s.mu.RLock()
		c.user = s.tokens[tok]
		c.scopes, c.classic = s.scopes[tok]
		s.mu.RUnlock()
		if c.user == nil {
			badCreds = true
		} else {
			key, limit = "token:"+tok, s.opts.PrimaryLimit
		}
	}
	s.rateMu.Lock()
	b := s.buckets[key]
	if b == nil {
		b = &bucket{limit: limit, addr: remoteHost(r)}
		if c.user != nil {
			b.userID = c.user.id
		}
		s.buckets[key] = b
	}
	b.roll(now)
	s.rateMu.Unlock()

	var res *result
	counted := false
	f := s.takeFault(r)
	if f == nil {
		f = s.randomFault(r, route)
	}
	if f != nil {
		s.countFault(f.Kind)
		res = s.faultResult(c, f, b)
		if res == nil && f.Kind == FaultTimeout && f.Delay == 0 && r.Context().Err() != nil {
			s.record(route, 0, false)
			return // the client gave up; nothing to write
		}
	}
	if res == nil {
		res, counted = s.dispatch(c, h, b, badCreds, exempt)
		if f != nil && res.status == 200 {
			switch {
			case f.Kind == FaultMalformedJSON && len(res.body) > 1:
				res.body = res.body[:len(res.body)/2]
				res.header.Del("ETag")
			case f.Kind == FaultGarbledJSON:
				res.body = []byte("<html><body>upstream connect error or disconnect/reset before headers</body></html>\n")
				res.header.Del("ETag")
			case f.Kind == FaultEmptyObject:
				res.body = []byte("{}")
				res.header.Del("ETag")
			}
		}
		if f != nil && f.Kind == FaultLostAnswer {
			s.record(route, res.status, counted)
			s.recordWrite(c, res.status, f, true)
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
			return // the work is done; its answer never arrives
		}
	}
	// Recorded before writing, so a client that has its answer sees it in
	// Stats. A client that gave up meanwhile never sees it.
	s.record(route, res.status, counted)
	s.recordWrite(c, res.status, f, r.Context().Err() != nil)
	s.log.Debug("ghsim request", "method", r.Method, "path", r.URL.Path, "route", route, "status", res.status, "counted", counted)
	s.write(w, c, res, b)
}

// dispatch runs auth, the secondary and primary limits, the handler and
// conditional-request handling. It reports whether the request counted
// against the primary limit.
// anonymousWrites are the writes GitHub serves without authentication.
var anonymousWrites = map[string]bool{"POST /app-manifests/{code}/conversions": true}

func (s *Sim) dispatch(c *reqCtx, h handlerFunc, b *bucket, badCreds, exempt bool) (*result, bool) {
	r := c.r
	if badCreds {
		return errResult(401, "Bad credentials"), false
	}
	if c.user == nil && r.Method != http.MethodGet && r.Method != http.MethodHead && !anonymousWrites[c.route] {
		return errResult(401, "Requires authentication"), false
	}
	if !exempt {
		s.rateMu.Lock()
		if n := s.opts.SecondaryPerMinute; n > 0 && c.user != nil {
			cut := c.now.Add(-time.Minute)
			i := 0
			for i < len(b.recent) && !b.recent[i].After(cut) {
				i++
			}
			b.recent = b.recent[i:]
			if len(b.recent) >= n {
				wait := b.recent[0].Add(time.Minute).Sub(c.now)
				s.rateMu.Unlock()
				return secondaryResult(wait), false
			}
			b.recent = append(b.recent, c.now)
		}
		if !searchCountsAgainstCore(c.route) {
			s.rateMu.Unlock()
			return s.safeCall(c, h), false // its own limit (search.go)
		}
		if b.used >= b.limit {
			s.rateMu.Unlock()
			return primaryResult(b), false
		}
		b.used++ // reserved now, refunded below if the answer is a 304
		s.rateMu.Unlock()
	}
	res := s.safeCall(c, h)
	if res.header == nil {
		res.header = http.Header{}
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && res.status == 200 {
		etag := s.etag(res.body, c)
		res.header.Set("ETag", etag)
		if !res.lastModified.IsZero() {
			res.header.Set("Last-Modified", res.lastModified.UTC().Format(http.TimeFormat))
		}
		if notModified(r, etag, res.lastModified) {
			res.status, res.body = 304, nil
		}
	}
	if exempt {
		return res, false
	}
	if res.status == 304 {
		s.rateMu.Lock()
		b.used--
		s.rateMu.Unlock()
		return res, false
	}
	return res, true
}

// safeCall turns a handler panic into a 500, so one bad request cannot take
// a test server down.
func (s *Sim) safeCall(c *reqCtx, h handlerFunc) (res *result) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("ghsim handler panic", "route", c.route, "panic", v)
			res = errResult(500, "Server Error")
		}
	}()
	res = h(c)
	if res == nil {
		res = errResult(500, "Server Error")
	}
	return res
}

func notModified(r *http.Request, etag string, lm time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == etag {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && !lm.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !lm.Truncate(time.Second).After(t) {
			return true
		}
	}
	return false
}

// etag is a strong validator over the body and, as on GitHub, the
// credentials that fetched it.
func (s *Sim) etag(body []byte, c *reqCtx) string {
	var h1, h2 maphash.Hash
	h1.SetSeed(s.seed)
	h2.SetSeed(s.seed)
	h2.WriteString("ghsim/2")
	if c.user != nil {
		h1.WriteString(c.user.login)
		h2.WriteString(c.user.login)
	}
	h1.WriteByte(0)
	h2.WriteByte(0)
	h1.Write(body)
	h2.Write(body)
	var sum [16]byte
	a, bb := h1.Sum64(), h2.Sum64()
	for i := 0; i < 8; i++ {
		sum[i] = byte(a >> (8 * i))
		sum[8+i] = byte(bb >> (8 * i))
	}
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

func secondaryResult(wait time.Duration) *result {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	res := errResult(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.")
	return res.setHeader("Retry-After", strconv.Itoa(secs))
}

func primaryResult(b *bucket) *result {
	msg := "API rate limit exceeded for user ID " + itoa64(b.userID) + "."
	if b.userID == 0 {
		msg = "API rate limit exceeded for " + b.addr + ". (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
	}
	res := errResult(403, msg)
	return res.setHeader("X-RateLimit-Remaining", "0")
}

func (s *Sim) write(w http.ResponseWriter, c *reqCtx, res *result, b *bucket) {
	hd := w.Header()
	s.rateMu.Lock()
	limit, used, reset := b.limit, b.used, b.reset
	s.rateMu.Unlock()
	remaining := max(0, limit-used)
	hd.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	hd.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	hd.Set("X-RateLimit-Reset", itoa64(reset.Unix()))
	hd.Set("X-RateLimit-Used", strconv.Itoa(used))
	hd.Set("X-RateLimit-Resource", "core")
	hd.Set("X-GitHub-Media-Type", "github.v3; format=json")
	hd.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	hd.Set("X-GitHub-Request-Id", fmt.Sprintf("0000:%04X:%06X:%06X:%08X", os.Getpid()&0xffff, s.reqID.Add(1), c.now.Unix()&0xffffff, c.now.Unix()))
	hd.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if c.classic && c.user != nil {
		hd.Set("X-OAuth-Scopes", c.scopes)
	}
	if c.r.Method == http.MethodGet {
		hd.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	}
	for k, v := range res.header {
		hd[k] = v
	}
	if res.status != 204 && res.status != 304 && res.body != nil && hd.Get("Content-Type") == "" {
		hd.Set("Content-Type", "application/json; charset=utf-8")
	}
	if res.body != nil && res.status != 304 && res.status != 204 {
		hd.Set("Content-Length", strconv.Itoa(len(res.body)))
	}
	w.WriteHeader(res.status)
	if c.r.Method != http.MethodHead && res.status != 304 && res.status != 204 {
		_, _ = w.Write(res.body)
	}
}

// ---- faults ----

// FaultKind selects what an injected fault does.
type FaultKind int

// Fault kinds.
const (
	// FaultStatus500 answers 500 with a JSON error body.
	FaultStatus500 FaultKind = iota + 1
	// FaultStatus502 answers 502 with an HTML body, as GitHub's edge does.
	FaultStatus502
	// FaultStatus429 answers 429 with Retry-After.
	FaultStatus429
	// FaultSecondaryLimit answers GitHub's secondary-limit 403 with
	// Retry-After and X-RateLimit-Remaining > 0.
	FaultSecondaryLimit
	// FaultPrimaryLimit answers 403 with X-RateLimit-Remaining: 0 and the
	// bucket's reset time.
	FaultPrimaryLimit
	// FaultTimeout holds the request until its context ends or Delay
	// passes; after Delay the request is served normally.
	FaultTimeout
	// FaultMalformedJSON serves the request, then truncates its 200 body.
	FaultMalformedJSON
	// FaultForbidden answers a permissions 403 with no rate-limit signal.
	FaultForbidden
	// FaultLostAnswer does the request's work, then holds the answer until
	// the client gives up: a write that happened although its client saw
	// only a timeout, deterministically.
	FaultLostAnswer
	// FaultGarbledJSON serves the request, then replaces its 200 body with
	// text that is not JSON at all (a proxy's error page, say).
	FaultGarbledJSON
	// FaultEmptyObject serves the request, then replaces its 200 body with
	// "{}": an object whose every field is missing, as GitHub has been seen
	// to answer for a pull request.
	FaultEmptyObject
)

// String names the kind, for reports.
func (k FaultKind) String() string {
	if n, ok := faultNames[k]; ok {
		return n
	}
	return "fault(" + strconv.Itoa(int(k)) + ")"
}

var faultNames = map[FaultKind]string{
	0:              "none",
	FaultStatus500: "500", FaultStatus502: "502", FaultStatus429: "429", FaultSecondaryLimit: "secondary_403",
	FaultPrimaryLimit: "primary_403", FaultTimeout: "timeout", FaultMalformedJSON: "truncated_json",
	FaultForbidden: "forbidden_403", FaultLostAnswer: "lost_answer", FaultGarbledJSON: "malformed_json",
	FaultEmptyObject: "empty_object",
}

// Fault describes failures to inject into matching requests.
type Fault struct {
	Method string // "" = any
	Path   string // regexp matched against r.URL.Path; "" = any
	Kind   FaultKind
	// Times is how many matching requests fail; 0 means 1.
	Times int
	// RetryAfter is for FaultStatus429 and FaultSecondaryLimit; default 1s.
	RetryAfter time.Duration
	// Delay is for FaultTimeout; 0 holds until the request is cancelled.
	Delay time.Duration
}

type faultState struct {
	Fault
	re   *regexpMatcher
	left int
}

// InjectFault makes the next Times requests matching f fail as f.Kind says.
// Faults apply in the order injected. A Path that is not a valid regexp is
// matched literally.
func (s *Sim) InjectFault(f Fault) {
	fs := &faultState{Fault: f, re: newMatcher(f.Path, s.log), left: f.Times}
	if fs.left <= 0 {
		fs.left = 1
	}
	if fs.RetryAfter <= 0 {
		fs.RetryAfter = time.Second
	}
	s.faultMu.Lock()
	s.faults = append(s.faults, fs)
	s.faultMu.Unlock()
}

// ClearFaults drops all pending faults.
func (s *Sim) ClearFaults() {
	s.faultMu.Lock()
	s.faults = nil
	s.faultMu.Unlock()
}

func (s *Sim) takeFault(r *http.Request) *Fault {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	for i, f := range s.faults {
		if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
			continue
		}
		if !f.re.match(r.URL.Path) {
			continue
		}
		f.left--
		if f.left <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		out := f.Fault
		return &out
	}
	return nil
}

// faultResult returns the injected answer, or nil when the request should
// go on to the handler (FaultTimeout after its delay, FaultMalformedJSON).
func (s *Sim) faultResult(c *reqCtx, f *Fault, b *bucket) *result {
	secs := strconv.Itoa(max(1, int(math.Ceil(f.RetryAfter.Seconds()))))
	switch f.Kind {
	case FaultStatus500:
		return errResult(500, "Server Error")
	case FaultStatus502:
		res := &result{status: 502, body: []byte("<html><body><h1>502 Bad Gateway</h1>\nThe server returned an invalid or incomplete response.\n</body></html>\n")}
		return res.setHeader("Content-Type", "text/html")
	case FaultStatus429:
		return errResult(429, "Too Many Requests").setHeader("Retry-After", secs)
	case FaultSecondaryLimit:
		return secondaryResult(f.RetryAfter).setHeader("Retry-After", secs)
	case FaultPrimaryLimit:
		s.rateMu.Lock()
		res := primaryResult(b)
		s.rateMu.Unlock()
		return res
	case FaultForbidden:
		return errResult(403, "Resource not accessible by integration")
	case FaultTimeout:
		// Read the body first: Go's server notices a client hanging up only
		// once the request body is consumed. Keep it for the handler, which
		// runs if Delay passes.
		if body, err := io.ReadAll(io.LimitReader(c.r.Body, 10<<20)); err == nil {
			c.r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if f.Delay > 0 {
			// Like GitHub, finish the work even if the client has given up:
			// a client that times out cannot know whether its write happened.
			t := time.NewTimer(f.Delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.closed:
				return errResult(503, "Service Unavailable")
			}
			return nil
		}
		select {
		case <-c.r.Context().Done():
		case <-s.closed:
			return errResult(503, "Service Unavailable")
		}
		return nil
	case FaultMalformedJSON, FaultLostAnswer, FaultGarbledJSON, FaultEmptyObject:
		return nil
	}
	return errResult(500, "Server Error")
}

// ---- stats ----

// Stats counts the requests the sim has answered.
type Stats struct {
	Total int
	// Counted requests consumed the primary rate limit; NotCounted did not
	// (304s, /rate_limit, auth failures, limit refusals, faults).
	Counted    int
	NotCounted int
	// ByRoute is keyed by the route pattern, e.g.
	// "GET /repos/{owner}/{repo}/pulls"; unmatched paths are "NOT_FOUND".
	ByRoute       map[string]int
	ByStatus      map[int]int
	ByRouteStatus map[string]map[int]int
}

func (s *Sim) record(route string, status int, counted bool) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := &s.stats
	st.Total++
	if counted {
		st.Counted++
	} else {
		st.NotCounted++
	}
	st.ByRoute[route]++
	st.ByStatus[status]++
	m := st.ByRouteStatus[route]
	if m == nil {
		m = map[int]int{}
		st.ByRouteStatus[route] = m
	}
	m[status]++
}

// Stats returns a copy of the request counters.
func (s *Sim) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	out := s.stats
	out.ByRoute = make(map[string]int, len(s.stats.ByRoute))
	for k, v := range s.stats.ByRoute {
		out.ByRoute[k] = v
	}
	out.ByStatus = make(map[int]int, len(s.stats.ByStatus))
	for k, v := range s.stats.ByStatus {
		out.ByStatus[k] = v
	}
	out.ByRouteStatus = make(map[string]map[int]int, len(s.stats.ByRouteStatus))
	for k, m := range s.stats.ByRouteStatus {
		mm := make(map[int]int, len(m))
		for kk, v := range m {
			mm[kk] = v
		}
		out.ByRouteStatus[k] = mm
	}
	return out
}

// ResetStats zeroes the request counters.
func (s *Sim) ResetStats() {
	s.statsMu.Lock()
	s.resetStatsLocked()
	s.statsMu.Unlock()
}

func (s *Sim) resetStatsLocked() {
	s.stats = Stats{ByRoute: map[string]int{}, ByStatus: map[int]int{}, ByRouteStatus: map[string]map[int]int{}}
}

// RateRemaining returns what X-RateLimit-Remaining would say for token now.
func (s *Sim) RateRemaining(token string) int {
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	b := s.buckets["token:"+token]
	if b == nil {
		return s.opts.PrimaryLimit
	}
	b.roll(s.Now())
	return b.remaining()
}

// rateLimitBody renders GET /rate_limit for the caller's bucket.
func (s *Sim) rateLimitBody(c *reqCtx) *result {
	tok, hasTok := credentials(c.r)
	key := "ip:" + remoteHost(c.r)
	if hasTok && c.user != nil {
		key = "token:" + tok
	}
	s.rateMu.Lock()
	b := s.buckets[key]
	core := jRate{Limit: b.limit, Remaining: b.remaining(), Reset: b.reset.Unix(), Used: b.used, Resource: "core"}
	s.rateMu.Unlock()
	reset := c.now.Add(time.Minute).Unix()
	res := map[string]jRate{
		"core":                        core,
		"search":                      {Limit: 30, Remaining: 30, Reset: reset, Resource: "search"},
		"graphql":                     {Limit: 5000, Remaining: 5000, Reset: c.now.Add(time.Hour).Unix(), Resource: "graphql"},
		"integration_manifest":        {Limit: 5000, Remaining: 5000, Reset: c.now.Add(time.Hour).Unix(), Resource: "integration_manifest"},
		"code_search":                 {Limit: 10, Remaining: 10, Reset: reset, Resource: "code_search"},
		"actions_runner_registration": {Limit: 10000, Remaining: 10000, Reset: c.now.Add(time.Hour).Unix(), Resource: "actions_runner_registration"},
	}
	return jsonResult(200, jRateLimit{Resources: res, Rate: core})
}

type regexpMatcher struct{ re *regexp.Regexp }

func newMatcher(expr string, log *slog.Logger) *regexpMatcher {
	if expr == "" {
		return &regexpMatcher{}
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		log.Warn("ghsim: fault path is not a regexp; matching it literally", "path", expr, "err", err)
		re = regexp.MustCompile(regexp.QuoteMeta(expr))
	}
	return &regexpMatcher{re: re}
}

func (m *regexpMatcher) match(path string) bool { return m.re == nil || m.re.MatchString(path) }
