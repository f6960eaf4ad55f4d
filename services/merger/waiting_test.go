package merger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/merger"
)

// TestMerger_MergeWaitingFollowsTheChecks: the first PR of a queue says
// which checks it waits for each time that set changes, and an empty list
// once none is left, before it merges.
func TestMerger_MergeWaitingFollowsTheChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "main", "ci/build", "lint"))
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci/build", "pending"))
	e.start(config(), "replica-1")
	e.approve(pr, head, "1")

	waiting := func(n int) []string {
		return e.rec.WaitCount(t, pr, events.TypeMergeWaiting, n, waitFor).Data.(*events.MergeWaiting).Checks
	}
	assert.Equal(t, []string{"ci/build", "lint"}, waiting(1), "ci/build pending, lint not reported")
	require.NoError(t, e.sim.SetCheckRun(e.repo, head, "lint", "completed", "success"))
	assert.Equal(t, []string{"ci/build"}, waiting(2))
	e.waitPolls(5)
	assert.Equal(t, 2, e.rec.Count(pr, events.TypeMergeWaiting), "an unchanged set is not said again")
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci/build", "success"))
	assert.Empty(t, waiting(3), "none left")
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)

	var last *events.MergeWaiting
	var types []events.Type
	for _, r := range e.rec.For(pr) {
		types = append(types, r.Data.EventType())
		if w, ok := r.Data.(*events.MergeWaiting); ok {
			last = w
		}
	}
	assert.Equal(t, "main", last.BaseBranch)
	assert.Equal(t, head, last.HeadSHA)
	assert.Less(t, lastIndex(types, events.TypeMergeWaiting), lastIndex(types, events.TypeMerged), "the empty list comes before the merge")
}

// TestMerger_OwnStatusNeverGates: prloop's own commit status, pending while
// the PR waits in the queue, neither holds up its merge nor counts as a
// check, under the default context and under PRLOOP_STATUS_CONTEXT; with
// another context set, a status named "prloop" is just another check.
func TestMerger_OwnStatusNeverGates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, setting, own string
	}{
		{name: "default context", own: merger.DefaultStatusContext},
		{name: "PRLOOP_STATUS_CONTEXT", setting: "prloop/queue", own: "prloop/queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
			require.NoError(t, e.sim.SetStatus(e.repo, head, tt.own, "pending"))
			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
			e.start(config(func(c *merger.Config) { c.StatusContext = tt.setting }), "replica-1")
			e.approve(pr, head, "1")
			m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
			assert.Equal(t, head, m.HeadSHA)
			assert.Zero(t, e.rec.Count(pr, events.TypeMergeWaiting), "prloop's own status is not waited for")
		})
	}
	t.Run("another context set: prloop is a check", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
		require.NoError(t, e.sim.SetStatus(e.repo, head, "prloop", "pending"))
		e.start(config(func(c *merger.Config) { c.StatusContext = "prloop/queue" }), "replica-1")
		e.approve(pr, head, "1")
		w := e.rec.Wait(t, pr, events.TypeMergeWaiting, waitFor).Data.(*events.MergeWaiting)
		assert.Equal(t, []string{"prloop"}, w.Checks)
		e.waitPolls(3)
		assert.Zero(t, e.routeCount(routeMerge))
	})
}

func lastIndex(types []events.Type, t events.Type) int {
	for i := len(types) - 1; i >= 0; i-- {
		if types[i] == t {
			return i
		}
	}
	return -1
}
