package main

import (
	"io"
	"strconv"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/logging"
)

// TestLoop_WithdrawnApprovalDoesNotMerge runs the four services in one
// process. alice 👍s a PR, the poller approves it and the merger queues it
// to wait for its pending check; then the approval stops standing, and the
// PR must not merge when the check passes:
//
//   - alice submits a native "Request changes" review: her latest signal
//     is her verdict across protocols, so the poller hands the change
//     request to the agent (PRFeedbackReceived) and the merger drops the
//     PR (approval_withdrawn);
//   - the author retargets the PR to release: an approval is for a head on
//     a base, so the poller publishes the status anew (pending) and the
//     merger drops the PR (stale_approval). A fresh 👍 then approves it for
//     release, and it merges there.
func TestLoop_WithdrawnApprovalDoesNotMerge(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	tests := []struct {
		name string
		// withdraw ends the approval of head while pr waits for its check.
		withdraw func(t *testing.T, sim *ghsim.Sim, author *github.Client, pr ghref.PR, head string)
		// reason is the merger's PRMergeFailed reason.
		reason events.Reason
		// retarget: the PR moved to release, where a fresh 👍 merges it.
		retarget bool
	}{
		{
			name: "the approver requests changes natively",
			withdraw: func(t *testing.T, sim *ghsim.Sim, _ *github.Client, pr ghref.PR, head string) {
				_, err := sim.AddReview(pr, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "CHANGES_REQUESTED", Body: "Wait, this breaks X.", CommitID: head})
				require.NoError(t, err)
			},
			reason: events.ReasonApprovalWithdrawn,
		},
		{
			name: "the author retargets the PR",
			withdraw: func(t *testing.T, _ *ghsim.Sim, author *github.Client, pr ghref.PR, _ string) {
				_, _, err := author.GitHub().PullRequests.Edit(t.Context(), pr.Owner, pr.Repo, pr.Number, &gh.PullRequest{Base: &gh.PullRequestBranch{Ref: gh.String("release")}})
				require.NoError(t, err)
			},
			reason: events.ReasonStaleApproval, retarget: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sim, srv, demo := startLoopSim(t, dir)
			gitIn(t, sim.GitDir(demo.Repo), "branch", "release", "main")
			head, err := sim.PushCommit(demo.Repo, "risky", ghsim.DemoAgent, map[string]string{"risky.go": "package main\n"}, "Add risky")
			require.NoError(t, err)
			pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Add risky", Head: "risky", Author: ghsim.DemoAgent})
			require.NoError(t, err)
			require.NoError(t, sim.SetStatus(demo.Repo, head, "ci", "pending"))
			author, err := github.New(t.Context(), github.Config{APIURL: srv.URL, Token: github.Secret(demo.Tokens[ghsim.DemoAgent])},
				github.Options{Logger: logging.New(io.Discard, "error", "json")})
			require.NoError(t, err)

			agent := writeAgent(t, dir, "#!/bin/sh\necho 'nothing to change'\n")
			setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "emoji,reviews", "PRLOOP_REQUIRE_CHECKS": "true"})
			ctx, rt, _ := startLoop(t, "withdraw")
			log := followLoop(t, ctx, rt, func(events.Data, string) error { return nil })
			emit := events.NewEmitter(rt.JS, "test")
			_, _, err = emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "withdraw")
			require.NoError(t, err)

			// alice's 👍 once the poller watches the PR; then it is
			// approved and waits in main's queue for ci.
			require.Eventually(t, func() bool { return len(ofType[*events.ReviewPending](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "never watched:\n%s", log)
			thumb, err := sim.AddReaction(pr, ghsim.DemoReviewer, "+1")
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(ofType[*events.MergeWaiting](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "never queued to wait for ci:\n%s", log.lines(pr))
			approved := ofType[*events.ReviewApproved](log, pr)
			require.Len(t, approved, 1, log.lines(pr))
			assert.Equal(t, "main", approved[0].BaseBranch)

			tt.withdraw(t, sim, author, pr, head)
			require.Eventually(t, func() bool { return len(ofType[*events.MergeFailed](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "the merger kept the PR:\n%s", log.lines(pr))
			assert.Equal(t, tt.reason, ofType[*events.MergeFailed](log, pr)[0].Reason, log.lines(pr))
			if tt.retarget {
				require.Eventually(t, func() bool { return len(ofType[*events.ReviewPending](log, pr)) == 2 }, time.Minute, 20*time.Millisecond,
					"the poller did not publish the retargeted PR's status anew:\n%s", log.lines(pr))
			} else {
				require.Eventually(t, func() bool { return len(ofType[*events.FeedbackReceived](log, pr)) == 1 }, time.Minute, 20*time.Millisecond,
					"the agent never got the change request:\n%s", log.lines(pr))
				fb := ofType[*events.FeedbackReceived](log, pr)[0]
				assert.Equal(t, []string{ghsim.DemoReviewer}, fb.Reviewers)
				assert.Len(t, fb.ReviewIDs, 1)
			}

			// ci passes: nothing merges on the withdrawn approval.
			require.NoError(t, sim.SetStatus(demo.Repo, head, "ci", "success"))
			if !tt.retarget {
				// Long enough for the merger's one-second passes to have
				// merged it, were it still queued.
				require.Never(t, func() bool {
					info, err := sim.PRInfo(pr)
					return err != nil || info.Merged
				}, 5*time.Second, 100*time.Millisecond, "merged on a withdrawn approval:\n%s", log.lines(pr))
				assert.Len(t, ofType[*events.ReviewApproved](log, pr), 1, log.lines(pr))
				return
			}
			assert.Len(t, ofType[*events.ReviewApproved](log, pr), 1, "the 👍 for main does not approve the PR on release:\n%s", log.lines(pr))
			info, err := sim.PRInfo(pr)
			require.NoError(t, err)
			assert.False(t, info.Merged)

			// alice approves anew, for release: it merges there.
			require.NoError(t, sim.RemoveReaction(pr, thumb))
			_, err = sim.AddReaction(pr, ghsim.DemoReviewer, "+1")
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(ofType[*events.Merged](log, pr)) == 1 }, time.Minute, 20*time.Millisecond, "never merged after the new approval:\n%s", log.lines(pr))
			again := ofType[*events.ReviewApproved](log, pr)
			require.Len(t, again, 2, log.lines(pr))
			assert.Equal(t, "release", again[1].BaseBranch)
			assert.False(t, again[1].BaseSince.IsZero(), "the approval says since when the PR is on release")
			assert.Contains(t, gitIn(t, sim.GitDir(demo.Repo), "log", "--format=%s", "release"), "Add risky (#"+strconv.Itoa(pr.Number)+")")
			assert.NotContains(t, gitIn(t, sim.GitDir(demo.Repo), "log", "--format=%s", "main"), "Add risky")
		})
	}
}
