package poller_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app/apptest"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/services/poller"
)

// The simulator's routes for prloop's line: a commit status with a token,
// a check run as a GitHub App.
const (
	statusRoute      = "POST /repos/{owner}/{repo}/statuses/{sha}"
	readRoute        = "GET /repos/{owner}/{repo}/commits/{ref}/status"
	createCheckRoute = "POST /repos/{owner}/{repo}/check-runs"
	updateCheckRoute = "PATCH /repos/{owner}/{repo}/check-runs/{id}"
	readCheckRoute   = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
)

// sinks are the two ways the writer shows the line; each status test runs
// with both.
var sinks = []struct {
	name string
	app  bool
}{
	{name: "commit status"},
	{name: "check run", app: true},
}

// statusEnv is a status writer's world: the poller test world, the PR's
// head, and a count of the statuses the writer reported writing.
type statusEnv struct {
	*env
	head   string
	writes atomic.Int64
	writer *poller.StatusWriter // the last one started
	// app: the writer's client is a GitHub App, so it writes check runs.
	app    bool
	client *github.Client
}

// eachSink runs test in a world of its own for each sink, in parallel.
func eachSink(t *testing.T, test func(t *testing.T, e *statusEnv)) {
	t.Helper()
	for _, sk := range sinks {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			test(t, newStatusEnv(t, sk.app))
		})
	}
}

func newStatusEnv(t *testing.T, app bool) *statusEnv {
	t.Helper()
	e := &statusEnv{env: newEnv(t), app: app}
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	e.head = info.HeadSHA
	e.client = e.env.client
	if app {
		// The simulator mints no installation tokens: the client pretends.
		e.client, err = github.New(t.Context(), github.Config{APIURL: e.srv.URL, Token: tokPrloop}, github.Options{Logger: quiet(), AsApp: true})
		require.NoError(t, err)
	}
	return e
}

// startWriter runs a status writer until the returned stop or the test's
// end.
func (e *statusEnv) startWriter(mut ...func(*poller.StatusOptions)) (stop func()) {
	e.t.Helper()
	opts := poller.StatusOptions{
		Context: "prloop", Coalesce: 20 * time.Millisecond, Line: prstatus.Options{MaxFixCycles: 2, Label: "human-review-required"},
		OnWrite: func(ghref.PR, string, prstatus.Line) { e.writes.Add(1) },
	}
	for _, m := range mut {
		m(&opts)
	}
	e.writer = poller.NewStatusWriter(opts, e.client, e.conn.JS, quiet())
	return apptest.Run(e.t, e.writer)
}

// waitTracked waits until the writer keeps the lines of exactly prs: it
// records a line once GitHub answered its write, a moment after GitHub
// shows it.
func (e *statusEnv) waitTracked(msg string, prs ...ghref.PR) {
	e.t.Helper()
	var want []string
	for _, pr := range prs {
		want = append(want, pr.Key())
	}
	require.Eventually(e.t, func() bool { return slices.Equal(e.writer.Tracked(), want) }, waitFor, 5*time.Millisecond,
		"%s: tracked %v", msg, e.writer.Tracked())
}

// publish emits d about the PR's head with a unique id.
func (e *statusEnv) publish(d events.Data) {
	e.t.Helper()
	_, _, err := e.emit.Emit(e.t.Context(), d, fmt.Sprint(time.Now().UnixNano()))
	require.NoError(e.t, err)
}

func (e *statusEnv) base() events.Base { return events.Base{PR: e.pr, HeadSHA: e.head} }

// written counts the requests that wrote prloop's line on GitHub.
func (e *statusEnv) written() int {
	by := e.sim.Stats().ByRoute
	if e.app {
		return by[createCheckRoute] + by[updateCheckRoute]
	}
	return by[statusRoute]
}

// reads counts the requests that read prloop's line back from GitHub.
func (e *statusEnv) reads() int {
	if e.app {
		return e.sim.Stats().ByRoute[readCheckRoute]
	}
	return e.sim.Stats().ByRoute[readRoute]
}

// history is every line prloop wrote on the head, oldest first, as
// "state text"; a check run's status and conclusion read as the state
// they stand for.
func (e *statusEnv) history() []string {
	e.t.Helper()
	out, _ := e.writeLog()
	return out
}

// writeLog is history, with each write's operation: "status", or for a
// check run "create" or "update".
func (e *statusEnv) writeLog() (lines, ops []string) {
	e.t.Helper()
	if !e.app {
		hist, err := e.sim.StatusHistory(e.repo, e.head, "prloop")
		require.NoError(e.t, err)
		for _, h := range hist {
			lines, ops = append(lines, h.State+" "+h.Description), append(ops, "status")
		}
		return lines, ops
	}
	hist, err := e.sim.CheckRunHistory(e.repo, e.head, "prloop")
	require.NoError(e.t, err)
	seen := map[int64]bool{}
	for _, h := range hist {
		state := map[string]string{"success": "success", "action_required": "error"}[h.Conclusion]
		if h.Status != "completed" {
			state = "pending"
		}
		op := "update"
		if !seen[h.ID] {
			op, seen[h.ID] = "create", true
		}
		lines, ops = append(lines, state+" "+h.Title), append(ops, op)
		assert.Contains(e.t, h.Summary, e.pr.String(), "the summary names the PR")
	}
	return lines, ops
}

// waitLine waits until GitHub shows line as prloop's latest.
func (e *statusEnv) waitLine(line string) {
	e.t.Helper()
	var shown int
	require.Eventually(e.t, func() bool {
		h := e.history()
		shown = len(h)
		return len(h) > 0 && h[len(h)-1] == line
	}, waitFor, 5*time.Millisecond, "GitHub never showed %q", line)
	// The simulator counts a request a moment after its effect shows (a
	// loaded machine saw the status before its count): the counts the
	// tests compare are read once they include every write shown.
	require.Eventually(e.t, func() bool { return e.written() >= shown }, waitFor, 5*time.Millisecond,
		"the simulator never counted the %d writes GitHub shows", shown)
}

// otherPR is the PR other writes for.
var otherPR = ghref.PR{Owner: "acme", Repo: "socket.io", Number: 99}

// other is a second PR, on a head of its own: a write for it shows the
// writer went past every event published before.
func (e *statusEnv) other() {
	e.t.Helper()
	n := e.written()
	e.publish(&events.ReviewPending{Base: events.Base{PR: otherPR, HeadSHA: strings.Repeat("b", 40)}, Status: events.StatusPending})
	require.Eventually(e.t, func() bool { return e.written() > n }, waitFor, 5*time.Millisecond, "no write for the other PR")
}

// TestStatusWriter_EveryLineReachesGitHub: as the PR moves through its
// loop, each line lands on its head once, in order; closing the merged PR
// writes nothing more. As a check run, the head's run is created once and
// updated, and a line after a completed run starts a new one.
func TestStatusWriter_EveryLineReachesGitHub(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		e.startWriter()
		b := e.base()
		steps := []struct {
			name string
			d    events.Data
			want string
			op   string // the check run write: create or update
		}{
			{name: "watched", d: &events.ReviewPending{Base: b, Status: events.StatusPending}, want: "pending waiting for review", op: "create"},
			{name: "in review", d: &events.ReviewInProgress{Base: b, Status: events.StatusInProgress, Actor: "bob"}, want: "pending 👀 bob is reviewing", op: "update"},
			{name: "changes requested", d: &events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
				want: "pending changes requested by alice — agent fixing (cycle 1 of 2)", op: "update"},
			{name: "approved", d: &events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}}, want: "success approved by alice", op: "update"},
			{name: "queued", d: &events.MergeQueued{Base: b, Position: 1, BaseBranch: "main"}, want: "pending approved by alice — 1st in the merge queue for main", op: "create"},
			{name: "waiting for checks", d: &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
				want: "pending approved by alice — waiting for checks: ci/build, lint", op: "update"},
			{name: "review timeout", d: &events.ReviewTimeout{Base: b, Reason: events.ReasonReviewTimeout},
				want: "error needs a human: review timeout (label human-review-required)", op: "update"},
			{name: "escalated", d: &events.Escalated{Base: b, Reason: events.ReasonReviewTimeout}, want: ""},
			{name: "approved after all", d: &events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}},
				want: "pending approved by alice — waiting for checks: ci/build, lint", op: "create"},
			{name: "merged", d: &events.Merged{Base: b, MergeSHA: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}, want: "success merged as a1b2c3d", op: "update"},
		}
		var want, wantOps []string
		for _, s := range steps {
			e.publish(s.d)
			if s.want == "" {
				continue // the same line
			}
			e.waitLine(s.want)
			want = append(want, s.want)
			op := "status"
			if e.app {
				op = s.op
			}
			wantOps = append(wantOps, op)
			lines, ops := e.writeLog()
			assert.Equal(t, want, lines, "after %s: one write per line", s.name)
			assert.Equal(t, wantOps, ops, "after %s", s.name)
		}
		e.publish(&events.Closed{Base: b, Merged: true})
		e.other()
		assert.Equal(t, want, e.history(), "the merged line is final")
		e.waitTracked("the merged PR is forgotten, the other one kept", otherPR)
	})
}

// TestStatusWriter_Coalesces: a burst of changes within the coalescing
// window is one write, of the latest line.
func TestStatusWriter_Coalesces(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		e.startWriter(func(o *poller.StatusOptions) { o.Coalesce = time.Second })
		b := e.base()
		const burst = 20
		for i := range burst {
			e.publish(&events.ReviewInProgress{Base: b, Status: events.StatusInProgress, Actor: fmt.Sprintf("reviewer%d", i)})
		}
		e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
		e.waitLine("success approved by alice")
		writes := e.written()
		t.Logf("%d events, %d writes", burst+1, writes)
		assert.LessOrEqual(t, writes, 3, "%d events in a burst: a few writes", burst+1)
	})
}

// TestStatusWriter_RestartWritesNothingNew: a writer started again re-reads
// the stream, finds on GitHub the line it would write, and writes nothing;
// the next change is written (as a check run: an update of the run the
// first writer created).
func TestStatusWriter_RestartWritesNothingNew(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		stop := e.startWriter()
		b := e.base()
		e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
		e.publish(&events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}})
		e.waitLine("pending changes requested by alice — agent fixing (cycle 1 of 2)")
		stop()
		before := e.written()
		_, opsBefore := e.writeLog()

		reads := e.reads()
		e.startWriter()
		require.Eventually(t, func() bool { return e.reads() > reads }, waitFor, 5*time.Millisecond,
			"the writer never compared with GitHub")
		e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
		e.waitLine("success approved by alice")
		assert.Equal(t, before+1, e.written(), "the restart wrote nothing; the approval one write")
		if e.app {
			_, ops := e.writeLog()
			assert.Equal(t, append(opsBefore, "update"), ops, "the run found after the restart is updated")
		}
	})
}

// TestStatusWriter_DryRunWritesNothing: PRLOOP_DRY_RUN logs each line and
// writes none.
func TestStatusWriter_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		e.startWriter(func(o *poller.StatusOptions) { o.DryRun = true })
		b := e.base()
		e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
		e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
		require.Eventually(t, func() bool { return e.writes.Load() >= 1 }, waitFor, 5*time.Millisecond, "the dry run never logged a line")
		assert.Zero(t, e.written())
		assert.Empty(t, e.history())
	})
}

// TestStatusWriter_NotForClosedPRs: a PR closed without merging gets no
// status.
func TestStatusWriter_NotForClosedPRs(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		b := e.base()
		e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
		e.publish(&events.Closed{Base: b})
		e.startWriter()
		e.other()
		assert.Empty(t, e.history(), "nothing for the closed PR")
	})
}

// TestStatusWriter_CheckRunOnlyAsApp: a token client writes commit
// statuses and never a check run; an App writes check runs and never a
// commit status.
func TestStatusWriter_CheckRunOnlyAsApp(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		e.startWriter()
		e.publish(&events.ReviewPending{Base: e.base(), Status: events.StatusPending})
		e.waitLine("pending waiting for review")
		by := e.sim.Stats().ByRoute
		if e.app {
			assert.Zero(t, by[statusRoute])
			assert.Equal(t, 1, by[createCheckRoute])
		} else {
			assert.Zero(t, by[createCheckRoute]+by[updateCheckRoute])
			assert.Equal(t, 1, by[statusRoute])
		}
	})
}

// TestStatusWriter_ForgetsClosedPRs: what the writer keeps of a PR goes
// when the PR is closed, so that it does not grow with every PR ever seen.
func TestStatusWriter_ForgetsClosedPRs(t *testing.T) {
	t.Parallel()
	eachSink(t, func(t *testing.T, e *statusEnv) {
		e.startWriter()
		b := e.base()
		e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
		e.waitLine("pending waiting for review")
		e.waitTracked("the PR's line is kept", e.pr)
		e.publish(&events.Closed{Base: b})
		e.other()
		e.waitTracked("only the other PR is kept", otherPR)
		assert.Equal(t, []string{"pending waiting for review"}, e.history(), "nothing written for the close")
	})
}
