package merger_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/services/merger"
)

// TestMerger_ForgedApprovalNotMerged: a PRReviewApproved that GitHub does
// not back (no approval at all, a 👍 by someone who may not review, a 👍
// older than the head) is answered with PRMergeFailed not_approved, never
// queued, never merged.
func TestMerger_ForgedApprovalNotMerged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// arrange leaves GitHub in its state and returns the head to announce.
		arrange func(e *env, pr ghref.PR, head string) string
	}{
		{name: "no approval on GitHub", arrange: func(e *env, pr ghref.PR, head string) string {
			e.watch(pr, head)
			return head
		}},
		{name: "a 👍 by a user without write permission", arrange: func(e *env, pr ghref.PR, head string) string {
			e.watch(pr, head)
			_, err := e.sim.AddReaction(pr, "mallory", "+1")
			require.NoError(e.t, err)
			return head
		}},
		{name: "a 👍 given before the head was pushed", arrange: func(e *env, pr ghref.PR, head string) string {
			e.watch(pr, head)
			e.thumbsUp(pr)
			e.sim.Advance(time.Minute)
			next, err := e.sim.PushCommit(e.repo, "feat", "agent", map[string]string{"f.txt": "unreviewed\n"}, "Change f")
			require.NoError(e.t, err)
			e.watch(pr, next)
			return next
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
			head = tt.arrange(e, pr, head)
			e.start(config(), "replica-1")
			e.announce(pr, head, "forged")

			failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
			assert.Equal(t, events.ReasonNotApproved, failed.Reason)
			assert.Equal(t, head, failed.HeadSHA)
			e.waitQueueEmpty()
			assertUntouched(t, e, pr, events.TypeMergeFailed)
			assert.Zero(t, e.rec.Count(pr, events.TypeMergeQueued))
		})
	}
}

// TestMerger_WithdrawnApprovalLeavesTheQueue: alice removes her 👍 while
// the PR waits for its checks; the PR leaves the queue with PRMergeFailed
// approval_withdrawn and is not merged when the checks pass. A fresh 👍
// and its PRReviewApproved queue it again, and it merges.
func TestMerger_WithdrawnApprovalLeavesTheQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.queuedPending()

	e.mu.Lock()
	thumb := e.thumbs[pr.Number]
	e.mu.Unlock()
	require.NoError(t, e.sim.RemoveReaction(pr, thumb))
	failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonApprovalWithdrawn, failed.Reason)
	assert.Equal(t, head, failed.HeadSHA)
	e.waitQueueEmpty()
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	assertUntouched(t, e, pr, events.TypeMergeFailed)

	e.sim.Advance(time.Second)
	e.thumbsUp(pr)
	e.announce(pr, head, "2")
	e.rec.WaitCount(t, pr, events.TypeMergeQueued, 2, waitFor)
	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.Equal(t, head, m.HeadSHA)
	assert.Equal(t, 1, e.routeCount(routeMerge))
	assert.Zero(t, e.rec.Count(pr, events.TypeEscalationRequested), "a withdrawal needs no human")
}

// updateHook is prloop's GitHub client with update-branch replaced.
type updateHook struct {
	*github.Client
	update func(ctx context.Context, pr ghref.PR, expected string) error
}

func (u *updateHook) UpdateBranch(ctx context.Context, pr ghref.PR, expected string) error {
	return u.update(ctx, pr, expected)
}

// TestMerger_ForeignMergeCommitNotMerged: PR 2 is behind after PR 1
// merges. While prloop updates it, the author pushes their own merge of
// main into the approved head, with a tree of their choosing. Whether
// GitHub refuses prloop's update-branch because of that push, or the push
// shows up where prloop's update was expected, the foreign head does not
// inherit the approval: PR 2 leaves with stale_approval and is not merged.
func TestMerger_ForeignMergeCommitNotMerged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// answer is what update-branch answers after the author's push.
		answer error
	}{
		{name: "GitHub refuses the update", answer: fmt.Errorf("update branch: %w", github.ErrValidation)},
		{name: "the foreign head shows up as the update's result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr1, head1 := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
			pr2, head2 := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
			_, err := e.sim.PushCommit(e.repo, "evil", "agent", map[string]string{"b.txt": "b\n", "backdoor.txt": "x\n"}, "Evil")
			require.NoError(t, err)
			var foreign atomic.Value
			hook := &updateHook{Client: e.Client(t), update: func(ctx context.Context, pr ghref.PR, expected string) error {
				// The author's merge: parents the approved head and main,
				// the tree of their evil branch.
				sha := e.commitTree(e.git("rev-parse", "evil^{tree}"), "Merge branch 'main' into feat-b", head2, e.git("rev-parse", "main"))
				e.git("update-ref", "refs/heads/feat-b", sha, head2)
				foreign.Store(sha)
				return tt.answer
			}}
			e.start(config(func(c *merger.Config) { c.MergeRetries = 10 }), "replica-1", hook)
			e.approve(pr1, head1, "1")
			e.approve(pr2, head2, "1")
			e.rec.Wait(t, pr1, events.TypeMerged, waitFor)

			failed := e.rec.Wait(t, pr2, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
			assert.Equal(t, events.ReasonStaleApproval, failed.Reason)
			e.waitQueueEmpty()
			info, err := e.sim.PRInfo(pr2)
			require.NoError(t, err)
			assert.False(t, info.Merged, "the foreign merge commit was not merged")
			assert.Equal(t, foreign.Load(), info.HeadSHA)
			assert.Equal(t, 1, e.routeCount(routeMerge), "only PR 1 merged")
			assert.Zero(t, e.rec.Count(pr2, events.TypeBranchUpdated), "the poller is not told the foreign head is prloop's")
		})
	}
}

// commitTree makes a commit in the simulator's repository, as a user
// pushing it would.
func (e *env) commitTree(tree, msg string, parents ...string) string {
	e.t.Helper()
	args := []string{"--git-dir", e.sim.GitDir(e.repo), "commit-tree", tree, "-m", msg}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + e.t.TempDir(), "LC_ALL=C",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com"}
	out, err := cmd.CombinedOutput()
	require.NoError(e.t, err, "git commit-tree: %s", out)
	return strings.TrimSpace(string(out))
}

// TestMerger_ChangeRequestWithdrawsTheApproval: alice approves, the PR is
// queued and waits for its check, and then alice herself asks for
// changes, in another protocol than her approval. Her latest signal is
// her verdict: the PR leaves the queue with approval_withdrawn and is not
// merged when the check passes.
func TestMerger_ChangeRequestWithdrawsTheApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// approve leaves alice's approval of head on GitHub.
		approve func(e *env, pr ghref.PR, head string)
		// withdraw is alice's change request, a minute later.
		withdraw func(e *env, pr ghref.PR, head string)
	}{
		{
			name:    "a 👍, then a native request for changes",
			approve: func(e *env, pr ghref.PR, _ string) { e.thumbsUp(pr) },
			withdraw: func(e *env, pr ghref.PR, head string) {
				_, err := e.sim.AddReview(pr, ghsim.ReviewInput{Login: "alice", State: "CHANGES_REQUESTED", Body: "This breaks X.", CommitID: head})
				require.NoError(e.t, err)
			},
		},
		{
			name: "a native approval, then a comment asking for changes",
			approve: func(e *env, pr ghref.PR, head string) {
				_, err := e.sim.AddReview(pr, ghsim.ReviewInput{Login: "alice", State: "APPROVED", CommitID: head})
				require.NoError(e.t, err)
			},
			withdraw: func(e *env, pr ghref.PR, _ string) {
				_, err := e.sim.AddIssueComment(pr, "alice", "Wait, this breaks X.")
				require.NoError(e.t, err)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "pending"))
			e.start(config(), "replica-1")
			e.watch(pr, head)
			tt.approve(e, pr, head)
			e.announce(pr, head, "1")
			e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)

			e.sim.Advance(time.Minute)
			tt.withdraw(e, pr, head)
			failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
			assert.Equal(t, events.ReasonApprovalWithdrawn, failed.Reason, failed.Detail)
			e.waitQueueEmpty()
			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
			assertUntouched(t, e, pr, events.TypeMergeFailed)
		})
	}
}

// TestMerger_RetargetWithdrawsTheApproval: an approval is for a head on a
// base. A PR retargeted from main to release while it waits in main's
// queue leaves it with stale_approval and merges into neither; an approval
// for main that arrives after the PR moved to release queues nothing.
func TestMerger_RetargetWithdrawsTheApproval(t *testing.T) {
	t.Parallel()
	// withRelease opens a PR on main, with ci in state, in a repository
	// that also has a release branch.
	withRelease := func(t *testing.T, ci string) (*env, ghref.PR, string) {
		e := newEnv(t)
		pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
		e.git("branch", "release", "main")
		require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", ci))
		return e, pr, head
	}
	retarget := func(e *env, pr ghref.PR, base string) {
		_, _, err := e.Client(e.t).GitHub().PullRequests.Edit(e.t.Context(), e.repo.Owner, e.repo.Name, pr.Number, &gh.PullRequest{Base: &gh.PullRequestBranch{Ref: gh.String(base)}})
		require.NoError(e.t, err)
	}
	t.Run("retargeted while queued", func(t *testing.T) {
		t.Parallel()
		e, pr, head := withRelease(t, "pending")
		e.start(config(), "replica-1")
		e.approve(pr, head, "1")
		e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor)
		retarget(e, pr, "release")
		failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
		assert.Equal(t, events.ReasonStaleApproval, failed.Reason)
		assert.Contains(t, failed.Detail, "a new base needs a new approval")
		e.waitQueueEmpty()
		require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
		assertUntouched(t, e, pr, events.TypeMergeFailed)
		assert.Equal(t, 1, e.rec.Count(pr, events.TypeMergeQueued), "not queued for the new base")
		assert.NotContains(t, e.git("log", "--format=%s", "release"), "Add f")
	})
	t.Run("an approval for the old base arrives", func(t *testing.T) {
		t.Parallel()
		e, pr, head := withRelease(t, "success")
		e.watch(pr, head)
		e.thumbsUp(pr)
		retarget(e, pr, "release")
		e.start(config(), "replica-1")
		e.mu.Lock()
		anchor := e.anchors[head]
		e.mu.Unlock()
		_, _, err := e.emit.Emit(t.Context(), &events.ReviewApproved{
			Base: events.Base{PR: pr, HeadSHA: head}, Status: events.StatusApproved, Approvers: []string{"alice"},
			Anchor: anchor, BaseBranch: "main",
		}, head, "1")
		require.NoError(t, err)
		failed := e.rec.Wait(t, pr, events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
		assert.Equal(t, events.ReasonNotApproved, failed.Reason)
		assert.Contains(t, failed.Detail, "a new base needs a new approval")
		e.waitQueueEmpty()
		assertUntouched(t, e, pr, events.TypeMergeFailed)
		assert.Zero(t, e.rec.Count(pr, events.TypeMergeQueued))
	})
}

// TestMerger_RequestsPerMerge measures the GitHub requests the merger
// sends per merge (BENCHMARKS.md): one PR that merges at once, and two
// where the second is brought up to date with update-branch first. The
// sim counts every request, 304s included; checks are green from the start.
func TestMerger_RequestsPerMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		prs  int
	}{{name: "ready PR", prs: 1}, {name: "two PRs, the second updated", prs: 2}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var prs []ghref.PR
			var heads []string
			for i := range tt.prs {
				pr, head := e.openPR(fmt.Sprintf("feat-%d", i), fmt.Sprintf("Add %d", i), map[string]string{fmt.Sprintf("%d.txt", i): "x\n"})
				require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
				prs, heads = append(prs, pr), append(heads, head)
			}
			e.sim.ResetStats()
			e.start(config(), "replica-1")
			for i, pr := range prs {
				e.approve(pr, heads[i], "1")
				if i > 0 {
					// CI reports on the head prloop's update-branch made:
					// the checks gate waits for it, as it must.
					var updated string
					require.Eventually(t, func() bool {
						info, err := e.sim.PRInfo(pr)
						updated = info.HeadSHA
						return err == nil && updated != heads[i]
					}, waitFor, 20*time.Millisecond, "no update-branch of %s", pr)
					require.NoError(t, e.sim.SetStatus(e.repo, updated, "ci", "success"))
				}
				e.rec.Wait(t, pr, events.TypeMerged, waitFor)
			}
			e.waitQueueEmpty()
			st := e.sim.Stats()
			t.Logf("%s: %d requests (%d counted against the rate limit) for %d merges: %.1f per merge",
				tt.name, st.Total, st.Counted, tt.prs, float64(st.Total)/float64(tt.prs))
			for route, n := range st.ByRoute {
				t.Logf("  %3d %s", n, route)
			}
		})
	}
}
