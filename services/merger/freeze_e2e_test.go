package merger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/services/merger"
)

// freezeQueue asks the merger, as `prloop queue freeze` does, to freeze
// (or with unfreeze, lift) the queue of base, and waits for its answer.
func (e *env) freezeQueue(base, reason string, unfreeze bool) {
	e.t.Helper()
	repo0 := e.repo.PR(events.RepoNumber)
	answer := events.TypeQueueFrozen
	if unfreeze {
		answer = events.TypeQueueUnfrozen
	}
	n := e.rec.Count(repo0, answer)
	verb := "freeze"
	if unfreeze {
		verb = "unfreeze"
	}
	_, _, err := e.emit.Emit(e.t.Context(), &events.QueueFreezeRequested{
		Base: events.Base{PR: repo0}, BaseBranch: base, Reason: reason, Unfreeze: unfreeze, Actor: "ops",
	}, events.BaseToken(base), verb, time.Now().UTC().Format(time.RFC3339Nano))
	require.NoError(e.t, err)
	e.rec.WaitCount(e.t, repo0, answer, n+1, waitFor)
}

// board folds every event recorded so far, as the status line's writer
// does.
func (e *env) board() *prstatus.Board {
	b := prstatus.NewBoard()
	for _, r := range e.rec.All() {
		b.Apply(r.Data, time.Now())
	}
	return b
}

// TestFreeze_HoldsMergesWhileApprovalsAndCIGoOnAcrossARestart: a frozen
// base merges nothing, in either queue mode, while PRs approved meanwhile
// still queue, their checks are still read (and in the speculative queue
// their candidates built and tested), and every queued PR's status line
// says the queue is frozen and why; the freeze outlives a restart of the
// merger, and once lifted the PRs merge in order.
func TestFreeze_HoldsMergesWhileApprovalsAndCIGoOnAcrossARestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{merger.QueueSerial, merger.QueueSpeculative} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cfg := config(func(c *merger.Config) { c.QueueMode = mode })
			if mode == merger.QueueSpeculative {
				cfg = config(speculative)
				e.candidateCI(func(*events.MergeCandidate, []string) string { return "success" })
			}
			stop := e.start(cfg, "replica-1")
			e.freezeQueue("main", "release 2.0", false)

			prs, heads := e.openPRs("a.txt", "b.txt")
			for i, pr := range prs {
				require.NoError(t, e.sim.SetStatus(e.repo, heads[i], "ci", "success"))
				e.approve(pr, heads[i], "1")
				e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)
			}
			// CI goes on: the first PR's checks are read again and again
			// (serial), every PR rides in a candidate CI passes
			// (speculative).
			polls := e.routeCount(routeStatus)
			require.Eventually(t, func() bool { return e.routeCount(routeStatus) >= polls+5 }, waitFor, 5*time.Millisecond)
			if mode == merger.QueueSpeculative {
				require.Eventually(t, func() bool {
					return len(e.candidates(prs[1], events.CandidateBuilt)) > 0
				}, waitFor, 10*time.Millisecond, "candidates are built while frozen")
			}
			assert.Zero(t, e.routeCount(routeMerge), "nothing merges while frozen")
			b := e.board()
			for _, pr := range prs {
				assert.True(t, strings.HasPrefix(b.Line(pr, prstatus.Options{}).Text, "queue frozen: release 2.0 — "), "%s: %s", pr, b.Line(pr, prstatus.Options{}).Text)
			}

			// The freeze is the merger's record: a restart keeps it.
			stop()
			e.start(cfg, "replica-2")
			polls = e.routeCount(routeStatus)
			require.Eventually(t, func() bool { return e.routeCount(routeStatus) >= polls+5 }, waitFor, 5*time.Millisecond)
			assert.Zero(t, e.routeCount(routeMerge), "still frozen after the restart")
			assert.Len(t, e.queued(), 2)

			e.freezeQueue("main", "", true)
			if mode == merger.QueueSerial {
				// b is behind main once a merged: prloop updates it, CI
				// passes the new head.
				upd := e.rec.Wait(t, prs[1], events.TypeBranchUpdated, waitFor).Data.(*events.BranchUpdated)
				require.NoError(t, e.sim.SetStatus(e.repo, upd.HeadSHA, "ci", "success"))
			}
			assert.Equal(t, []int{prs[0].Number, prs[1].Number}, e.mergeOrder(prs...), "merged in arrival order once unfrozen")
			e.waitQueueEmpty()
			assert.False(t, strings.HasPrefix(e.board().Line(prs[1], prstatus.Options{}).Text, "queue frozen"))
			assert.Empty(t, e.keys("freeze.>"), "the freeze record is gone")
		})
	}
}

// TestFreeze_UntilUnfreezesByItself: a freeze with an end lifts itself at
// that time (PRQueueUnfrozen, its record removed) and the queue merges.
func TestFreeze_UntilUnfreezesByItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(config(), "replica-1")
	repo0 := e.repo.PR(events.RepoNumber)
	_, _, err := e.emit.Emit(t.Context(), &events.QueueFreezeRequested{
		Base: events.Base{PR: repo0}, Reason: "deploy window", Until: time.Now().Add(3 * time.Second), Actor: "ops",
	}, events.BaseToken(events.AllBases), "freeze", "1")
	require.NoError(t, err)
	e.rec.Wait(t, repo0, events.TypeQueueFrozen, waitFor)

	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	e.approve(pr, head, "1")
	e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)
	assert.Zero(t, e.routeCount(routeMerge), "every base is frozen")
	unfrozen := e.rec.Wait(t, repo0, events.TypeQueueUnfrozen, waitFor).Data.(*events.QueueUnfrozen)
	assert.Contains(t, unfrozen.Detail, "passed")
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	assert.Empty(t, e.keys("freeze.>"))
}
