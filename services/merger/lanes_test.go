package merger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
)

// TestMerger_OneRepositorysFailuresHoldBackOnlyItself: while GitHub fails
// every request about repository A, an approval in repository B that came
// after A's is queued and merged; once GitHub answers, A's first approval
// is queued ahead of A's later one, at exact positions, and merged first.
func TestMerger_OneRepositorysFailuresHoldBackOnlyItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repoB, err := e.sim.CreateRepo("acme", "gadgets", map[string]string{"main.go": "package main\n"})
	require.NoError(t, err)
	for _, login := range []string{"alice", "agent", simtest.Login} {
		require.NoError(t, e.sim.SetPermission(repoB, login, "write"))
	}

	a1, a1Head := e.openPR("feat-a1", "Add a1", map[string]string{"a1.txt": "a1\n"})
	a2, a2Head := e.openPR("feat-a2", "Add a2", map[string]string{"a2.txt": "a2\n"})
	bHead, err := e.sim.PushCommit(repoB, "feat-b", "agent", map[string]string{"b.txt": "b\n"}, "Add b")
	require.NoError(t, err)
	b, err := e.sim.OpenPR(repoB, ghsim.PRInput{Title: "Add b", Body: "Body of Add b.", Head: "feat-b", Author: "agent"})
	require.NoError(t, err)
	e.sim.Advance(time.Second)
	require.NoError(t, e.sim.SetStatus(e.repo, a1Head, "ci", "pending")) // a1 stays first in line
	require.NoError(t, e.sim.SetStatus(e.repo, a2Head, "ci", "success"))
	require.NoError(t, e.sim.SetStatus(repoB, bHead, "ci", "success"))

	// Every request about repository A fails until the fault is cleared.
	e.sim.InjectFault(ghsim.Fault{Path: "^/repos/" + e.repo.Owner + "/" + e.repo.Name + "/", Kind: ghsim.FaultStatus500, Times: 1 << 30})
	e.start(config(), "replica-1")

	e.approve(a1, a1Head, "1")
	e.watch(b, bHead)
	_, err = e.sim.AddReaction(b, "alice", "+1")
	require.NoError(t, err)
	e.announce(b, bHead, "1")
	e.approve(a2, a2Head, "1")

	e.rec.Wait(t, b, events.TypeMerged, waitFor)
	for _, pr := range []ghref.PR{a1, a2} {
		assert.Zero(t, e.rec.Count(pr, events.TypeMergeQueued), "%s queued while GitHub fails for it", pr)
	}

	e.sim.ClearFaults()
	q1 := e.rec.Wait(t, a1, events.TypeMergeQueued, waitFor)
	q2 := e.rec.Wait(t, a2, events.TypeMergeQueued, waitFor)
	assert.Equal(t, 1, q1.Data.(*events.MergeQueued).Position)
	assert.Equal(t, 2, q2.Data.(*events.MergeQueued).Position)
	assert.Less(t, q1.Seq, q2.Seq)

	require.NoError(t, e.sim.SetStatus(e.repo, a1Head, "ci", "success"))
	m1 := e.rec.Wait(t, a1, events.TypeMerged, waitFor)
	// a2 is brought up to date with the base a1 changed; its new head's
	// checks pass too.
	require.Eventually(t, func() bool {
		info, err := e.sim.PRInfo(a2)
		return err == nil && info.HeadSHA != a2Head && e.sim.SetStatus(e.repo, info.HeadSHA, "ci", "success") == nil
	}, waitFor, 10*time.Millisecond)
	m2 := e.rec.Wait(t, a2, events.TypeMerged, waitFor)
	assert.Less(t, m1.Seq, m2.Seq, "first come, first merged")
	e.waitQueueEmpty()
}
