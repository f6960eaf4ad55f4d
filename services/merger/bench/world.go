package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/benchrun"
	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simci"
	"github.com/prloop/prloop/pkg/natsx"
)

// Who is who on the simulator.
const (
	botLogin = "prloop-bot"
	botToken = "tok-prloop"
	reviewer = "alice"
	author   = "agent"
	base     = "main"
	// checkContext is the required check the simulated CI reports.
	checkContext = "ci/test"
	// brokenPrefix names the file a broken PR adds; CI fails any commit
	// whose tree holds one.
	brokenPrefix = "BROKEN-"
	// flakyPrefix names the file a flaky PR adds; CI fails the first
	// attempt of a commit that adds one (flakyCommit).
	flakyPrefix = "FLAKY-"
)

// world is one contender's simulator, NATS server, PRs and simulated CI.
type world struct {
	o    options
	sim  *ghsim.Sim
	srv  *httptest.Server
	conn *natsx.Conn
	repo ghref.Repo
	prs  []benchPR
	// warmup are the PRs merged before the measured ones (-warmup), so
	// that the merger has measured its CI time when they are queued and
	// announces a known ETA; they are in no figure.
	warmup []benchPR
	// startTip is main's commit when the contender starts: every commit
	// after it on main's first-parent line is a merge to check.
	startTip string
	ci       *simci.CI
	rec      *recorder
}

// benchPR is one PR of the workload.
type benchPR struct {
	pr      ghref.PR
	head    string
	created time.Time
	broken  bool
	flaky   bool
}

// brokenSet picks which of n PRs are broken: the share f of them,
// rounded, at random.
func brokenSet(n int, f float64, rng *rand.Rand) map[int]bool {
	k := int(math.Round(f * float64(n)))
	out := map[int]bool{}
	for _, i := range rng.Perm(n)[:k] {
		out[i+1] = true
	}
	return out
}

// flakySet picks which of n PRs are flaky: the share f of them, rounded,
// at random among those not broken. It draws nothing from rng for f = 0,
// so that the other choices of a seed stay as they were.
func flakySet(n int, f float64, broken map[int]bool, rng *rand.Rand) map[int]bool {
	out := map[int]bool{}
	k := int(math.Round(f * float64(n)))
	if k == 0 {
		return out
	}
	for _, i := range rng.Perm(n) {
		if len(out) == k {
			break
		}
		if !broken[i+1] {
			out[i+1] = true
		}
	}
	return out
}

// flakyCommit reports whether a commit adds a flaky PR's file (added:
// the files none of its parents has): the PR's queue candidate, a squash
// on the candidate before it, whose first CI attempt fails. The next
// candidate has the file from its parent already, and an updated PR head
// (a merge of the base into the head) from one parent or the other: not
// flaky.
func flakyCommit(added []string) bool {
	return slices.ContainsFunc(added, func(f string) bool { return strings.HasPrefix(f, flakyPrefix) })
}

// newWorld builds a contender's world under dir: the repository with main
// required to pass ci/test, the PRs, a commit on main after them (so that
// every PR is behind its base, as in a busy repository, and the queue
// must test what it merges rather than a head CI saw on its own), and NATS.
func newWorld(ctx context.Context, o options, dir string, broken, flaky map[int]bool) (*world, error) {
	w := &world{o: o}
	srv := httptest.NewUnstartedServer(nil)
	sim, err := ghsim.New(ghsim.Options{
		Dir: filepath.Join(dir, "git"), RealClock: true, PrimaryLimit: 1 << 30, GitHTTP: true,
		BaseURL: "http://" + srv.Listener.Addr().String(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	srv.Config.Handler = sim
	srv.Start()
	w.sim, w.srv = sim, srv
	sim.AddToken(botToken, botLogin)
	w.repo, err = sim.CreateRepo("bench", "widgets", map[string]string{"README.md": "# widgets\n"})
	if err != nil {
		w.close()
		return nil, err
	}
	for login, perm := range map[string]string{botLogin: "write", reviewer: "write", author: "write"} {
		if err := sim.SetPermission(w.repo, login, perm); err != nil {
			w.close()
			return nil, err
		}
	}
	if err := sim.SetRequiredChecks(w.repo, base, checkContext); err != nil {
		w.close()
		return nil, err
	}
	for n := 1; n <= o.prs+o.warmup; n++ {
		branch := fmt.Sprintf("change-%d", n)
		files := map[string]string{fmt.Sprintf("changes/%d.txt", n): fmt.Sprintf("change %d\n", n)}
		if broken[n] {
			files[fmt.Sprintf("%s%d", brokenPrefix, n)] = "this change breaks the build\n"
		}
		if flaky[n] {
			files[fmt.Sprintf("%s%d", flakyPrefix, n)] = "this change's test is flaky\n"
		}
		head, err := sim.PushCommit(w.repo, branch, author, files, fmt.Sprintf("Change %d", n))
		if err == nil {
			var pr ghref.PR
			pr, err = sim.OpenPR(w.repo, ghsim.PRInput{Title: fmt.Sprintf("Change %d", n), Head: branch, Author: author})
			if err == nil {
				var info ghsim.PRSnapshot
				info, err = sim.PRInfo(pr)
				p := benchPR{pr: pr, head: head, created: info.CreatedAt, broken: broken[n], flaky: flaky[n]}
				if n <= o.prs {
					w.prs = append(w.prs, p)
				} else {
					w.warmup = append(w.warmup, p)
				}
			}
		}
		if err != nil {
			w.close()
			return nil, fmt.Errorf("open PR %d: %w", n, err)
		}
	}
	if w.startTip, err = sim.PushCommit(w.repo, base, reviewer, map[string]string{"NEWS.md": "main moved on\n"}, "Work on main"); err != nil {
		w.close()
		return nil, err
	}
	w.conn, err = natsx.Connect(ctx, natsx.Options{DataDir: filepath.Join(dir, "nats"), Port: -1, Name: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		w.close()
		return nil, err
	}
	if err := events.EnsureStreams(ctx, w.conn.JS, events.StreamOptions{}); err != nil {
		w.close()
		return nil, err
	}
	if w.rec, err = watch(ctx, w.conn); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// startCI starts the simulated CI on every branch but main: the PRs'
// heads as opened are not tested (they are behind main, and the queue
// never merges them as they are), main's own post-merge runs are not the
// queue's cost and would make the safety check vacuous. With flaky PRs it
// reports a GitHub Actions job, whose re-run the merger can ask for.
func (w *world) startCI(ctx context.Context) error {
	w.ci = &simci.CI{Sim: w.sim, Repo: w.repo, Context: checkContext, Duration: w.o.real(w.o.ci), Every: 5 * time.Millisecond,
		Skip: func(branch string) bool { return branch == base },
		Verdict: func(files []string) string {
			if slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, brokenPrefix) }) {
				return simci.Failure
			}
			return simci.Success
		}}
	if w.o.flaky > 0 {
		w.ci.Actions, w.ci.Flaky = true, flakyCommit
	}
	return w.ci.Start(ctx)
}

// approveAll approves every PR within the approval window, in random
// order at random moments (approve). It returns when each approval was
// published.
func (w *world) approveAll(ctx context.Context, rng *rand.Rand) (map[int]time.Time, error) {
	window := w.o.real(w.o.approveWithin)
	order := rng.Perm(len(w.prs))
	at := make([]time.Duration, len(order))
	for i := range at {
		at[i] = time.Duration(rng.Int64N(int64(window) + 1))
	}
	slices.Sort(at)
	approved := map[int]time.Time{}
	start := time.Now()
	for i, idx := range order {
		p := w.prs[idx]
		if err := ctxtime.Sleep(ctx, time.Until(start.Add(at[i]))); err != nil {
			return nil, err
		}
		if err := w.approve(ctx, p); err != nil {
			return nil, err
		}
		approved[p.pr.Number] = time.Now()
	}
	return approved, nil
}

// approve approves p: alice's APPROVED review on the head on GitHub, then
// the poller's PRReviewApproved (anchored at the PR's creation, when its
// head became the head).
func (w *world) approve(ctx context.Context, p benchPR) error {
	if _, err := w.sim.AddReview(p.pr, ghsim.ReviewInput{Login: reviewer, State: "APPROVED", CommitID: p.head, Body: "LGTM"}); err != nil {
		return fmt.Errorf("approve %s: %w", p.pr, err)
	}
	if _, _, err := events.NewEmitter(w.conn.JS, "bench").Emit(ctx, &events.ReviewApproved{
		Base: events.Base{PR: p.pr, HeadSHA: p.head}, Status: events.StatusApproved, Actor: reviewer,
		Approvers: []string{reviewer}, Anchor: p.created,
	}, p.head, "bench"); err != nil {
		return fmt.Errorf("announce the approval of %s: %w", p.pr, err)
	}
	return nil
}

// warmUp approves the warm-up PRs at once and waits until each left the
// queue; then main's tip is where the measured run starts. It returns
// when the warm-up ended.
func (w *world) warmUp(ctx context.Context, done func(cond func() bool) error) (time.Time, error) {
	if len(w.warmup) == 0 {
		return time.Now(), nil
	}
	for _, p := range w.warmup {
		if err := w.approve(ctx, p); err != nil {
			return time.Time{}, err
		}
	}
	if err := done(func() bool { return w.rec.terminal(w.warmup) == len(w.warmup) }); err != nil {
		return time.Time{}, fmt.Errorf("warm-up: %w", err)
	}
	tips, err := w.sim.Branches(w.repo)
	if err != nil {
		return time.Time{}, err
	}
	w.startTip = tips[base]
	return time.Now(), nil
}

// close stops NATS and the simulator.
func (w *world) close() {
	if w.rec != nil {
		w.rec.stop()
	}
	if w.conn != nil {
		_ = w.conn.Close(context.Background())
	}
	w.srv.Close()
	_ = w.sim.Close()
}

// outcome is how one PR left the queue, as the merger's events say.
type outcome struct {
	queued bool
	mode   string // PRMergeQueued's queue mode
	// queuedAt is when the first PRMergeQueued was seen, eta what it
	// estimated.
	queuedAt time.Time
	eta      *events.QueueETA
	// reruns are PRMergeCandidate "rerun" events naming the PR.
	reruns     int
	merged     time.Time
	mergeSHA   string
	failed     time.Time
	reason     events.Reason
	detail     string
	candidates int // PRMergeCandidate events naming the PR
}

// recorder keeps each PR's outcome from the event stream.
type recorder struct {
	mu   sync.Mutex
	prs  map[int]*outcome
	errs []error
	stop func()
}

func watch(ctx context.Context, conn *natsx.Conn) (*recorder, error) {
	r := &recorder{prs: map[int]*outcome{}}
	stop, err := benchrun.WatchEvents(ctx, conn.JS, r.add)
	r.stop = stop
	return r, err
}

func (r *recorder) add(e benchrun.Event) {
	switch e.Type {
	case events.TypeMergeQueued, events.TypeMerged, events.TypeMergeFailed, events.TypeMergeCandidate:
	default:
		return
	}
	d, err := e.Data()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	o := r.prs[e.PR.Number]
	if o == nil {
		o = &outcome{}
		r.prs[e.PR.Number] = o
	}
	switch d := d.(type) {
	case *events.MergeQueued:
		if !o.queued {
			o.queued, o.mode, o.queuedAt, o.eta = true, d.Mode, e.Seen, d.ETA
		}
	case *events.Merged:
		if o.merged.IsZero() {
			o.merged, o.mergeSHA = e.Seen, d.MergeSHA
		}
	case *events.MergeFailed:
		if o.failed.IsZero() {
			o.failed, o.reason, o.detail = e.Seen, d.Reason, d.Detail
		}
	case *events.MergeCandidate:
		o.candidates++
		if d.State == events.CandidateRerun {
			o.reruns++
		}
	}
}

// snapshot copies the outcomes.
func (r *recorder) snapshot() map[int]outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]outcome, len(r.prs))
	for n, o := range r.prs {
		out[n] = *o
	}
	return out
}

// firstMode is the queue mode of the first PRMergeQueued, and whether
// there was one.
func (r *recorder) firstMode() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.prs {
		if o.queued {
			return o.mode, true
		}
	}
	return "", false
}

// terminal counts the PRs of prs that left the queue, merged or not.
func (r *recorder) terminal(prs []benchPR) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range prs {
		if o := r.prs[p.pr.Number]; o != nil && (!o.merged.IsZero() || !o.failed.IsZero()) {
			n++
		}
	}
	return n
}
