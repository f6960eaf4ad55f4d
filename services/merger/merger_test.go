package merger_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/services/merger"
)

// TestMerger_TwoPRsMergeInArrivalOrder runs two replicas. PR 1 waits on a
// pending check, so both PRs are queued (positions 1 and 2) and PR 2 waits
// its turn. When the check passes PR 1 merges; PR 2, now behind, is updated
// with update-branch and merged from its new head. The base branch then
// holds exactly two squash commits, in arrival order, each with only its
// PR's change. It runs at GitHub's page size and with pages of 3.
func TestMerger_TwoPRsMergeInArrivalOrder(t *testing.T) {
	t.Parallel()
	for _, per := range simtest.PageSizes {
		t.Run(fmt.Sprintf("per_page=%d", per), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, per)
			pr1, head1 := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
			pr2, head2 := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
			require.NoError(t, e.sim.SetStatus(e.repo, head1, "ci", "pending"))
			base0 := e.git("rev-parse", "main")

			e.start(config(), "replica-1")
			e.start(config(), "replica-2")
			e.approve(pr1, head1, "1")
			e.approve(pr2, head2, "1")
			q1 := e.rec.Wait(t, pr1, events.TypeMergeQueued, waitFor).Data.(*events.MergeQueued)
			q2 := e.rec.Wait(t, pr2, events.TypeMergeQueued, waitFor).Data.(*events.MergeQueued)
			assert.Equal(t, 1, q1.Position)
			assert.Equal(t, "main", q1.BaseBranch)
			assert.Equal(t, 2, q2.Position, "PR 2 queues behind PR 1")

			// PR 1 holds the base while its check is pending; PR 2 waits its turn.
			depth := func() float64 { return e.metric("prloop_merge_queue_depth", "repo", "acme/widgets", "base", "main") }
			require.Eventually(t, func() bool { return depth() == 2 }, waitFor, 5*time.Millisecond, "depth %v", depth())
			polls := e.routeCount(routeStatus)
			require.Eventually(t, func() bool { return e.routeCount(routeStatus) >= polls+5 }, waitFor, 5*time.Millisecond)
			assert.Zero(t, e.routeCount(routeMerge), "nothing merges while the first PR's check is pending")
			assert.Zero(t, e.routeCount(routeUpdateBranch))

			require.NoError(t, e.sim.SetStatus(e.repo, head1, "ci", "success"))
			r1 := e.rec.Wait(t, pr1, events.TypeMerged, waitFor)
			r2 := e.rec.Wait(t, pr2, events.TypeMerged, waitFor)
			m1, m2 := r1.Data.(*events.Merged), r2.Data.(*events.Merged)
			assert.Less(t, r1.Seq, r2.Seq, "PR 1 merged first")
			assert.Equal(t, head1, m1.HeadSHA)
			assert.NotEqual(t, head2, m2.HeadSHA, "PR 2 merged from the head update-branch made")
			assert.Equal(t, "squash", m1.MergeMethod)
			assert.Equal(t, 1, e.routeCount(routeUpdateBranch))
			assert.Equal(t, 2, e.routeCount(routeMerge))
			e.waitQueueEmpty()
			require.Eventually(t, func() bool { return depth() == 0 }, waitFor, 5*time.Millisecond, "depth %v", depth())
			require.Eventually(t, func() bool { return e.metric("prloop_merge_results_total", "result", "merged") == 2 }, waitFor, 5*time.Millisecond)
			assert.Equal(t, 2.0, e.metric("prloop_merge_results_total"), "no other result")

			upd := e.rec.Wait(t, pr2, events.TypeBranchUpdated, waitFor).Data.(*events.BranchUpdated)
			assert.Equal(t, m2.HeadSHA, upd.HeadSHA, "PRBranchUpdated tells the poller prloop made the new head")
			assert.Equal(t, head2, upd.PreviousHeadSHA)
			assert.Equal(t, "update-branch", upd.Method)
			for _, c := range []struct {
				pr  ghref.PR
				sha string
			}{{pr1, m1.MergeSHA}, {pr2, m2.MergeSHA}} {
				info, err := e.sim.PRInfo(c.pr)
				require.NoError(t, err)
				assert.True(t, info.Merged)
				assert.Equal(t, c.sha, info.MergeCommitSHA)
			}

			// At the git level: initial commit → squash of #1 → squash of #2.
			assert.Equal(t, []string{
				m2.MergeSHA + " " + m1.MergeSHA + "|Add b (#2)",
				m1.MergeSHA + " " + base0 + "|Add a (#1)",
				base0 + " |Initial commit",
			}, strings.Split(e.git("log", "--format=%H %P|%s", "main"), "\n"))
			assert.Equal(t, "a.txt", e.git("diff-tree", "--no-commit-id", "--name-only", "-r", m1.MergeSHA))
			assert.Equal(t, "b.txt", e.git("diff-tree", "--no-commit-id", "--name-only", "-r", m2.MergeSHA))
			assert.Equal(t, "Body of Add a.", e.git("log", "-1", "--format=%b", m1.MergeSHA), "the commit body is the PR's")
			assert.Equal(t, "a", e.git("show", "main:a.txt"))
			assert.Equal(t, "b", e.git("show", "main:b.txt"))
			assert.Equal(t, []events.Type{events.TypeReviewApproved, events.TypeMergeQueued, events.TypeBranchUpdated, events.TypeMerged}, e.rec.Types(pr2))
		})
	}
}

// TestMerger_StaleApprovalNotMerged: an approval whose head moves while
// it waits in the queue is dropped; nothing is merged and nothing
// escalated. Leaving the queue says so (PRMergeFailed stale_approval): no
// exit is silent. (A head that moved before the approval is queued:
// TestAdmit_HowAnApprovalEntersTheQueue.)
func TestMerger_StaleApprovalNotMerged(t *testing.T) {
	t.Parallel()
	t.Run("moved while queued", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pr, _ := e.queuedPending()
		_, err := e.sim.PushCommit(e.repo, "feat", "agent", map[string]string{"f.txt": "changed\n"}, "Change f")
		require.NoError(t, err)
		e.waitQueueEmpty()
		failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
		assert.Equal(t, events.ReasonStaleApproval, failed.Reason)
		assertUntouched(t, e, pr, events.TypeMergeFailed)
	})
}

// assertUntouched checks that the merger changed nothing about pr.
func assertUntouched(t *testing.T, e *env, pr ghref.PR, except ...events.Type) {
	t.Helper()
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	assert.False(t, info.Merged)
	assert.Equal(t, "open", info.State)
	assert.Zero(t, e.routeCount(routeMerge))
	assert.Zero(t, e.routeCount(routeUpdateBranch))
	for _, typ := range []events.Type{events.TypeMerged, events.TypeMergeFailed, events.TypeEscalationRequested} {
		if slices.Contains(except, typ) {
			continue
		}
		assert.Zero(t, e.rec.Count(pr, typ), "no %s", typ)
	}
}

// TestMerger_FailingChecksEscalateAgainAfterTheLabelWasRemoved: a human
// removed the escalation label and the poller announced the approval of the
// same head anew, in the next escalation epoch; the checks fail again and
// that failure is news: a second PREscalationRequested, of the new epoch,
// and PRMergeFailed, not duplicates of the first.
func TestMerger_FailingChecksEscalateAgainAfterTheLabelWasRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(t, e.sim.SetCheckRun(e.repo, head, "unit-tests", "completed", "failure"))
	e.start(config(), "replica-1")
	e.approve(pr, head, "1")
	e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor)
	e.waitQueueEmpty()
	assert.Zero(t, e.rec.Wait(t, pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested).Epoch)

	e.resume(pr)
	e.approve(pr, head, "2") // the status published anew after the resume
	esc := e.rec.WaitCount(t, pr, events.TypeEscalationRequested, 2, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonChecksFailed, esc.Reason)
	assert.Equal(t, head, esc.HeadSHA)
	assert.Equal(t, 1, esc.Epoch, "the request carries the approval's epoch")
	failed := e.rec.WaitCount(t, pr, events.TypeMergeFailed, 2, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonChecksFailed, failed.Reason)
	e.waitQueueEmpty()
	assert.Equal(t, 2, e.rec.Count(pr, events.TypeEscalationRequested))
	assert.Equal(t, 2, e.rec.Count(pr, events.TypeMergeFailed))
	assert.Contains(t, esc.Detail, "unit-tests", "the escalation names the failing check")
	require.Eventually(t, func() bool { return e.metric("prloop_merge_results_total", "result", "failed") == 2 }, waitFor, 5*time.Millisecond)
	assert.Zero(t, e.routeCount(routeMerge))
}

// TestMerger_QueuedEntryTakesTheEpochOfAFreshApproval: a PR waits in the
// queue when a human resolves an escalation and the poller announces its
// approval again, in the new epoch. The PR stays queued once, and when its
// checks then fail the escalation request carries the new epoch: with the
// old one the escalator would take it for old news.
func TestMerger_QueuedEntryTakesTheEpochOfAFreshApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.queuedPending()
	e.resume(pr)
	e.announce(pr, head, "2")
	require.Eventually(t, func() bool {
		c, err := e.conn.JS.Consumer(t.Context(), events.StreamName, merger.Name)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Consumer >= 2 && len(e.keys("pending.>")) == 0
	}, waitFor, 10*time.Millisecond, "the fresh approval was never settled")

	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "failure"))
	esc := e.rec.Wait(t, pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonChecksFailed, esc.Reason)
	assert.Equal(t, 1, esc.Epoch)
	e.waitQueueEmpty()
	assert.Equal(t, 1, e.rec.Count(pr, events.TypeMergeQueued), "queued once")
}

// TestMerger_Conflict: two PRs change the same line; the first merges,
// the second then conflicts with its base. With PRLOOP_RESOLVE_CONFLICTS
// off it is escalated with merge_conflict; on, the coding agent is asked
// (PRConflictResolveRequested with the base tip it conflicts with) and no
// human is. Either way it leaves the queue untouched and unmerged.
func TestMerger_Conflict(t *testing.T) {
	t.Parallel()
	for _, resolve := range []bool{false, true} {
		t.Run(fmt.Sprintf("resolve=%t", resolve), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr1, head1 := e.openPR("feat-a", "Main a", map[string]string{"main.go": "package main // a\n"})
			pr2, head2 := e.openPR("feat-b", "Main b", map[string]string{"main.go": "package main // b\n"})
			e.start(config(func(c *merger.Config) { c.ResolveConflicts = resolve }), "replica-1")
			e.approve(pr1, head1, "1")
			e.approve(pr2, head2, "1")

			e.rec.Wait(t, pr1, events.TypeMerged, waitFor)
			failed := e.rec.Wait(t, pr2, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
			assert.Equal(t, events.ReasonMergeConflict, failed.Reason)
			e.waitQueueEmpty()
			if resolve {
				req := e.rec.Wait(t, pr2, events.TypeConflictResolveRequested, waitFor).Data.(*events.ConflictResolveRequested)
				assert.Equal(t, head2, req.HeadSHA)
				assert.Equal(t, "main", req.BaseBranch)
				assert.Equal(t, e.git("rev-parse", "main"), req.BaseSHA, "the base tip it conflicts with")
				assert.Contains(t, failed.Detail, "agent was asked")
				assert.Zero(t, e.rec.Count(pr2, events.TypeEscalationRequested), "no human is asked")
			} else {
				esc := e.rec.Wait(t, pr2, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
				assert.Equal(t, events.ReasonMergeConflict, esc.Reason)
				assert.Equal(t, head2, esc.HeadSHA)
				assert.Zero(t, e.rec.Count(pr2, events.TypeConflictResolveRequested))
			}
			info, err := e.sim.PRInfo(pr2)
			require.NoError(t, err)
			assert.False(t, info.Merged)
			assert.Equal(t, head2, info.HeadSHA, "a conflicting branch is not touched")
			assert.Equal(t, 1, e.routeCount(routeMerge))
			assert.Zero(t, e.routeCount(routeUpdateBranch))
		})
	}
}

// TestMerger_DryRunChangesNothing: in a dry run the merger publishes what
// it would do (queue, merge after an update, fail) and GitHub is unchanged.
func TestMerger_DryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ready, readyHead := e.openPR("ready", "Ready", map[string]string{"r.txt": "r\n"})
	behind, behindHead := e.openPR("behind", "Behind", map[string]string{"b.txt": "b\n"})
	red, redHead := e.openPR("red", "Red", map[string]string{"x.txt": "x\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, redHead, "ci", "failure"))
	_, err := e.sim.PushCommit(e.repo, "main", "agent", map[string]string{"other.txt": "o\n"}, "Move main")
	require.NoError(t, err)
	e.sim.ResetStats()
	main0 := e.git("rev-parse", "main")

	e.start(config(func(c *merger.Config) { c.DryRun = true }), "replica-1")
	e.approve(ready, readyHead, "1")
	e.approve(behind, behindHead, "1")
	e.approve(red, redHead, "1")
	for _, c := range []struct {
		pr   ghref.PR
		head string
	}{{ready, readyHead}, {behind, behindHead}} {
		m := e.rec.Wait(t, c.pr, events.TypeMerged, waitFor).Data.(*events.Merged)
		assert.True(t, m.DryRun)
		assert.Empty(t, m.MergeSHA)
		assert.Equal(t, c.head, m.HeadSHA)
	}
	failed := e.rec.Wait(t, red, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.True(t, failed.DryRun)
	assert.Equal(t, events.ReasonChecksFailed, failed.Reason)
	e.waitQueueEmpty()

	assert.Zero(t, e.rec.Count(red, events.TypeEscalationRequested), "a dry run asks no human")
	assert.Equal(t, main0, e.git("rev-parse", "main"))
	for route, n := range e.sim.Stats().ByRoute {
		assert.True(t, strings.HasPrefix(route, "GET "), "dry run sent %d %s", n, route)
	}
	for _, c := range []struct {
		pr   ghref.PR
		head string
	}{{ready, readyHead}, {behind, behindHead}, {red, redHead}} {
		info, err := e.sim.PRInfo(c.pr)
		require.NoError(t, err)
		assert.False(t, info.Merged)
		assert.Equal(t, c.head, info.HeadSHA)
	}
}

// TestMerger_OnceUnderRedeliveryAndRestart: the same approval published
// twice with different ids, and a replica stopped mid-wait and replaced,
// still give one queue entry, one merge and one PRMerged.
func TestMerger_OnceUnderRedeliveryAndRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "pending"))
	stopFirst := e.start(config(), "replica-1")
	e.approve(pr, head, "1")
	e.approve(pr, head, "2")
	e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)
	require.Eventually(t, func() bool {
		c, err := e.conn.JS.Consumer(t.Context(), events.StreamName, merger.Name)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Consumer >= 2
	}, waitFor, 10*time.Millisecond, "both approvals handled")
	require.Len(t, e.queued(), 1)

	stopFirst()
	e.start(config(), "replica-2")
	e.approve(pr, head, "3") // and once more after the restart
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	e.waitQueueEmpty()
	assert.Equal(t, 1, e.rec.Count(pr, events.TypeMerged))
	assert.Equal(t, 1, e.rec.Count(pr, events.TypeMergeQueued))
	assert.Equal(t, 1, e.routeCount(routeMerge))
}

// TestMerger_WaitsForADeadReplicasLock: a lock left by a replica that died
// holds the base until its lease expires; then the merge goes ahead.
func TestMerger_WaitsForADeadReplicasLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	const ttl = 1500 * time.Millisecond
	_, err := kvlease.Acquire(t.Context(), e.kv, "lock.acme.widgets.main", "dead-replica", kvlease.Options{TTL: ttl})
	require.NoError(t, err)
	locked := time.Now()

	e.start(config(), "replica-1")
	e.approve(pr, head, "1")
	e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	assert.GreaterOrEqual(t, time.Since(locked), ttl, "merged only after the dead replica's lease ran out")
	e.waitQueueEmpty()
}

// TestMerger_MergeAnswerLost: the merge request times out but GitHub merged
// anyway; the merger checks before doing anything else, sees the merge, and
// publishes PRMerged without asking to merge twice.
func TestMerger_MergeAnswerLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	e.sim.InjectFault(ghsim.Fault{Method: "PUT", Path: "/merge$", Kind: ghsim.FaultLostAnswer})
	// The lost answer is held until the client gives up: a short attempt
	// timeout keeps the test quick. Not too short: every other request of
	// the merger uses this client too, and under a loaded machine (two CI
	// runs side by side) 100 ms made ordinary reads time out until the
	// entry escalated on its failure count.
	client := e.Client(t, func(c *github.Config) { c.RequestTimeout, c.MaxRetries = time.Second, -1 })
	e.start(config(func(c *merger.Config) { c.PollInterval = 400 * time.Millisecond }), "replica-1", client)
	e.approve(pr, head, "1")

	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	assert.True(t, info.Merged)
	assert.Equal(t, info.MergeCommitSHA, m.MergeSHA)
	assert.Equal(t, 1, e.routeCount(routeMerge), "merged once")
	assert.Zero(t, e.rec.Count(pr, events.TypeMergeFailed))
	e.waitQueueEmpty()
}

// TestMerger_RebaseUpdateAndDeleteBranch: with PRLOOP_UPDATE_METHOD=rebase
// the second PR is rebased locally and pushed with --force-with-lease, the
// approval carries over to the rebased head, and with PRLOOP_DELETE_BRANCH
// the merged branches are deleted.
func TestMerger_RebaseUpdateAndDeleteBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr1, head1 := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
	pr2, head2 := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
	e.start(config(func(c *merger.Config) { c.UpdateMethod, c.DeleteBranch = merger.UpdateRebase, true }), "replica-1")
	e.approve(pr1, head1, "1")
	e.approve(pr2, head2, "1")

	m1 := e.rec.Wait(t, pr1, events.TypeMerged, waitFor).Data.(*events.Merged)
	m2 := e.rec.Wait(t, pr2, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.NotEqual(t, head2, m2.HeadSHA)
	assert.Equal(t, m1.MergeSHA, e.git("rev-parse", m2.HeadSHA+"^"), "PR 2 was rebased onto PR 1's squash commit")
	assert.Equal(t, "Add b", e.git("log", "-1", "--format=%s", m2.HeadSHA), "the rebase keeps the commit")
	upd := e.rec.Wait(t, pr2, events.TypeBranchUpdated, waitFor).Data.(*events.BranchUpdated)
	assert.Equal(t, m2.HeadSHA, upd.HeadSHA)
	assert.Equal(t, head2, upd.PreviousHeadSHA)
	assert.Equal(t, "rebase", upd.Method)
	assert.Equal(t, 1, e.rec.Count(pr2, events.TypeBranchUpdated))
	assert.Zero(t, e.routeCount(routeUpdateBranch))
	e.waitQueueEmpty()
	refs := e.git("for-each-ref", "--format=%(refname)", "refs/heads/")
	assert.Equal(t, "refs/heads/main", refs, "merged head branches deleted")
}

// TestMerger_FailedEnqueueKeepsArrivalOrder: when queuing the first PR
// fails for a moment (GitHub answers 500 to its read), the second PR's
// approval does not overtake it: PR 1 is still queued first, at position 1,
// PR 2 behind it, and they merge in that order.
func TestMerger_FailedEnqueueKeepsArrivalOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr1, head1 := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
	pr2, head2 := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, head1, "ci", "pending"))
	e.sim.InjectFault(ghsim.Fault{Method: "GET", Path: fmt.Sprintf("/pulls/%d$", pr1.Number), Kind: ghsim.FaultStatus500})

	// No client retries: the 500 fails the enqueue itself.
	e.start(config(), "replica-1", e.Client(t, func(c *github.Config) { c.MaxRetries = -1 }))
	e.approve(pr1, head1, "1")
	e.approve(pr2, head2, "1")
	q1 := e.rec.Wait(t, pr1, events.TypeMergeQueued, waitFor)
	q2 := e.rec.Wait(t, pr2, events.TypeMergeQueued, waitFor)
	assert.Less(t, q1.Seq, q2.Seq, "PR 1 queued first")
	assert.Equal(t, 1, q1.Data.(*events.MergeQueued).Position)
	assert.Equal(t, 2, q2.Data.(*events.MergeQueued).Position, "PR 2 queues behind PR 1")

	require.NoError(t, e.sim.SetStatus(e.repo, head1, "ci", "success"))
	r1 := e.rec.Wait(t, pr1, events.TypeMerged, waitFor)
	r2 := e.rec.Wait(t, pr2, events.TypeMerged, waitFor)
	assert.Less(t, r1.Seq, r2.Seq, "PR 1 merged first")
}
