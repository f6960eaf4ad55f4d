package merger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
)

// TestSpeculative_ADeletedForkChargesOnlyItself: b's head repository is
// gone (a deleted fork: head.repo null), so its head cannot be fetched.
// That error is b's: a, ahead of it, merges without waiting and without a
// failure to its name, b alone gives up and asks for a human, and c,
// behind it, merges after it left.
func TestSpeculative_ADeletedForkChargesOnlyItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt")
	require.NoError(t, e.sim.DeleteHeadRepo(prs[1]))
	e.candidateCI(func(*events.MergeCandidate, []string) string { return "success" })
	e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}

	require.Eventually(t, func() bool {
		return e.rec.Count(prs[0], events.TypeMerged)+e.rec.Count(prs[0], events.TypeMergeFailed) > 0
	}, waitFor, 10*time.Millisecond)
	assert.Zero(t, e.rec.Count(prs[0], events.TypeMergeFailed), "a is not charged with b's error: %v", e.rec.Types(prs[0]))
	assert.Equal(t, 1, e.rec.Count(prs[0], events.TypeMerged))

	failed := e.rec.Wait(t, prs[1], events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonNotMergeable, failed.Reason)
	assert.Contains(t, failed.Detail, prs[1].String(), "the error names b")
	assert.Contains(t, failed.Detail, "head lives")
	require.Eventually(t, func() bool {
		return e.rec.Count(prs[2], events.TypeMerged)+e.rec.Count(prs[2], events.TypeMergeFailed) > 0
	}, waitFor, 10*time.Millisecond)
	assert.Zero(t, e.rec.Count(prs[2], events.TypeMergeFailed), "c is not charged with b's error: %v", e.rec.Types(prs[2]))
	assert.NotContains(t, e.git("ls-tree", "-r", "--name-only", "main"), "b.txt")
	e.waitQueueEmpty()
}

// TestMerger_TransientErrorsBetweenSuccessesDoNotAddUp: while a PR waits
// for its checks, GitHub fails one read of it, then answers again, more
// times than the merger gives up after in a row. Each answer in between
// resets the count: the PR is not escalated, and merges once ci passes.
func TestMerger_TransientErrorsBetweenSuccessesDoNotAddUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// No client retries: each 500 reaches the merger.
	pr, head := e.queuedPending(e.Client(t, func(c *github.Config) { c.MaxRetries = -1 }))
	const route = "GET /repos/{owner}/{repo}/pulls/{number}"
	answered := func(status int) int { return e.sim.Stats().ByRouteStatus[route][status] }

	const outages = 10 // more than the 8 in a row the merger gives up after
	for range outages {
		failedBefore := answered(500)
		e.sim.InjectFault(ghsim.Fault{Method: "GET", Path: fmt.Sprintf("/pulls/%d$", pr.Number), Kind: ghsim.FaultStatus500})
		require.Eventually(t, func() bool { return answered(500) > failedBefore }, waitFor, 5*time.Millisecond)
		// Two reads answered after it: the pass that followed the error
		// went through to waiting again.
		okBefore := answered(200) + answered(304)
		require.Eventually(t, func() bool {
			return answered(200)+answered(304) >= okBefore+2 || e.rec.Count(pr, events.TypeMergeFailed) > 0
		}, waitFor, 5*time.Millisecond)
		require.Zero(t, e.rec.Count(pr, events.TypeMergeFailed), "escalated after transient errors separated by successes: %v", e.rec.Types(pr))
	}
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	assert.Zero(t, e.rec.Count(pr, events.TypeMergeFailed))
}
