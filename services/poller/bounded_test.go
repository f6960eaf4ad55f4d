package poller_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

const permissionRoute = "GET /repos/{owner}/{repo}/collaborators/{username}/permission"

// TestPoller_FailedPermissionLookupKeepsApproval: when the permission cache
// has expired and GitHub fails the lookup, the approver's last known
// permission stands: the PR stays approved and nothing asks the agent to
// act (issue #15, defect 5).
func TestPoller_FailedPermissionLookupKeepsApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Every evaluation finds the cached permission expired.
	e.start(e.config(func(c *poller.Config) { c.PermissionCacheTTL = time.Nanosecond }))
	e.watchPending()
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)

	// GitHub's permission API goes down; a bot's comment makes the
	// poller evaluate the PR again, looking alice up again.
	e.sim.InjectFault(ghsim.Fault{Method: http.MethodGet, Path: `/collaborators/[^/]+/permission$`, Kind: ghsim.FaultForbidden, Times: 1 << 20})
	e.tick()
	_, err = e.sim.AddIssueComment(e.pr, "copilot-pull-request-reviewer", "Looks fine to me.")
	require.NoError(t, err)
	e.waitRequests(permissionRoute, 1)
	e.waitProbes(3)

	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeReviewPending), "no PRReviewPending after the approval")
	assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackReceived))
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeReviewApproved))
	st, _, err := e.store.Get(t.Context(), e.pr)
	require.NoError(t, err)
	assert.Equal(t, events.StatusApproved, st.Status)

	// GitHub answers again, and alice has lost her access: the
	// verdict follows the real answer.
	e.sim.ClearFaults()
	require.NoError(t, e.sim.SetPermission(e.repo, "alice", "read"))
	e.tick()
	_, err = e.sim.AddIssueComment(e.pr, "copilot-pull-request-reviewer", "Still fine.")
	require.NoError(t, err)
	e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor)
}

// TestPoller_ClosedPRsAreForgotten is a soak test: many PRs opened and
// closed leave nothing behind in the poller's per-PR maps, beyond the
// bounded set of closed PRs watched for a reopen, and the heap after GC
// does not grow between the two halves of the run (issue #15, defect 7).
//
// It is not parallel: the heap is measured while no other test runs in the
// process. The simulator, NATS and the event recorder share the process and
// keep every PR and event, so the heap bound is loose; the map sizes are
// the exact check.
func TestPoller_ClosedPRsAreForgotten(t *testing.T) {
	const perHalf, reopenCap = 100, 20
	e := newEnv(t)
	// The conditional-request cache is an LRU bounded by bytes (64 MiB by
	// default), which 200 PRs' responses do not fill: it grew with every
	// PR of the run, and since the poller reads each head's checks too it
	// took the second half's growth to the slack's edge under load (8.2
	// MiB once in CI). A small cache, full from the first half on, keeps
	// its bounded growth out of a check about what the poller retains.
	small, err := github.New(t.Context(), github.Config{APIURL: e.srv.URL, Token: tokPrloop, CacheMaxBytes: 256 << 10}, github.Options{Logger: quiet()})
	require.NoError(t, err)
	e.client = small
	cfg := e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String()}
		c.PollInterval = 10 * time.Millisecond
	})
	s := e.newPoller(cfg)
	s.SetReopenWatchCap(reopenCap)
	s.SetSweepInterval(20 * time.Millisecond)
	e.run(s)

	var heap [2]uint64
	for half := range heap {
		prs, err := e.sim.OpenPRs(e.repo, perHalf, "agent")
		require.NoError(t, err)
		for _, pr := range prs {
			e.rec.Wait(t, pr, events.TypeReviewPending, waitFor)
		}
		e.tick()
		for i, pr := range prs {
			if i%10 != 0 { // every tenth is merged, the others closed
				require.NoError(t, e.sim.ClosePR(pr))
				continue
			}
			info, err := e.sim.PRInfo(pr)
			require.NoError(t, err)
			_, err = e.client.Merge(t.Context(), pr, githubMerge(info.HeadSHA))
			require.NoError(t, err)
		}
		for _, pr := range prs {
			e.rec.Wait(t, pr, events.TypeClosed, waitFor)
		}
		// Only the PR every test environment opens stays watched.
		var got poller.Sizes
		require.Eventually(t, func() bool {
			got = s.Sizes()
			return got.PRs <= 1 && got.Memo <= 1 && got.Seen <= 1 && got.Pending == 0
		}, waitFor, 10*time.Millisecond, "closed PRs are forgotten")
		assert.LessOrEqual(t, got.Closed, reopenCap)
		assert.LessOrEqual(t, got.Permissions, 1)

		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap[half] = ms.HeapAlloc
		t.Logf("after %d PRs: %+v, heap %d KiB", (half+1)*perHalf, got, ms.HeapAlloc>>10)
	}
	const slack = 8 << 20
	assert.Less(t, heap[1], heap[0]+slack, "heap after GC grew by more than %d MiB over %d more closed PRs", slack>>20, perHalf)

	// The records of the closed PRs stay while a reopen would resume them,
	// then go: the bucket holds the open PR only.
	recs, err := e.store.List(t.Context())
	require.NoError(t, err)
	assert.Len(t, recs, 2*perHalf+1, "closed PRs' records are kept for a reopen")
	e.sim.Advance(8 * 24 * time.Hour)
	require.Eventually(t, func() bool {
		recs, err = e.store.List(t.Context())
		return err == nil && len(recs) == 1
	}, waitFor, 20*time.Millisecond, "records of PRs closed over a week ago are deleted")
	assert.True(t, recs[0].PR.Same(e.pr))
	st, err := e.conn.JS.Stream(t.Context(), "KV_"+state.Bucket)
	require.NoError(t, err)
	// A delete's marker goes right after the delete, which the listing
	// above may see first.
	var subjects uint64
	require.Eventually(t, func() bool {
		info, err := st.Info(t.Context())
		if err == nil {
			subjects = info.State.NumSubjects
		}
		return subjects == 1
	}, waitFor, 20*time.Millisecond, "no delete markers are left behind: %d subjects", subjects)
}
