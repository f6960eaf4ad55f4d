package poller_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app/apptest"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/services/poller"
)

// statusRoute is the simulator's route for a status write.
const (
	statusRoute = "POST /repos/{owner}/{repo}/statuses/{sha}"
	readRoute   = "GET /repos/{owner}/{repo}/commits/{ref}/status"
)

// statusEnv is a status writer's world: the poller test world, the PR's
// head, and a count of the statuses the writer reported writing.
type statusEnv struct {
	*env
	head   string
	writes atomic.Int64
	writer *poller.StatusWriter // the last one started
}

func newStatusEnv(t *testing.T) *statusEnv {
	t.Helper()
	e := &statusEnv{env: newEnv(t)}
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	e.head = info.HeadSHA
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

// publish emits d about the PR's head with a unique id.
func (e *statusEnv) publish(d events.Data) {
	e.t.Helper()
	_, _, err := e.emit.Emit(e.t.Context(), d, fmt.Sprint(time.Now().UnixNano()))
	require.NoError(e.t, err)
}

func (e *statusEnv) base() events.Base { return events.Base{PR: e.pr, HeadSHA: e.head} }

// history is every prloop status GitHub holds on the head, oldest first.
func (e *statusEnv) history() []string {
	e.t.Helper()
	hist, err := e.sim.StatusHistory(e.repo, e.head, "prloop")
	require.NoError(e.t, err)
	out := make([]string, len(hist))
	for i, h := range hist {
		out[i] = h.State + " " + h.Description
	}
	return out
}

// waitLine waits until GitHub shows line as prloop's latest status.
func (e *statusEnv) waitLine(line string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		h := e.history()
		return len(h) > 0 && h[len(h)-1] == line
	}, waitFor, 5*time.Millisecond, "GitHub never showed %q", line)
}

// other is a second PR, on a head of its own: a write for it shows the
// writer went past every event published before.
func (e *statusEnv) other() {
	e.t.Helper()
	n := e.sim.Stats().ByRoute[statusRoute]
	e.publish(&events.ReviewPending{Base: events.Base{PR: ghref.PR{Owner: "acme", Repo: "socket.io", Number: 99}, HeadSHA: strings.Repeat("b", 40)}, Status: events.StatusPending})
	require.Eventually(e.t, func() bool { return e.sim.Stats().ByRoute[statusRoute] > n }, waitFor, 5*time.Millisecond, "no write for the other PR")
}

// TestStatusWriter_EveryLineReachesGitHub: as the PR moves through its
// loop, each line lands on its head once, in order; closing the merged PR
// writes nothing more.
func TestStatusWriter_EveryLineReachesGitHub(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	e.startWriter()
	b := e.base()
	steps := []struct {
		name string
		d    events.Data
		want string
	}{
		{name: "watched", d: &events.ReviewPending{Base: b, Status: events.StatusPending}, want: "pending waiting for review"},
		{name: "in review", d: &events.ReviewInProgress{Base: b, Status: events.StatusInProgress, Actor: "bob"}, want: "pending 👀 bob is reviewing"},
		{name: "changes requested", d: &events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			want: "pending changes requested by alice — agent fixing (cycle 1 of 2)"},
		{name: "approved", d: &events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}}, want: "success approved by alice"},
		{name: "queued", d: &events.MergeQueued{Base: b, Position: 1, BaseBranch: "main"}, want: "pending approved by alice — 1st in the merge queue for main"},
		{name: "waiting for checks", d: &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
			want: "pending approved by alice — waiting for checks: ci/build, lint"},
		{name: "review timeout", d: &events.ReviewTimeout{Base: b, Reason: events.ReasonReviewTimeout},
			want: "error needs a human: review timeout (label human-review-required)"},
		{name: "escalated", d: &events.Escalated{Base: b, Reason: events.ReasonReviewTimeout}, want: ""},
		{name: "approved after all", d: &events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}},
			want: "pending approved by alice — waiting for checks: ci/build, lint"},
		{name: "merged", d: &events.Merged{Base: b, MergeSHA: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}, want: "success merged as a1b2c3d"},
	}
	var want []string
	for _, s := range steps {
		e.publish(s.d)
		if s.want == "" {
			continue // the same line
		}
		e.waitLine(s.want)
		want = append(want, s.want)
		assert.Equal(t, want, e.history(), "after %s: one write per line", s.name)
	}
	e.publish(&events.Closed{Base: b, Merged: true})
	e.other()
	assert.Equal(t, want, e.history(), "the merged line is final")
	assert.Equal(t, 1, e.writer.Tracked(), "the merged PR is forgotten, the other one kept")
}

// TestStatusWriter_Coalesces: a burst of changes within the coalescing
// window is one write, of the latest line.
func TestStatusWriter_Coalesces(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	e.startWriter(func(o *poller.StatusOptions) { o.Coalesce = time.Second })
	b := e.base()
	const burst = 20
	for i := range burst {
		e.publish(&events.ReviewInProgress{Base: b, Status: events.StatusInProgress, Actor: fmt.Sprintf("reviewer%d", i)})
	}
	e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
	e.waitLine("success approved by alice")
	writes := e.sim.Stats().ByRoute[statusRoute]
	t.Logf("%d events, %d status writes", burst+1, writes)
	assert.LessOrEqual(t, writes, 3, "%d events in a burst: a few writes", burst+1)
}

// TestStatusWriter_RestartWritesNothingNew: a writer started again re-reads
// the stream, finds on GitHub the line it would write, and writes nothing;
// the next change is written.
func TestStatusWriter_RestartWritesNothingNew(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	stop := e.startWriter()
	b := e.base()
	e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
	e.publish(&events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}})
	e.waitLine("pending changes requested by alice — agent fixing (cycle 1 of 2)")
	stop()
	before := e.sim.Stats().ByRoute[statusRoute]

	reads := e.sim.Stats().ByRoute[readRoute]
	e.startWriter()
	require.Eventually(t, func() bool { return e.sim.Stats().ByRoute[readRoute] > reads }, waitFor, 5*time.Millisecond,
		"the writer never compared with GitHub")
	e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
	e.waitLine("success approved by alice")
	assert.Equal(t, before+1, e.sim.Stats().ByRoute[statusRoute], "the restart wrote nothing; the approval one status")
}

// TestStatusWriter_DryRunWritesNothing: PRLOOP_DRY_RUN logs each line and
// writes none.
func TestStatusWriter_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	e.startWriter(func(o *poller.StatusOptions) { o.DryRun = true })
	b := e.base()
	e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
	e.publish(&events.ReviewApproved{Base: b, Status: events.StatusApproved, Approvers: []string{"alice"}})
	require.Eventually(t, func() bool { return e.writes.Load() >= 1 }, waitFor, 5*time.Millisecond, "the dry run never logged a line")
	assert.Zero(t, e.sim.Stats().ByRoute[statusRoute])
	assert.Empty(t, e.history())
}

// TestStatusWriter_NotForClosedPRs: a PR closed without merging gets no
// status.
func TestStatusWriter_NotForClosedPRs(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	b := e.base()
	e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
	e.publish(&events.Closed{Base: b})
	e.startWriter()
	e.other()
	assert.Empty(t, e.history(), "nothing for the closed PR")
}

// TestStatusWriter_ForgetsClosedPRs: what the writer keeps of a PR goes
// when the PR is closed, so that it does not grow with every PR ever seen.
func TestStatusWriter_ForgetsClosedPRs(t *testing.T) {
	t.Parallel()
	e := newStatusEnv(t)
	e.startWriter()
	b := e.base()
	e.publish(&events.ReviewPending{Base: b, Status: events.StatusPending})
	e.waitLine("pending waiting for review")
	assert.Equal(t, 1, e.writer.Tracked())
	e.publish(&events.Closed{Base: b})
	e.other()
	assert.Equal(t, 1, e.writer.Tracked(), "only the other PR is kept")
	assert.Equal(t, []string{"pending waiting for review"}, e.history(), "nothing written for the close")
}
