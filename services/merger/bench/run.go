package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/benchrun"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim/simci"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/gitx"
	"github.com/prloop/prloop/services/merger"
)

// result is one contender's figures, in real time (the table scales them).
type result struct {
	name string
	// unavailable says why the contender could not run (the merger refused
	// its configuration, or ignored its queue mode); nothing else is set.
	unavailable string
	// incomplete says why the run stopped before every PR left the queue.
	incomplete string
	prs        int
	broken     []int
	// flakyPRs are the PRs whose candidate fails its first attempt.
	flakyPRs []int
	merged   int
	// span is from the first approval to the last merge; ciBusy is the
	// part of it during which at least one CI run was in flight.
	span, ciBusy time.Duration
	// latencies are approval to merge, per merged PR, sorted.
	latencies []time.Duration
	ciRuns    int
	// candidateRuns are the CI runs on the queue's candidate branches;
	// candidateEvents the PRMergeCandidate events (built or invalidated).
	candidateRuns, candidateEvents int
	// failedChecks are the PRs removed with reason checks_failed; others
	// the other ways PRs left without a merge, by reason.
	failedChecks []int
	others       map[events.Reason][]int
	// untested counts merges after which main's tree was not one CI
	// passed; foreign counts commits on main that no bench PR's merge
	// made (counted as untested too). early counts merges whose tree CI
	// passed only after the merge: never right for serial, and for a
	// speculative batch the PRs merged ahead of the green candidate that
	// includes them, whose own candidates had not reported yet.
	untested, foreign, early int
	brokenMerged             []int
	notes                    []string
	// etaErrors are |estimate − actual| per merged PR queued with a known
	// ETA, sorted: the estimate PRMergeQueued announced against the time
	// from that event to PRMerged.
	etaErrors []time.Duration
	// reruns count the PRs whose failed candidate was re-run once
	// (PRMergeCandidate "rerun"); flaky those of them that then merged.
	reruns, flaky int
}

// etaError is |estimate − actual| of a merged PR whose PRMergeQueued
// carried a known estimate: actual is from that event to its PRMerged.
func etaError(o outcome) (time.Duration, bool) {
	if o.eta == nil || !o.eta.Known || o.merged.IsZero() || o.queuedAt.IsZero() {
		return 0, false
	}
	est := time.Duration(o.eta.Seconds * float64(time.Second))
	d := o.merged.Sub(o.queuedAt) - est
	return max(d, -d), true
}

// run measures each contender in turn with the merger binary bin, each in
// a world of its own under root; out receives the progress lines.
func run(ctx context.Context, o options, root, bin string, out io.Writer) ([]result, error) {
	fmt.Fprintf(out, "prloop merger throughput: %d PRs on one base, CI %s, failure share %g, flaky share %g, compression %gx (CI runs %s, approvals within %s)\n",
		o.prs, o.ci, o.fail, o.flaky, o.compress, o.real(o.ci).Round(time.Millisecond), o.real(o.approveWithin).Round(time.Millisecond))
	var results []result
	for _, c := range o.contenders() {
		fmt.Fprintf(out, "\n[%s] %s\n", c.name, strings.Join(c.environ(), " "))
		r, err := measure(ctx, o, filepath.Join(root, c.name), bin, c, out)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// mergerEnv is the merger's configuration: the world's addresses, the
// review policy the poller would have, and the compressed timings.
func mergerEnv(o options, w *world, c contender) []string {
	env := append(os.Environ(),
		"PRLOOP_NATS_URL="+w.conn.URL, "PRLOOP_NATS_CREDS_FILE="+w.conn.CredsFile,
		"PRLOOP_GITHUB_API_URL="+w.srv.URL, "GITHUB_TOKEN="+botToken, "GH_TOKEN=", "PRLOOP_GITHUB_LOGIN="+botLogin,
		"PRLOOP_REVIEWERS="+reviewer, "PRLOOP_HTTP_ADDR=", "PRLOOP_LOG_FORMAT=text", "PRLOOP_LOG_LEVEL=warn",
		"PRLOOP_MERGE_METHOD=squash", "PRLOOP_UPDATE_METHOD=merge", "PRLOOP_REQUIRE_CHECKS=true",
		"PRLOOP_MERGE_POLL_INTERVAL="+o.real(o.poll).String(), "PRLOOP_CHECKS_TIMEOUT="+o.real(o.checksTimeout).String(),
		// GitHub's points a minute per endpoint are a modelled minute's:
		// polling every modelled 10 s is -compress times as many requests
		// a real minute, which the merger's budget would otherwise hold
		// back for most of each minute (the serial queue stood 45 s at a
		// time at -compress 300, with nothing in flight).
		"PRLOOP_GITHUB_POINTS_PER_MINUTE="+strconv.Itoa(int(math.Ceil(github.EndpointPointsPerMinute*o.compress))),
	)
	if o.verbose {
		env = append(env, "PRLOOP_LOG_LEVEL=debug")
	}
	return append(env, c.environ()...)
}

// measure runs one contender: its world, the merger, the CI and the
// approvals, until every PR left the queue or o.limit passed.
func measure(ctx context.Context, o options, dir, bin string, c contender, out io.Writer) (result, error) {
	res := result{name: c.name, prs: o.prs, others: map[events.Reason][]int{}}
	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	broken := brokenSet(o.prs, o.fail, rng)
	for n := range broken {
		res.broken = append(res.broken, n)
	}
	slices.Sort(res.broken)
	flaky := flakySet(o.prs, o.flaky, broken, rng)
	for n := range flaky {
		res.flakyPRs = append(res.flakyPRs, n)
	}
	slices.Sort(res.flakyPRs)
	w, err := newWorld(ctx, o, dir, broken, flaky)
	if err != nil {
		return res, err
	}
	defer w.close()

	var log tail
	cmd := exec.Command(bin)
	cmd.Env = mergerEnv(o, w, c)
	cmd.Stderr = &log
	if o.verbose {
		cmd.Stderr = io.MultiWriter(&log, os.Stderr)
	}
	child, err := benchrun.Start(cmd)
	if err != nil {
		return res, err
	}
	defer child.Stop(15 * time.Second)

	// The merger is up once its durable consumer exists; a configuration
	// it refuses ends the process first.
	if err := waitOrExit(ctx, child, 30*time.Second, func() bool {
		_, err := w.conn.JS.Consumer(ctx, events.StreamName, merger.Name)
		return err == nil
	}); err != nil {
		if errors.Is(err, errExited) {
			res.unavailable = "the merger did not start: " + log.last()
			return res, nil
		}
		return res, fmt.Errorf("merger start: %w; its log: %s", err, log.last())
	}

	runCtx, stopCI := context.WithCancel(ctx)
	defer func() { stopCI(); w.ci.Wait() }()
	if err := w.startCI(runCtx); err != nil {
		return res, err
	}
	if len(w.warmup) > 0 {
		fmt.Fprintf(out, "[%s] warming up: %d PRs merge first, so that the merger has measured its CI time …\n", c.name, len(w.warmup))
	}
	warm, err := w.warmUp(ctx, func(cond func() bool) error { return waitOrExit(ctx, child, o.limit, cond) })
	if errors.Is(err, errExited) {
		res.unavailable = "the merger stopped: " + log.last()
		return res, nil
	} else if err != nil {
		return res, fmt.Errorf("%w; the merger's log: %s", err, log.last())
	}
	fmt.Fprintf(out, "[%s] approving %d PRs (%d broken, %d flaky) …\n", c.name, o.prs, len(broken), len(flaky))
	approved, err := w.approveAll(ctx, rng)
	if err != nil {
		return res, err
	}
	first := time.Now()
	for _, t := range approved {
		if t.Before(first) {
			first = t
		}
	}

	// The queue mode the merger runs is the one its PRMergeQueued says: a
	// merger that does not know PRLOOP_QUEUE_MODE ignores it.
	if err := waitOrExit(ctx, child, o.limit, func() bool { _, ok := w.rec.firstMode(); return ok }); err != nil {
		if errors.Is(err, errExited) {
			res.unavailable = "the merger stopped: " + log.last()
			return res, nil
		}
		return res, fmt.Errorf("no PR was queued: %w; the merger's log: %s", err, log.last())
	}
	if mode, _ := w.rec.firstMode(); mode != c.mode && !(c.mode == "serial" && mode == "") {
		if mode == "" {
			mode = "serial (no mode given)"
		}
		res.unavailable = fmt.Sprintf("the merger ignored PRLOOP_QUEUE_MODE=%s: PRMergeQueued says %s", c.mode, mode)
		return res, nil
	}

	fmt.Fprintf(out, "[%s] merging …\n", c.name)
	progress := time.Now()
	err = waitOrExit(ctx, child, o.limit, func() bool {
		if time.Since(progress) > 15*time.Second {
			progress = time.Now()
			fmt.Fprintf(out, "[%s] %d of %d PRs left the queue, %d CI runs\n", c.name, w.rec.terminal(w.prs), o.prs, len(w.ci.Runs()))
		}
		return w.rec.terminal(w.prs) == o.prs
	})
	switch {
	case errors.Is(err, errExited):
		res.incomplete = "the merger stopped: " + log.last()
	case errors.Is(err, benchrun.ErrTimedOut):
		res.incomplete = fmt.Sprintf("stopped after -limit %s with %d of %d PRs out of the queue", o.limit, w.rec.terminal(w.prs), o.prs)
	case err != nil:
		return res, err
	}
	child.Stop(15 * time.Second)
	stopCI()
	w.ci.Wait()
	if err := res.fill(ctx, w, approved, first, warm); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "[%s] %d merged, %d removed as failing, %d CI runs, %d candidates re-run (%d flaky), %d merges of an untested tree, in %s\n",
		c.name, res.merged, len(res.failedChecks), res.ciRuns, res.reruns, res.flaky, res.untested, res.span.Round(time.Millisecond))
	return res, nil
}

// fill computes the figures from the events, the CI's runs after the
// warm-up ended (warm) and main's history in the simulator's git.
func (res *result) fill(ctx context.Context, w *world, approved map[int]time.Time, first, warm time.Time) error {
	outcomes := w.rec.snapshot()
	var runs []simci.Run
	for _, r := range w.ci.Runs() {
		if !r.Started.Before(warm) {
			runs = append(runs, r)
		}
	}
	res.ciRuns = len(runs)
	for _, r := range runs {
		if strings.HasPrefix(r.Branch, "prloop/queue/") {
			res.candidateRuns++
		}
	}
	for _, e := range w.ci.Errors() {
		res.notes = append(res.notes, "simulated CI: "+e.Error())
	}
	w.rec.mu.Lock()
	for _, e := range w.rec.errs {
		res.notes = append(res.notes, "event: "+e.Error())
	}
	w.rec.mu.Unlock()
	last := first
	for _, p := range w.prs {
		n := p.pr.Number
		o := outcomes[n]
		res.candidateEvents += o.candidates
		if o.reruns > 0 {
			res.reruns++
		}
		switch {
		case !o.merged.IsZero():
			res.merged++
			res.latencies = append(res.latencies, o.merged.Sub(approved[n]))
			if o.reruns > 0 {
				res.flaky++
			}
			if e, ok := etaError(o); ok {
				res.etaErrors = append(res.etaErrors, e)
			}
			if o.merged.After(last) {
				last = o.merged
			}
			if p.broken {
				res.brokenMerged = append(res.brokenMerged, n)
			}
		case o.reason == events.ReasonChecksFailed:
			res.failedChecks = append(res.failedChecks, n)
		case !o.failed.IsZero():
			res.others[o.reason] = append(res.others[o.reason], n)
		}
	}
	slices.Sort(res.latencies)
	slices.Sort(res.etaErrors)
	res.span = last.Sub(first)
	res.ciBusy = busy(runs, first, last)
	return res.checkSafety(ctx, w, runs)
}

// passedTrees says when CI passed each tree: when the first commit of
// that tree whose latest attempt passed reported it. A commit's latest
// attempt is its verdict, as GitHub counts the latest check run of a name:
// a flaky candidate failed its first attempt and passed on its re-run.
func passedTrees(runs []simci.Run) map[string]time.Time {
	latest := map[string]simci.Run{} // commit -> its latest attempt
	for _, r := range runs {
		if cur, ok := latest[r.SHA]; !ok || r.Attempt > cur.Attempt {
			latest[r.SHA] = r
		}
	}
	passed := map[string]time.Time{}
	for _, r := range latest {
		if r.State != simci.Success {
			continue
		}
		if t, ok := passed[r.Tree]; !ok || r.Finished.Before(t) {
			passed[r.Tree] = r.Finished
		}
	}
	return passed
}

// checkSafety walks main's first-parent history since the start: after
// every merge, main's tree must be a tree CI passed (passedTrees: with
// serial the updated PR head, with speculative a candidate), and is
// counted as early when that pass came after the merge. The merge time is
// the simulator's, taken when the merge request arrived; a run counts from
// just before its status was set, so a merge that raced the status by less
// than the write's own duration is not counted early.
func (res *result) checkSafety(ctx context.Context, w *world, runs []simci.Run) error {
	passed := passedTrees(runs)
	mergedAt := map[string]time.Time{} // merge commit -> when
	for _, p := range w.prs {
		info, err := w.sim.PRInfo(p.pr)
		if err != nil {
			return err
		}
		if info.Merged {
			mergedAt[info.MergeCommitSHA] = info.MergedAt
		}
	}
	g := &gitx.Runner{}
	list, err := g.Run(ctx, gitx.Cmd{GitDir: w.sim.GitDir(w.repo), Args: []string{"rev-list", "--first-parent", w.startTip + ".." + base}})
	if err != nil {
		return fmt.Errorf("read main's history: %w", err)
	}
	for _, sha := range strings.Fields(list) {
		at, ok := mergedAt[sha]
		if !ok {
			res.foreign++
			res.untested++
			continue
		}
		tree, _, err := w.sim.Tree(w.repo, sha)
		if err != nil {
			return err
		}
		switch t, ok := passed[tree]; {
		case !ok:
			res.untested++
		case t.After(at):
			res.early++
		}
	}
	return nil
}

// busy is how much of [from, to] at least one of the runs was in flight.
func busy(runs []simci.Run, from, to time.Time) time.Duration {
	type span struct{ a, b time.Time }
	var spans []span
	for _, r := range runs {
		a, b := r.Started, r.Finished
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			spans = append(spans, span{a, b})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return x.a.Compare(y.a) })
	var total time.Duration
	var cur span
	for i, s := range spans {
		switch {
		case i == 0:
			cur = s
		case s.a.After(cur.b):
			total += cur.b.Sub(cur.a)
			cur = s
		case s.b.After(cur.b):
			cur.b = s.b
		}
	}
	if len(spans) > 0 {
		total += cur.b.Sub(cur.a)
	}
	return total
}

// errExited says the contender's process ended during a wait.
var errExited = errors.New("the merger exited")

// waitOrExit waits for cond like benchrun.WaitUntil, and ends early with
// errExited when the child ends.
func waitOrExit(ctx context.Context, child *benchrun.Child, limit time.Duration, cond func() bool) error {
	exited := false
	err := benchrun.WaitUntil(ctx, limit, func() bool {
		select {
		case <-child.Done():
			exited = true
			return true
		default:
			return cond()
		}
	})
	if exited && !cond() {
		return errExited
	}
	return err
}

// tail keeps the end of the merger's log, for the reason it stopped.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the last 8 KiB written.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	return len(p), nil
}

// last returns the last non-empty lines of the log, joined.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	if s := strings.Join(lines, " | "); s != "" {
		return s
	}
	return "(no output)"
}
