package merger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/services/merger"
)

// behindPR opens a PR and moves main on, so the merger must update its
// branch before merging.
func (e *env) behindPR(branch string) (ghref.PR, string) {
	e.t.Helper()
	pr, head := e.openPR(branch, "Add "+branch, map[string]string{branch + ".txt": branch + "\n"})
	_, err := e.sim.PushCommit(e.repo, "main", "bob", map[string]string{"other-" + branch + ".txt": "x\n"}, "Move main")
	require.NoError(e.t, err)
	return pr, head
}

// updatedHead waits for prloop's branch update and returns the new head.
func (e *env) updatedHead(pr ghref.PR, old string) string {
	e.t.Helper()
	var head string
	require.Eventually(e.t, func() bool {
		info, err := e.sim.PRInfo(pr)
		require.NoError(e.t, err)
		head = info.HeadSHA
		return head != old
	}, waitFor, 5*time.Millisecond, "the merger never updated the branch")
	return head
}

// waitPolls waits until the merger has read a head's statuses n more times,
// or has merged (which the caller's assertion then reports).
func (e *env) waitPolls(n int) {
	e.t.Helper()
	polls := e.routeCount(routeStatus)
	require.Eventually(e.t, func() bool {
		return e.routeCount(routeStatus) >= polls+n || e.routeCount(routeMerge) > 0
	}, waitFor, 5*time.Millisecond)
}

// TestMerger_RequiredCheckAwaitedOnOwnUpdate: when the base requires
// ci/build (a branch rule, or PRLOOP_REQUIRED_CHECKS), the head prloop's
// own update-branch made is not merged while CI has not even registered on
// it, and is merged once ci/build passes there.
func TestMerger_RequiredCheckAwaitedOnOwnUpdate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rule  bool
		extra []string
	}{
		{name: "branch rule", rule: true},
		{name: "PRLOOP_REQUIRED_CHECKS", extra: []string{"ci/build"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tt.rule {
				require.NoError(t, e.sim.SetRequiredChecks(e.repo, "main", "ci/build"))
			}
			pr, old := e.behindPR("feat")
			e.start(config(func(c *merger.Config) { c.RequiredChecks = tt.extra }), "replica-1")
			e.approve(pr, old, "1")

			head := e.updatedHead(pr, old)
			require.NoError(t, e.sim.SetStatus(e.repo, head, merger.DefaultStatusContext, "success"))
			e.waitPolls(5)
			assert.Zero(t, e.routeCount(routeMerge), "nothing reported on the new head: not merged")
			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci/build", "pending"))
			e.waitPolls(5)
			assert.Zero(t, e.routeCount(routeMerge), "ci/build pending on the new head: not merged")

			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci/build", "success"))
			m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
			assert.Equal(t, head, m.HeadSHA)
			assert.Equal(t, 1, e.routeCount(routeMerge))
			e.waitQueueEmpty()
		})
	}
}

// TestMerger_ChecksOfTheOldHeadAwaitedOnTheNew: with no rules, the checks
// that ran on the approved head must report on the head prloop's update
// made before it merges; prloop's own status is not one of them.
func TestMerger_ChecksOfTheOldHeadAwaitedOnTheNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, old := e.behindPR("feat")
	require.NoError(t, e.sim.SetStatus(e.repo, old, "ci", "success"))
	require.NoError(t, e.sim.SetCheckRun(e.repo, old, "build", "completed", "success"))
	require.NoError(t, e.sim.SetStatus(e.repo, old, merger.DefaultStatusContext, "success"))
	e.start(config(), "replica-1")
	e.approve(pr, old, "1")

	head := e.updatedHead(pr, old)
	e.waitPolls(5)
	assert.Zero(t, e.routeCount(routeMerge), "nothing reported on the new head yet: not merged")
	require.NoError(t, e.sim.SetCheckRun(e.repo, head, "build", "completed", "success"))
	e.waitPolls(5)
	assert.Zero(t, e.routeCount(routeMerge), "status ci has not reported on the new head: not merged")

	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.Equal(t, head, m.HeadSHA, "merged without prloop's own status on the new head")
	e.waitQueueEmpty()
}

// TestMerger_NoRulesNoChecksMerges: a PR whose base requires nothing and on
// which no check ever ran merges after prloop's update, as before.
func TestMerger_NoRulesNoChecksMerges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, old := e.behindPR("feat")
	e.start(config(), "replica-1")
	e.approve(pr, old, "1")
	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.NotEqual(t, old, m.HeadSHA, "merged from the head update-branch made")
	assert.Equal(t, 1, e.routeCount(routeUpdateBranch))
	e.waitQueueEmpty()
}

// TestMerger_OwnCheckRunNeverAwaited: under GitHub App auth prloop's line
// is a check run named PRLOOP_STATUS_CONTEXT; in progress on the head while
// prloop works, it must not hold up prloop's own merge, nor become a check
// the PR's later heads wait for.
func TestMerger_OwnCheckRunNeverAwaited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, own string
		cfg       func(*merger.Config)
	}{
		{name: "default name", own: merger.DefaultStatusContext, cfg: func(*merger.Config) {}},
		{name: "PRLOOP_STATUS_CONTEXT", own: "prloop/line", cfg: func(c *merger.Config) { c.StatusContext = "prloop/line" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr, old := e.behindPR("feat")
			require.NoError(t, e.sim.SetCheckRun(e.repo, old, tt.own, "in_progress", ""))
			e.start(config(tt.cfg), "replica-1")
			e.approve(pr, old, "1")

			head := e.updatedHead(pr, old)
			require.NoError(t, e.sim.SetCheckRun(e.repo, head, tt.own, "in_progress", ""))
			m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
			assert.Equal(t, head, m.HeadSHA, "merged with prloop's own run in progress")
			e.waitQueueEmpty()
		})
	}
}
