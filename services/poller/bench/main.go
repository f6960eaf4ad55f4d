// Command bench measures the poller against the GitHub simulator, side by
// side with the naive design that polls each PR's reactions and comments on
// every tick, and prints one table.
//
//	go run ./services/poller/bench -prs 10000 -repos 100
//
// Both contenders run as their own processes (the real poller binary, and
// this binary re-executed as the naive poller) against one simulator and one
// NATS server held by this process, so that request counts come from the
// simulator's accounting (a 304 does not count against the primary limit)
// and peak RSS is the contender's alone.
//
// Time is compressed: the poll interval given (default 30 s) is divided by
// -compress, and per-tick figures are scaled back to an hour and a minute of
// the uncompressed interval. Detection latency is measured in intervals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/benchrun"
	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/services/poller"
)

type options struct {
	prs, repos int
	// watched is how many of the PRs the agent opened, those prloop
	// watches (PRLOOP_WATCH_AUTHORS=agent); 0: every PR, no filter.
	watched          int
	caseName         string
	interval         time.Duration
	compress         float64
	idleTicks        int
	lifecycles       int
	naiveLifecycles  int
	skipBaseline     bool
	role             string
	routes           bool
	concurrency      int
	naiveConcurrency int
}

func main() {
	var o options
	flag.IntVar(&o.prs, "prs", 10000, "watched PRs in all")
	flag.IntVar(&o.repos, "repos", 100, "repositories the PRs are spread over")
	flag.IntVar(&o.watched, "watched", 0, "PRs the agent opened, the only ones watched (PRLOOP_WATCH_AUTHORS); 0: every PR is watched")
	flag.StringVar(&o.caseName, "case", "", "a named shape: org (10,000 PRs over 1,000 repositories, 500 watched); sets -prs, -repos, -watched")
	flag.DurationVar(&o.interval, "interval", 30*time.Second, "poll interval being modelled")
	flag.Float64Var(&o.compress, "compress", 30, "time compression: the real interval is interval/compress")
	flag.IntVar(&o.idleTicks, "idle-ticks", 4, "intervals measured with no reviewer activity")
	flag.IntVar(&o.lifecycles, "lifecycles", 40, "PRs taken through 👀 → comments → 👍 (three state changes each) for prloop")
	flag.IntVar(&o.naiveLifecycles, "naive-lifecycles", 10, "the same for the naive baseline (its ticks are long)")
	flag.BoolVar(&o.skipBaseline, "skip-baseline", false, "measure only prloop's poller")
	flag.BoolVar(&o.routes, "routes", false, "print the idle phase's requests by route and status")
	flag.StringVar(&o.role, "role", "", "internal: run as the naive poller")
	flag.IntVar(&o.concurrency, "concurrency", 8, "prloop poller's PRLOOP_POLL_CONCURRENCY")
	flag.IntVar(&o.naiveConcurrency, "naive-concurrency", 8, "the naive poller's concurrent requests")
	flag.Parse()
	if err := o.applyCase(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if o.role == "naive" {
		err = runNaive(ctx)
	} else {
		_, err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func watchedLabel(o options) string {
	if o.watched == 0 {
		return "all"
	}
	return strconv.Itoa(o.watched)
}

// applyCase sets the shape of a named case.
func (o *options) applyCase() error {
	switch o.caseName {
	case "":
	case "org":
		// An organisation where agents work: 1,000 repositories of 10
		// open PRs each, one in twenty opened by the agent and watched,
		// spread over half the repositories.
		o.prs, o.repos, o.watched = 10000, 1000, 500
	default:
		return fmt.Errorf("-case %q: want org", o.caseName)
	}
	if o.watched > o.prs {
		return fmt.Errorf("-watched %d: more than -prs %d", o.watched, o.prs)
	}
	return nil
}

// result is one contender's figures.
type result struct {
	name             string
	warmup           time.Duration
	idleCounted      float64 // primary calls per tick at idle
	idleTotal        float64 // requests per tick at idle
	perChange        float64 // primary calls per state change
	changes          int
	p50, p99         float64 // detection latency in intervals
	p99Excess        float64 // seconds of real time beyond one interval
	rssMB            float64
	activityRequests float64 // requests per tick during activity
	busiestRoute     string  // the endpoint with the most points at idle
	busiestPoints    float64 // its points per tick (GET 1, writes 5)
	searches         float64 // search requests per tick at idle
}

// run measures prloop's poller and, unless o.skipBaseline, the naive
// baseline, prints the table and returns each contender's figures.
func run(ctx context.Context, o options) ([]result, error) {
	realInterval := time.Duration(float64(o.interval) / o.compress)
	fmt.Printf("prloop poller benchmark: %d PRs over %d repos (%s watched), interval %s (run at %s, compression %.0fx)\n",
		o.prs, o.repos, watchedLabel(o), o.interval, realInterval, o.compress)

	root, err := benchrun.ScratchDir("prloop-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)

	bin := filepath.Join(root, "poller")
	if err := benchrun.Build(ctx, "./services/poller/cmd/poller", bin); err != nil {
		return nil, err
	}

	var results []result
	r, err := measure(ctx, o, root, "prloop", realInterval, o.lifecycles, func(env []string) *exec.Cmd {
		return exec.Command(bin)
	})
	if err != nil {
		return nil, fmt.Errorf("prloop: %w", err)
	}
	results = append(results, r)
	if !o.skipBaseline {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		r, err := measure(ctx, o, root, "naive", realInterval, o.naiveLifecycles, func(env []string) *exec.Cmd {
			return exec.Command(self, "-role", "naive")
		})
		if err != nil {
			return nil, fmt.Errorf("naive: %w", err)
		}
		results = append(results, r)
	}
	printTable(o, realInterval, results)
	return results, nil
}

// world is one contender's simulator and NATS.
type world struct {
	sim  *ghsim.Sim
	srv  *httptest.Server
	conn *natsx.Conn
	// prs are the watched PRs; unwatched counts the others.
	prs       []ghref.PR
	unwatched int
	repos     []string
	seen      *seenEvents
}

func setup(ctx context.Context, o options, dir string) (*world, error) {
	sim, err := ghsim.New(ghsim.Options{Dir: filepath.Join(dir, "git"), RealClock: true, PrimaryLimit: 1 << 30,
		// GitHub's 30 searches a minute, in the bench's compressed minutes.
		SearchPerMinute: int(30 * o.compress),
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	w := &world{sim: sim}
	w.srv = httptest.NewServer(sim)
	sim.AddToken("tok-prloop", "prloop-bot")
	sim.AddToken("tok-alice", "alice")
	per := o.prs / o.repos
	for i := range o.repos {
		repo, err := sim.CreateRepo("bench", fmt.Sprintf("repo-%03d", i), map[string]string{"README.md": "bench\n"})
		if err != nil {
			return nil, err
		}
		if err := sim.SetPermission(repo, "alice", "write"); err != nil {
			return nil, err
		}
		agent := per
		if o.watched > 0 {
			// The agent's PRs, spread evenly: repository i holds those
			// of the watched/prs share that fall in its PRs.
			agent = (i+1)*per*o.watched/o.prs - i*per*o.watched/o.prs
			others, err := sim.OpenPRs(repo, per-agent, "someone")
			if err != nil {
				return nil, err
			}
			w.unwatched += len(others)
		}
		prs, err := sim.OpenPRs(repo, agent, "agent")
		if err != nil {
			return nil, err
		}
		w.prs = append(w.prs, prs...)
		w.repos = append(w.repos, repo.String())
	}
	w.conn, err = natsx.Connect(ctx, natsx.Options{DataDir: filepath.Join(dir, "nats"), Port: -1, Name: "bench"})
	if err != nil {
		return nil, err
	}
	if err := events.EnsureStreams(ctx, w.conn.JS, events.StreamOptions{}); err != nil {
		return nil, err
	}
	w.seen, err = watchEvents(ctx, w.conn.JS)
	return w, err
}

func (w *world) close() {
	_ = w.conn.Close(context.Background())
	w.srv.Close()
	_ = w.sim.Close()
}

func measure(ctx context.Context, o options, root, name string, realInterval time.Duration, lifecycles int, command func([]string) *exec.Cmd) (result, error) {
	res := result{name: name}
	dir := filepath.Join(root, name)
	fmt.Printf("\n[%s] creating %d PRs …\n", name, o.prs)
	w, err := setup(ctx, o, dir)
	if err != nil {
		return res, err
	}
	defer w.close()
	// Watching begins on PRs that exist, as on a real repository, not on
	// PRs opened in the same seconds: prloop's poller reads a PR active
	// within poller.ListSettle of its evaluation once more (four requests),
	// which the bench's burst of creations would turn into 10,000.
	if err := ctxtime.Sleep(ctx, poller.ListSettle); err != nil {
		return res, err
	}

	env := append(os.Environ(),
		"PRLOOP_NATS_URL="+w.conn.URL, "PRLOOP_NATS_CREDS_FILE="+w.conn.CredsFile, "PRLOOP_GITHUB_API_URL="+w.srv.URL, "GITHUB_TOKEN=tok-prloop", "GH_TOKEN=",
		"PRLOOP_GITHUB_LOGIN=prloop-bot", "PRLOOP_REPOS="+strings.Join(w.repos, ","), "PRLOOP_REVIEWERS=alice",
		"PRLOOP_POLL_INTERVAL="+realInterval.String(), "PRLOOP_REVIEW_TIMEOUT=0", "PRLOOP_LOG_LEVEL=warn",
		"PRLOOP_LOG_FORMAT=text", "PRLOOP_HTTP_ADDR=", "PRLOOP_POLL_CONCURRENCY="+strconv.Itoa(o.concurrency),
		"BENCH_CONCURRENCY="+strconv.Itoa(o.naiveConcurrency),
		// Polling is measured, not the commit status line: its writes are
		// paced at GitHub's 80 content-creating requests a minute, so the
		// first status of 10,000 PRs takes over two hours to write, and
		// would be counted as idle cost here. BENCHMARKS.md measures the
		// status writes apart.
		"PRLOOP_POST_STATUS=false",
		// The poller's share of the search limit, compressed like it.
		"PRLOOP_POLL_SEARCH_PER_MINUTE="+strconv.Itoa(int(20*o.compress)),
		// GitHub's 900 points a minute per endpoint, in compressed minutes.
		"PRLOOP_GITHUB_POINTS_PER_MINUTE="+strconv.Itoa(int(900*o.compress)),
		// The default idle cadence (10m), compressed like the interval.
		"PRLOOP_IDLE_PROBE_INTERVAL="+time.Duration(float64(10*time.Minute)/o.compress).String(),
	)
	if o.watched > 0 {
		env = append(env, "PRLOOP_WATCH_AUTHORS=agent")
	}
	if d := os.Getenv("BENCH_CHILD_GODEBUG"); d != "" {
		env = append(env, "GODEBUG="+d) // e.g. gctrace=1, to study the contender's heap
	}
	cmd := command(env)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	start := time.Now()
	child, err := benchrun.Start(cmd)
	if err != nil {
		return res, err
	}
	defer child.Stop(15 * time.Second)

	// Warm-up: every PR's first status.
	fmt.Printf("[%s] warming up (first status of every PR) …\n", name)
	exited := func() bool {
		select {
		case <-child.Done():
			return true
		default:
			return false
		}
	}
	if err := benchrun.WaitUntil(ctx, 30*time.Minute, func() bool { return w.seen.distinctPRs() >= len(w.prs) || exited() }); err != nil {
		return res, fmt.Errorf("warm-up: %d of %d PRs reported: %w", w.seen.distinctPRs(), len(w.prs), err)
	}
	if exited() {
		return res, fmt.Errorf("warm-up: %d of %d PRs reported when the contender ended: %v", w.seen.distinctPRs(), len(w.prs), child.Err())
	}
	res.warmup = time.Since(start)

	// Idle: nobody does anything for a few intervals. One interval passes
	// first, so the tick in flight at the end of warm-up is not counted.
	if err := ctxtime.Sleep(ctx, realInterval); err != nil {
		return res, err
	}
	w.sim.ResetStats()
	idleStart := time.Now()
	if err := ctxtime.Sleep(ctx, time.Duration(o.idleTicks)*realInterval); err != nil {
		return res, err
	}
	idle := w.sim.Stats()
	idleTicks := float64(time.Since(idleStart)) / float64(realInterval)
	res.idleCounted = float64(idle.Counted) / idleTicks
	res.idleTotal = float64(idle.Total) / idleTicks
	fmt.Printf("[%s] idle: %.1f intervals: %d primary, %d requests\n", name, idleTicks, idle.Counted, idle.Total)
	if o.routes {
		fmt.Printf("[%s] idle requests by route and status: %v\n", name, idle.ByRouteStatus)
	}
	res.busiestRoute, res.busiestPoints = busiest(idle.ByRoute)
	res.busiestPoints /= idleTicks
	res.searches = float64(idle.ByRoute["GET /search/issues"]) / idleTicks

	// Activity: reviewers take PRs through 👀 → comments → 👍, one state
	// change at a time per PR, at random moments relative to the ticks.
	fmt.Printf("[%s] activity: %d review lifecycles …\n", name, lifecycles)
	w.sim.ResetStats()
	actStart := time.Now()
	lat, err := activity(ctx, w, lifecycles, realInterval)
	if err != nil {
		return res, err
	}
	act := w.sim.Stats()
	actDur := time.Since(actStart)
	actTicks := float64(actDur) / float64(realInterval)
	res.changes = len(lat)
	res.perChange = float64(act.Counted) / float64(len(lat))
	res.activityRequests = float64(act.Total) / actTicks
	slices.Sort(lat)
	res.p50 = benchrun.Percentile(lat, 0.50).Seconds() / realInterval.Seconds()
	res.p99 = benchrun.Percentile(lat, 0.99).Seconds() / realInterval.Seconds()
	res.p99Excess = (benchrun.Percentile(lat, 0.99) - realInterval).Seconds()
	res.rssMB = peakRSS(cmd.Process.Pid)
	fmt.Printf("[%s] activity: %d changes in %s: %d primary, %d requests; peak RSS %.0f MB\n", name, len(lat), actDur.Round(time.Millisecond), act.Counted, act.Total, res.rssMB)
	return res, nil
}

// busiest returns the route with the most secondary-limit points (GitHub:
// 1 for a GET, 5 for a write, "Calculating points for the secondary rate
// limit") and its points.
func busiest(byRoute map[string]int) (string, float64) {
	best, points := "", 0.0
	for route, n := range byRoute {
		p := float64(n)
		if !strings.HasPrefix(route, "GET ") && !strings.HasPrefix(route, "HEAD ") {
			p *= 5
		}
		if p > points || (p == points && route < best) {
			best, points = route, p
		}
	}
	return best, points
}

func activity(ctx context.Context, w *world, lifecycles int, interval time.Duration) ([]time.Duration, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	picked := rng.Perm(len(w.prs))[:lifecycles]
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	errc := make(chan error, lifecycles)
	for i, idx := range picked {
		pr := w.prs[idx]
		// Spread the lifecycles over a few intervals (drawn here: rng is
		// not safe for concurrent use).
		startIn := time.Duration(rng.Int64N(int64(interval)*3)) + time.Duration(i)*time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(startIn) // the bench's schedule of reviewer actions
			steps := []struct {
				do   func() error
				want events.Type
			}{
				{func() error {
					id, err := w.sim.AddReaction(pr, "alice", "eyes")
					reactionIDs.put(pr, "eyes", id)
					return err
				}, events.TypeReviewInProgress},
				{func() error {
					if _, err := w.sim.AddIssueComment(pr, "alice", "Please handle the error."); err != nil {
						return err
					}
					return removeReaction(w.sim, pr, "eyes")
				}, events.TypeFeedbackReceived},
				{func() error { _, err := w.sim.AddReaction(pr, "alice", "+1"); return err }, events.TypeReviewApproved},
			}
			for _, st := range steps {
				// A random moment within the next interval, at least a second
				// on: GitHub's timestamps have whole seconds.
				time.Sleep(time.Duration(rand.Int64N(int64(interval))) + time.Second)
				t0 := time.Now()
				if err := st.do(); err != nil {
					errc <- err
					return
				}
				t1, err := w.seen.wait(ctx, pr, st.want, 20*time.Minute)
				if err != nil {
					errc <- fmt.Errorf("%s never reported %s: %w", pr, st.want, err)
					return
				}
				mu.Lock()
				lat = append(lat, t1.Sub(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return lat, nil
}

// removeReaction removes login's reaction through the admin API: the bench
// tracks reaction ids itself.
func removeReaction(sim *ghsim.Sim, pr ghref.PR, content string) error {
	id, ok := reactionIDs.get(pr, content)
	if !ok {
		return errors.New("no reaction to remove")
	}
	return sim.RemoveReaction(pr, id)
}

var reactionIDs = &idBook{m: map[string]int64{}}

type idBook struct {
	mu sync.Mutex
	m  map[string]int64
}

func (b *idBook) put(pr ghref.PR, content string, id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[pr.Key()+content] = id
}

func (b *idBook) get(pr ghref.PR, content string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok := b.m[pr.Key()+content]
	return id, ok
}

// peakRSS reads a process's peak resident set size (VmHWM) in MB.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// seenEvents records when each event type was first seen per PR.
type seenEvents struct {
	mu    sync.Mutex
	first map[string]time.Time // pr key + type
	prs   map[string]bool
}

func watchEvents(ctx context.Context, js jetstream.JetStream) (*seenEvents, error) {
	s := &seenEvents{first: map[string]time.Time{}, prs: map[string]bool{}}
	_, err := benchrun.WatchEvents(ctx, js, func(e benchrun.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := e.PR.Key() + string(e.Type)
		if _, ok := s.first[k]; !ok {
			s.first[k] = e.Seen
		}
		s.prs[e.PR.Key()] = true
	})
	return s, err
}

func (s *seenEvents) distinctPRs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prs)
}

func (s *seenEvents) wait(ctx context.Context, pr ghref.PR, t events.Type, limit time.Duration) (time.Time, error) {
	var at time.Time
	err := benchrun.WaitUntil(ctx, limit, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		var ok bool
		at, ok = s.first[pr.Key()+string(t)]
		return ok
	})
	return at, err
}

func printTable(o options, realInterval time.Duration, rs []result) {
	perHour := float64(time.Hour) / float64(o.interval)
	perMinute := float64(time.Minute) / float64(o.interval)
	get := func(name string) (result, bool) {
		i := slices.IndexFunc(rs, func(r result) bool { return r.name == name })
		if i < 0 {
			return result{}, false
		}
		return rs[i], true
	}
	p, _ := get("prloop")
	n, haveNaive := get("naive")
	row := func(metric, target string, f func(result) float64, format string) {
		nv, ratio := "—", "—"
		if haveNaive {
			nv = fmt.Sprintf(format, f(n))
			switch {
			case f(p) > 0 && f(n) > 0:
				ratio = fmt.Sprintf("%.1fx", f(n)/f(p))
			case f(p) == 0 && f(n) > 0:
				ratio = "∞" // prloop spends nothing where the baseline spends
			}
		}
		fmt.Printf("| %-46s | %14s | %14s | %7s | %-22s |\n", metric, nv, fmt.Sprintf(format, f(p)), ratio, target)
	}
	fmt.Printf("\nN=%d PRs (%s watched), M=%d repos, interval %s (compressed %.0fx: ran at %s per tick; figures scaled to the %s interval)\n\n",
		o.prs, watchedLabel(o), o.repos, o.interval, o.compress, realInterval, o.interval)
	fmt.Printf("| %-46s | %14s | %14s | %7s | %-22s |\n", "metric", "naive baseline", "prloop poller", "ratio", "target (prloop)")
	fmt.Printf("|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 48), strings.Repeat("-", 16), strings.Repeat("-", 16), strings.Repeat("-", 9), strings.Repeat("-", 24))
	row("primary-rate-limit calls per hour, idle", "≤ 100", func(r result) float64 { return r.idleCounted * perHour }, "%.0f")
	row("total requests per minute, idle", "≤ 450", func(r result) float64 { return r.idleTotal * perMinute }, "%.0f")
	row("busiest endpoint, points per minute, idle", "≤ 300", func(r result) float64 { return r.busiestPoints * perMinute }, "%.0f")
	row("search requests per minute, idle", "≤ 20", func(r result) float64 { return r.searches * perMinute }, "%.0f")
	row("primary calls per state change (while active)", "≤ 4", func(r result) float64 { return r.perChange }, "%.2f")
	row("detection latency p50 (intervals)", "", func(r result) float64 { return r.p50 }, "%.2f")
	row("detection latency p99 (intervals)", "", func(r result) float64 { return r.p99 }, "%.2f")
	row("detection p99 beyond one interval (s, real)", "≤ 2 s", func(r result) float64 { return r.p99Excess }, "%.2f")
	row("peak RSS (MB)", "≤ 256", func(r result) float64 { return r.rssMB }, "%.0f")
	fmt.Printf("\nbusiest endpoint at idle: prloop %s", p.busiestRoute)
	if haveNaive {
		fmt.Printf(", naive %s", n.busiestRoute)
	}
	fmt.Printf("\nstate changes measured: prloop %d", p.changes)
	if haveNaive {
		fmt.Printf(", naive %d", n.changes)
	}
	fmt.Printf("\nwarm-up (first status of every PR): prloop %s. Processing time is not compressed, so the p99 target\n"+
		"(one interval + 2 s) is checked as real seconds beyond one compressed interval.\n", p.warmup.Round(time.Second))
}
