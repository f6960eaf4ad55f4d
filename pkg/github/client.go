// Package github is the one GitHub REST client every prloop service uses.
//
// It wraps go-github with what a long-running poller needs: conditional
// requests on every GET (a 304 costs no primary quota), full pagination,
// rate-limit waits, retries with backoff that never repeat a write that could
// have acted, typed errors, and counters. Methods take ghref identities and
// return go-github types, except where GitHub's JSON carries more than
// go-github decodes (Issue, Reaction).
//
// Layers, outermost first: retries and rate limits → auth (token or GitHub
// App installation, API host only) → conditional cache → net/http.
package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v66/github"
	"github.com/prloop/prloop/pkg/ctxtime"
)

// Options are the hooks and knobs that are not configuration: tests inject a
// fake clock and sleep, services attach logs and metrics.
type Options struct {
	// Logger receives retries, waits and auth source; default slog.Default().
	Logger *slog.Logger
	// Observer, if set, is told about every HTTP attempt.
	Observer Observer
	// Transport is the innermost RoundTripper; default http.DefaultTransport.
	Transport http.RoundTripper
	// Backoff returns the wait before retry n (1-based); default DefaultBackoff.
	Backoff func(n int) time.Duration
	// Sleep waits; default ctxtime.Sleep. Tests record the durations instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for rate-limit resets; default time.Now.
	Now func() time.Time
	// MaxRateLimitWaits is how many rate-limit waits one request may do
	// before giving up with *RateLimitError; default 3.
	MaxRateLimitWaits int
	// UserAgent is sent with every request; default "prloop".
	UserAgent string
	// Budget, when set, is the process's share of GitHub's secondary
	// limits that this client draws on with the others given it; nil gives
	// the client one of its own when Config.Concurrency is set.
	Budget *Budget
	// AsApp makes IsApp report true under token auth, so that tests drive
	// the paths only a GitHub App may take (check runs) against a
	// simulator, which mints no installation tokens.
	AsApp bool
}

// Client is safe for concurrent use. Create it with New.
type Client struct {
	gh *gh.Client
	// plain is the transport under every credential layer: what fetches
	// from a host other than the API's (a job log's signed URL).
	plain   http.RoundTripper
	baseURL *url.URL
	token   Secret                    // for redaction of echoed text; empty with App auth
	app     *ghinstallation.Transport // App installation auth, else nil
	asApp   bool                      // Options.AsApp
	source  string                    // where the credentials came from (AuthSource)
	cache   *lruCache
	budget  *Budget // nil: no secondary-limit budget
	log     *slog.Logger
	obs     Observer

	timeout           time.Duration
	maxRetries        int
	maxWait           time.Duration
	maxRateLimitWaits int
	backoff           func(int) time.Duration
	sleep             func(context.Context, time.Duration) error
	now               func() time.Time

	requests, notModified, retries, rateLimitWaits atomic.Int64
	routes                                         routeCounters

	rateMu sync.Mutex
	rates  map[string]RateLimit
}

// New builds a client from cfg. Auth is GitHub App installation auth when
// cfg configures it, else cfg.Token, else ResolveToken (GITHUB_TOKEN, GH_TOKEN,
// `gh auth token`). ctx bounds only the token lookup.
func New(ctx context.Context, cfg Config, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := normalizeAPIURL(cfg.APIURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envAPIURL, err)
	}
	c := &Client{
		baseURL:           base,
		log:               opts.Logger,
		obs:               opts.Observer,
		timeout:           cfg.RequestTimeout,
		maxRetries:        cfg.MaxRetries,
		maxWait:           cfg.MaxRateLimitWait,
		maxRateLimitWaits: opts.MaxRateLimitWaits,
		backoff:           opts.Backoff,
		sleep:             opts.Sleep,
		now:               opts.Now,
		rates:             map[string]RateLimit{},
		asApp:             opts.AsApp,
		budget:            opts.Budget,
	}
	if c.budget == nil && cfg.Concurrency > 0 {
		c.budget = NewBudget(BudgetOptions{Concurrency: cfg.Concurrency, EndpointPointsPerMinute: cfg.PointsPerMinute})
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "github")
	if c.timeout == 0 {
		c.timeout = DefaultRequestTimeout
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	switch {
	case c.maxWait == 0:
		c.maxWait = DefaultMaxRateLimitWait
	case c.maxWait < 0:
		c.maxWait = -1
	}
	if c.maxRateLimitWaits <= 0 {
		c.maxRateLimitWaits = 3
	}
	if c.backoff == nil {
		c.backoff = DefaultBackoff
	}
	if c.sleep == nil {
		c.sleep = ctxtime.Sleep
	}
	if c.now == nil {
		c.now = time.Now
	}
	switch {
	case cfg.CacheMaxBytes == 0:
		c.cache = newLRU(DefaultCacheMaxBytes)
	case cfg.CacheMaxBytes > 0:
		c.cache = newLRU(cfg.CacheMaxBytes)
	}

	inner := opts.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	var layer http.RoundTripper = inner
	if c.cache != nil {
		layer = &conditionalTransport{next: inner, cache: c.cache}
	}
	if cfg.UsesApp() {
		itr, err := ghinstallation.NewKeyFromFile(layer, cfg.AppID, cfg.AppInstallationID, cfg.AppPrivateKeyPath)
		if err != nil {
			return nil, fmt.Errorf("%s: load GitHub App key: %w", envKeyPath, err)
		}
		itr.BaseURL = strings.TrimSuffix(base.String(), "/")
		c.app = itr
		c.source = "GitHub App"
		layer = &hostGuard{host: base.Host, auth: itr, plain: layer}
		c.log.Info("github auth", "source", "app", "app_id", cfg.AppID, "installation_id", cfg.AppInstallationID)
	} else {
		tok, source := cfg.Token, "config"
		if tok == "" {
			tok, source, err = ResolveToken(ctx)
			if err != nil {
				return nil, err
			}
		}
		c.token, c.source = tok, source
		layer = &tokenTransport{token: tok, host: base.Host, next: layer}
		c.log.Info("github auth", "source", source, "api_url", base.String())
	}
	hc := &http.Client{Transport: &retryTransport{c: c, next: layer}}
	c.plain = inner
	c.gh = gh.NewClient(hc)
	c.gh.BaseURL = base
	c.gh.UserAgent = opts.UserAgent
	if c.gh.UserAgent == "" {
		c.gh.UserAgent = "prloop"
	}
	return c, nil
}

// Budget is the secondary-limit budget the client draws on, nil if none.
func (c *Client) Budget() *Budget { return c.budget }

// IsApp reports whether the client acts as a GitHub App installation
// (or Options.AsApp pretends so): only an App may write check runs.
func (c *Client) IsApp() bool { return c.app != nil || c.asApp }

// AuthSource says where the credentials came from, for messages that say
// what to fix: "GITHUB_TOKEN", "GH_TOKEN", "gh auth token", "config" (a
// token set in Config) or "GitHub App" (installation auth).
func (c *Client) AuthSource() string { return c.source }

// String names the API without credentials.
func (c *Client) String() string { return "github.Client{" + c.baseURL.String() + "}" }

// GoString is String, so %#v cannot print the token either.
func (c *Client) GoString() string { return c.String() }

// BaseURL returns the API root, with a trailing slash.
func (c *Client) BaseURL() string { return c.baseURL.String() }

// WebURL returns the web root matching the API: https://github.com for
// api.github.com, https://HOST for GitHub Enterprise's https://HOST/api/v3/,
// and the API root itself otherwise (a simulator).
func (c *Client) WebURL() string {
	u := *c.baseURL
	switch {
	case strings.EqualFold(u.Host, "api.github.com"):
		return "https://github.com"
	case strings.HasSuffix(u.Path, "/api/v3/"):
		u.Path = strings.TrimSuffix(u.Path, "api/v3/")
	}
	return strings.TrimSuffix(u.String(), "/")
}

// GitToken returns the credential for git over HTTPS to the same GitHub:
// the configured token, or a fresh GitHub App installation token (they
// expire after an hour, so ask again for each git operation). Callers hand
// it to git through the environment only, never in a URL or an argument.
func (c *Client) GitToken(ctx context.Context) (Secret, error) {
	if c.app == nil {
		return c.token, nil
	}
	tok, err := c.app.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("get GitHub App installation token for git: %w", err)
	}
	return Secret(tok), nil
}

// GitHub returns the underlying go-github client for calls this package does
// not wrap. Its requests go through the same retries, cache and counters;
// its errors are go-github's, not this package's typed ones.
func (c *Client) GitHub() *gh.Client { return c.gh }

// RouteOutcome keys Stats.Routes.
type RouteOutcome struct {
	// Route is the templated request, e.g. "GET /repos/{owner}/{repo}/pulls".
	Route   string
	Outcome Outcome
}

// Stats are the client's counters since New.
type Stats struct {
	// Requests is HTTP attempts sent, retries included.
	Requests int64
	// NotModified is attempts answered 304 (served from the cache).
	NotModified int64
	// Retries is attempts that repeated an earlier one: after a 5xx, a network
	// error, a timeout, a rate limit or a malformed body.
	Retries int64
	// RateLimitWaits is sleeps for a rate limit (a subset of the reasons for
	// Retries, plus waits before sending when the quota was known spent).
	RateLimitWaits int64
	// Routes counts attempts per route and outcome.
	Routes map[RouteOutcome]int64
	// CacheEntries and CacheBytes describe the conditional-request cache.
	CacheEntries int
	CacheBytes   int64
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	s := Stats{
		Requests:       c.requests.Load(),
		NotModified:    c.notModified.Load(),
		Retries:        c.retries.Load(),
		RateLimitWaits: c.rateLimitWaits.Load(),
		Routes:         c.routes.snapshot(),
	}
	if c.cache != nil {
		s.CacheEntries, s.CacheBytes = c.cache.stats()
	}
	return s
}

func (c *Client) observe(route string, status int, o Outcome) {
	c.routes.add(RouteOutcome{Route: route, Outcome: o})
	if c.obs != nil {
		c.obs.OnRequest(route, status, o)
	}
}

func (c *Client) observeRetry(route string, cause Outcome) {
	if ro, ok := c.obs.(RetryObserver); ok {
		ro.OnRetry(route, cause)
	}
}

// RateLimits returns the latest rate-limit state per resource ("core",
// "search" …) seen in response headers. No request is made.
func (c *Client) RateLimits() map[string]RateLimit {
	c.rateMu.Lock()
	defer c.rateMu.Unlock()
	return maps.Clone(c.rates)
}

func (c *Client) rateLimit(resource string) (RateLimit, bool) {
	c.rateMu.Lock()
	defer c.rateMu.Unlock()
	rl, ok := c.rates[resource]
	return rl, ok
}

// forgetSpent marks a spent quota as unknown after waiting for its reset, so
// the next request goes out and brings fresh numbers.
func (c *Client) forgetSpent(resource string) {
	c.rateMu.Lock()
	defer c.rateMu.Unlock()
	if rl, ok := c.rates[resource]; ok && rl.Remaining == 0 {
		rl.Remaining = -1
		c.rates[resource] = rl
	}
}

func (c *Client) recordRate(resp *http.Response) {
	h := resp.Header
	rem, err := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	if err != nil {
		return
	}
	rl := RateLimit{Resource: h.Get("X-RateLimit-Resource"), Remaining: rem, Observed: c.now()}
	if rl.Resource == "" {
		rl.Resource = resourceFor(resp.Request.URL.Path)
	}
	rl.Limit, _ = strconv.Atoi(h.Get("X-RateLimit-Limit"))
	rl.Used, _ = strconv.Atoi(h.Get("X-RateLimit-Used"))
	rl.Reset, _ = parseUnix(h.Get("X-RateLimit-Reset"))
	c.rateMu.Lock()
	c.rates[rl.Resource] = rl
	c.rateMu.Unlock()
}

// maxPages stops a pagination loop that never ends (a server whose next link
// points back): 1000 pages of 100 is far beyond any list prloop reads.
const maxPages = 1000

// doJSON sends one request through go-github and decodes the answer into a
// fresh T. A GET whose 200 body does not decode is fetched once more (the
// cache never keeps invalid JSON) before a *DecodeError is returned.
func doJSON[T any](ctx context.Context, c *Client, method, u string, body any, idempotent bool) (T, *gh.Response, error) {
	for try := 1; ; try++ {
		var v T
		resp, err := c.send(ctx, method, u, body, &v, idempotent)
		var de *DecodeError
		if errors.As(err, &de) && method == http.MethodGet && try == 1 && !onceCall(ctx) {
			c.retries.Add(1)
			c.observeRetry(de.Route, OutcomeDecodeError)
			c.log.Warn("github response did not decode, fetching again", "route", de.Route, "error", de.Err)
			ctx = refetch(ctx)
			continue
		}
		return v, resp, err
	}
}

// incomplete rejects a decoded pull request without a number, a state or a
// head: GitHub has answered 200 with "{}" for one, and a pull request
// without a state would read as one that is no longer open.
func incomplete(v any) error {
	if pp, ok := v.(**gh.PullRequest); ok && pp != nil {
		if p := *pp; p == nil || p.Number == nil || p.State == nil || p.GetHead().GetSHA() == "" {
			return errors.New("pull request without number, state or head")
		}
	}
	return nil
}

// send is the single place requests go out, and where errors become typed.
func (c *Client) send(ctx context.Context, method, u string, body, v any, idempotent bool) (*gh.Response, error) {
	req, err := c.gh.NewRequest(method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: build request: %w", method, pathOnly(u), err)
	}
	if _, ok := ctx.Value(callInfoKey{}).(*callInfo); !ok {
		ctx, _ = withCall(ctx, idempotent)
	}
	resp, err := c.gh.Do(ctx, req, v)
	if err == nil {
		if derr := incomplete(v); derr != nil {
			return resp, c.decodeError(req, derr)
		}
		return resp, nil
	}
	var accepted *gh.AcceptedError
	if errors.As(err, &accepted) {
		// 202: GitHub queued the work (update-branch). Not an error.
		if v != nil && len(accepted.Raw) > 0 {
			if derr := json.Unmarshal(accepted.Raw, v); derr != nil {
				return resp, c.decodeError(req, derr)
			}
		}
		return resp, nil
	}
	return resp, c.translate(req, err)
}

// translate turns go-github and transport errors into this package's typed
// errors, naming the request by method and path, and scrubbing the token from
// any text the server echoed.
func (c *Client) translate(req *http.Request, err error) error {
	method, path := req.Method, req.URL.Path
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		ae := APIError{
			Method:           method,
			Path:             path,
			Status:           er.Response.StatusCode,
			Message:          c.scrub(er.Message),
			DocumentationURL: er.DocumentationURL,
			kind:             kindForStatus(er.Response.StatusCode),
		}
		if ae.Status == http.StatusUnprocessableEntity {
			ve := &ValidationError{APIError: ae, Errors: append([]gh.Error(nil), er.Errors...)}
			for i := range ve.Errors {
				ve.Errors[i].Message = c.scrub(ve.Errors[i].Message)
			}
			return ve
		}
		return &ae
	}
	var rle *RateLimitError
	if errors.As(err, &rle) {
		return rle
	}
	var ghRate *gh.RateLimitError
	if errors.As(err, &ghRate) {
		return &RateLimitError{Method: method, Path: path, Resource: "core", Reset: ghRate.Rate.Reset.Time}
	}
	var ghAbuse *gh.AbuseRateLimitError
	if errors.As(err, &ghAbuse) {
		return &RateLimitError{Method: method, Path: path, Secondary: true, Wait: ghAbuse.GetRetryAfter(), At: c.now()}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the full URL
	}
	if isDecodeErr(err) {
		return c.decodeError(req, err)
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}

// onceCall reports a call that must not be retried (Ping).
func onceCall(ctx context.Context) bool {
	ci, ok := ctx.Value(callInfoKey{}).(*callInfo)
	return ok && ci.once
}

func (c *Client) decodeError(req *http.Request, err error) error {
	return &DecodeError{Method: req.Method, Path: req.URL.Path, Route: routeOf(req.Method, c.baseURL.Path, req.URL.Path), Err: err}
}

func isDecodeErr(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF)
}

// scrub removes the token from text a server sent back.
func (c *Client) scrub(s string) string {
	if t := c.token.Reveal(); len(t) >= 4 {
		s = strings.ReplaceAll(s, t, redacted)
	}
	return s
}

func pathOnly(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// walkPages is the one pagination loop every list shares. It GETs u with
// get, which reports the response and how many items the page held, then
// follows rel="next". A page that came back full with no next link is not
// taken as the last: the Link it carries may be a remembered one (a 304
// without Link keeps the stored header), and a list that grew past a page
// boundary changes no byte of that page. So the next page is asked for
// anyway, conditionally like every page; an empty (or short) one ends the
// walk, and on an unchanged list it costs a 304, no quota.
func (c *Client) walkPages(u string, get func(u string) (resp *gh.Response, items int, err error)) error {
	prevETag := ""
	for page := 1; u != ""; page++ {
		if page > maxPages {
			return fmt.Errorf("GET %s: more than %d pages, giving up", pathOnly(u), maxPages)
		}
		resp, items, err := get(u)
		if err != nil {
			return err
		}
		next, err := c.nextLink(resp)
		if err != nil {
			return err
		}
		if next == u {
			return fmt.Errorf("GET %s: next page link points to itself", pathOnly(u))
		}
		etag := ""
		if resp != nil && resp.Response != nil {
			etag = resp.Header.Get("ETag")
		}
		if next == "" && fullPage(u, items) && (etag == "" || etag != prevETag) {
			// An ETag equal to the previous page's means the server ignores
			// page: asking further would fetch the same page again.
			next = pageAfter(u)
		}
		prevETag, u = etag, next
	}
	return nil
}

// fullPage reports whether a page of u holding items is as long as a page
// can be: per_page (GitHub's default 30 without it), at most GitHub's cap
// of 100.
func fullPage(u string, items int) bool {
	if items <= 0 {
		return false
	}
	per := 30
	if pu, err := url.Parse(u); err == nil {
		if v, err := strconv.Atoi(pu.Query().Get("per_page")); err == nil && v > 0 {
			per = min(v, 100)
		}
	}
	return items >= per
}

// pageAfter returns u asking for the page after the one it names (page
// absent: the first).
func pageAfter(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	q := pu.Query()
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	q.Set("page", strconv.Itoa(page+1))
	pu.RawQuery = q.Encode()
	return pu.String()
}

// paginate GETs u and every page after it (walkPages), calling each with
// every decoded page; each returns how many items the page held.
func paginate[P any](ctx context.Context, c *Client, u string, each func(P) int) error {
	return c.walkPages(u, func(u string) (*gh.Response, int, error) {
		v, resp, err := doJSON[P](ctx, c, http.MethodGet, u, nil, true)
		if err != nil {
			return nil, 0, err
		}
		return resp, each(v), nil
	})
}

// listAll collects every page of a JSON array.
func listAll[T any](ctx context.Context, c *Client, u string) ([]T, error) {
	var all []T
	err := paginate(ctx, c, u, func(page []T) int {
		all = append(all, page...)
		return len(page)
	})
	return all, err
}

// nextLink returns the rel="next" URL of a response, if any. It must point
// at the API host: the token is not sent elsewhere.
func (c *Client) nextLink(resp *gh.Response) (string, error) {
	if resp == nil || resp.Response == nil {
		return "", nil
	}
	for _, link := range resp.Header.Values("Link") {
		for _, part := range strings.Split(link, ",") {
			segs := strings.Split(part, ";")
			if len(segs) < 2 {
				continue
			}
			target := strings.TrimSpace(segs[0])
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			isNext := false
			for _, p := range segs[1:] {
				if strings.EqualFold(strings.ReplaceAll(strings.TrimSpace(p), " ", ""), `rel="next"`) || strings.TrimSpace(p) == "rel=next" {
					isNext = true
				}
			}
			if !isNext {
				continue
			}
			next, err := c.baseURL.Parse(target[1 : len(target)-1])
			if err != nil {
				return "", fmt.Errorf("GET %s: bad next page link: %w", resp.Request.URL.Path, err)
			}
			if !strings.EqualFold(next.Host, c.baseURL.Host) || next.Scheme != c.baseURL.Scheme {
				return "", fmt.Errorf("GET %s: next page link leaves the API host (%s), refusing to follow", resp.Request.URL.Path, next.Host)
			}
			return next.String(), nil
		}
	}
	return "", nil
}
