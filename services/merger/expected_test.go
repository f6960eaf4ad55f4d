package merger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// builtCandidate waits for the first candidate built for pr.
func (e *env) builtCandidate(pr ghref.PR) *events.MergeCandidate {
	e.t.Helper()
	var c *events.MergeCandidate
	require.Eventually(e.t, func() bool {
		if built := e.candidates(pr, events.CandidateBuilt); len(built) > 0 {
			c = built[0]
			return true
		}
		return false
	}, waitFor, 5*time.Millisecond, "no candidate built for %s", pr)
	return c
}

// TestSpeculative_ExpectedChecksAreNotForgotten: with no rules and no
// PRLOOP_REQUIRED_CHECKS, nothing names the checks a candidate must pass
// but what reported before: on the PR's own head, or on the queue's
// earlier candidates, also once the queue has emptied in between. A
// candidate on which build passed before test registered is not green.
func TestSpeculative_ExpectedChecksAreNotForgotten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// earlier runs a first PR through the queue, its candidate's CI
		// reporting build and test, until the queue is empty again.
		earlier bool
		// ownHead puts build and test on the PR's own head.
		ownHead bool
	}{
		{name: "checks that reported on the PR's own head", ownHead: true},
		{name: "checks seen on an earlier candidate, the queue empty since", earlier: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(config(speculative), "replica-1")
			if tt.earlier {
				first, head := e.openPR("first", "Add first", map[string]string{"first.txt": "1\n"})
				e.approve(first, head, "1")
				c := e.builtCandidate(first)
				require.NoError(t, e.sim.SetCheckRun(e.repo, c.Candidate, "build", "completed", "success"))
				require.NoError(t, e.sim.SetCheckRun(e.repo, c.Candidate, "test", "completed", "success"))
				e.rec.Wait(t, first, events.TypeMerged, waitFor)
				e.waitQueueEmpty()
			}
			pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
			if tt.ownHead {
				require.NoError(t, e.sim.SetCheckRun(e.repo, head, "build", "completed", "success"))
				require.NoError(t, e.sim.SetCheckRun(e.repo, head, "test", "completed", "success"))
			}
			e.approve(pr, head, "1")
			c := e.builtCandidate(pr)

			require.NoError(t, e.sim.SetCheckRun(e.repo, c.Candidate, "build", "completed", "success"))
			polls := e.routeCount(routeStatus)
			require.Eventually(t, func() bool {
				return e.routeCount(routeStatus) >= polls+5 || e.rec.Count(pr, events.TypeMerged) > 0
			}, waitFor, 5*time.Millisecond, "the merger stopped reading the candidate's checks")
			assert.Zero(t, e.rec.Count(pr, events.TypeMerged), "test has not registered on the candidate: not green")
			assert.NotEqual(t, c.Tree, e.git("rev-parse", "main^{tree}"))

			require.NoError(t, e.sim.SetCheckRun(e.repo, c.Candidate, "test", "completed", "success"))
			assert.Equal(t, c.Tree, e.mergedTree(pr), "merged once test passed on the candidate")
			e.waitQueueEmpty()
		})
	}
}
