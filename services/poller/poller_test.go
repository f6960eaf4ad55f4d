package poller_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_EmojiLifecycle drives one PR through every transition of the
// emoji protocol: pending → 👀 → comments → (agent pushes) → pending on the
// new head → 👍 approved, at GitHub's page size and with pages of 3.
func TestPoller_EmojiLifecycle(t *testing.T) {
	t.Parallel()
	for _, per := range simtest.PageSizes {
		t.Run(fmt.Sprintf("per_page=%d", per), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, per)
			e.start(e.config())
			e.watch(e.pr)
			pending := e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
			head1 := pending.Data.(*events.ReviewPending).HeadSHA
			require.NotEmpty(t, head1)

			e.tick()
			eyes, err := e.sim.AddReaction(e.pr, "alice", "eyes")
			require.NoError(t, err)
			inProgress := e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
			assert.Equal(t, "alice", inProgress.Data.(*events.ReviewInProgress).Actor)

			e.tick()
			c1, err := e.sim.AddIssueComment(e.pr, "alice", "Please handle the error case.")
			require.NoError(t, err)
			rc, err := e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "bob", Path: "main.go", Line: 3, Body: "main is empty"})
			require.NoError(t, err)
			require.NoError(t, e.sim.RemoveReaction(e.pr, eyes))
			fb := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
			assert.Equal(t, head1, fb.HeadSHA)
			assert.ElementsMatch(t, []int64{c1, rc}, fb.CommentIDs)
			assert.Equal(t, events.StatusChangesRequested, fb.Status)

			// The agent pushes a fix; the feedback service reports it.
			e.tick()
			head2, err := e.sim.PushCommit(e.repo, "feature", "agent", map[string]string{"main.go": "package main\n\nfunc main() { println() }\n"}, "Fix")
			require.NoError(t, err)
			pushedAt := e.sim.Now()
			_, _, err = e.emit.Emit(t.Context(), &events.FeedbackAddressed{Base: events.Base{PR: e.pr, HeadSHA: head2}, PreviousHeadSHA: head1, FixCycle: 1, PushedAt: pushedAt}, head2)
			require.NoError(t, err)
			pending2 := e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor)
			assert.Equal(t, head2, pending2.Data.(*events.ReviewPending).HeadSHA, "re-evaluated from the new head; old comments do not count")

			e.tick()
			_, err = e.sim.AddReaction(e.pr, "bob", "+1")
			require.NoError(t, err)
			ok := e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor).Data.(*events.ReviewApproved)
			assert.Equal(t, head2, ok.HeadSHA)
			assert.Equal(t, []string{"bob"}, ok.Approvers)

			// The poller publishes, then records (pkg/state: a crash in
			// between republishes the same id): the record follows the event.
			var st state.PR
			require.Eventually(t, func() bool {
				st, _, err = e.store.Get(t.Context(), e.pr)
				return err == nil && st.Status == events.StatusApproved
			}, waitFor, 10*time.Millisecond, "the poller's record says approved")
			assert.Equal(t, head2, st.HeadSHA)
			assert.Equal(t, 1, st.FixCycle)
			assert.Equal(t, pushedAt, st.HeadAnchor.UTC(), "prloop's own push anchors the new head")
			assert.Equal(t, []events.Type{
				events.TypeWatchRequested, events.TypeReviewPending, events.TypeReviewInProgress, events.TypeFeedbackReceived,
				events.TypeFeedbackAddressed, events.TypeReviewPending, events.TypeReviewApproved,
			}, e.rec.Types(e.pr))
		})
	}
}

// TestPoller_StaleSignalsDoNotCount checks the head anchor: a 👍 and
// comments from before a push mean nothing for the new head.
func TestPoller_StaleSignalsDoNotCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	e.tick()
	_, err := e.sim.AddIssueComment(e.pr, "alice", "old remark")
	require.NoError(t, err)
	// The remark asks for a change. Waiting for it makes the run
	// deterministic: a poll that saw the remark and the 👍 together would
	// not ask at all.
	asked := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
	e.tick()
	_, err = e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor) // the 👍 came after prloop saw the head
	// The feedback service ends the change request without a fix, as it
	// does when nothing is left to address; until it speaks, a new head is
	// held back (causal order), which TestPoller_NewHeadWaitsForTheChangeRequestToEnd covers.
	_, _, err = e.emit.Emit(t.Context(), &events.FeedbackSkipped{
		Base: events.Base{PR: e.pr, HeadSHA: asked.HeadSHA}, FixCycle: asked.FixCycle, Actor: "feedback", Detail: "no feedback left to address",
	}, "test")
	require.NoError(t, err)

	// Someone else pushes: the approval and the comment are now stale.
	e.tick()
	head2, err := e.sim.PushCommit(e.repo, "feature", "agent", map[string]string{"b.go": "package main\n"}, "More")
	require.NoError(t, err)
	pending := e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, head2, pending.HeadSHA)

	// Nothing else happens on the new head however often it is polled.
	seq := len(e.rec.For(e.pr))
	e.waitProbes(10)
	assert.Len(t, e.rec.For(e.pr), seq, "no event from stale signals: %v", e.rec.Types(e.pr))
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeReviewApproved))
}

// TestPoller_BackdatedHeadAtWatchStartIsNotApproved: a commit's dates are
// its author's to choose. A head pushed after alice's 👍 but dated before it
// must not be approved by that 👍 when watching begins: only signals that
// prloop saw come after the head count, and alice's next 👍 approves.
func TestPoller_BackdatedHeadAtWatchStartIsNotApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1") // on the reviewed head
	require.NoError(t, err)
	e.tick()
	backdated, err := e.sim.PushCommitDated(e.repo, "feature", "agent", map[string]string{"evil.go": "package main\n"},
		"Unreviewed change", e.sim.Now().Add(-time.Hour))
	require.NoError(t, err)
	e.tick()
	e.watch(e.pr)
	pending := e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, backdated, pending.HeadSHA)
	e.waitProbes(5)
	assert.Zero(t, e.rec.Count(e.pr, events.TypeReviewApproved), "an old 👍 approved a backdated head: %v", e.rec.Types(e.pr))

	e.tick()
	_, err = e.sim.AddReaction(e.pr, "bob", "+1")
	require.NoError(t, err)
	approved := e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor).Data.(*events.ReviewApproved)
	assert.Equal(t, backdated, approved.HeadSHA)
	assert.Equal(t, []string{"bob"}, approved.Approvers)
}

// TestPoller_AddressedFeedbackNeverAsksAgain: a comment a fix addressed is
// known by its id, not by its timestamp. GitHub's timestamps have whole
// seconds, so a comment in the same second as the fix's push looks fresh on
// the fix's head; it must not request changes again.
func TestPoller_AddressedFeedbackNeverAsksAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	asked := e.askForChanges("please fix")
	require.Len(t, asked.CommentIDs, 1, "the one comment asked for the change")

	// The fix lands in the same (simulated) second as the comment.
	fix, err := e.sim.PushCommit(e.repo, "feature", "prloop-bot", map[string]string{"fix.go": "package main\n"}, "Fix")
	require.NoError(t, err)
	_, _, err = e.emit.Emit(t.Context(), &events.FeedbackAddressed{
		Base: events.Base{PR: e.pr, HeadSHA: fix}, PreviousHeadSHA: asked.HeadSHA, FixCycle: 1, PushedAt: e.sim.Now(),
	}, "test")
	require.NoError(t, err)
	pending := e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, fix, pending.HeadSHA)
	e.waitProbes(5)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeFeedbackReceived), "the addressed comment asked again: %v", e.rec.Types(e.pr))
}

// TestPoller_UnauthorizedSignalsIgnored: a reader's 👍, the author's own
// approval, prloop's comment and another bot's 👀 change nothing.
func TestPoller_UnauthorizedSignalsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	e.tick()
	for _, sig := range []struct{ login, content string }{{"reader", "+1"}, {"agent", "+1"}, {"coderabbitai[bot]", "eyes"}, {"copilot-pull-request-reviewer", "eyes"}} {
		_, err := e.sim.AddReaction(e.pr, sig.login, sig.content)
		require.NoError(t, err)
	}
	_, err := e.sim.AddIssueComment(e.pr, "prloop-bot", "prloop is watching this PR")
	require.NoError(t, err)
	_, err = e.sim.AddIssueComment(e.pr, "reader", "LGTM, merge it!")
	require.NoError(t, err)

	e.signalsChangeNothing()
}

// TestPoller_NativeReviews covers the reviews protocol: the latest review
// per reviewer on the current head counts.
func TestPoller_NativeReviews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config(func(c *poller.Config) { c.ReviewProtocols = []string{"reviews"} }))
	e.watchPending()
	e.tick()
	rid, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "CHANGES_REQUESTED", Body: "Needs tests.",
		Comments: []ghsim.ReviewCommentInput{{Path: "main.go", Line: 3, Body: "test this"}}})
	require.NoError(t, err)
	fb := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
	assert.Equal(t, []int64{rid}, fb.ReviewIDs)
	assert.Len(t, fb.CommentIDs, 1)

	e.tick()
	_, err = e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "APPROVED"})
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
}

// TestPoller_NoSecondFeedbackWhileAddressed: while the change request on a
// head is being addressed, more comments on the same head publish nothing.
func TestPoller_NoSecondFeedbackWhileAddressed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.askForChanges("one")

	e.tick()
	eyes, err := e.sim.AddReaction(e.pr, "bob", "eyes")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
	e.tick()
	_, err = e.sim.AddIssueComment(e.pr, "bob", "two")
	require.NoError(t, err)
	require.NoError(t, e.sim.RemoveReaction(e.pr, eyes))
	e.waitRequests(reactionsRoute, 1)
	e.waitProbes(3)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeFeedbackReceived), "same head, feedback in flight: %v", e.rec.Types(e.pr))
}

// TestPoller_NewHeadWaitsForTheChangeRequestToEnd: a push while the change
// request on the old head is being addressed is the fix or a push that
// raced it, which only the feedback service can tell. The poller publishes
// nothing about the new head until the feedback service ends the change
// request (here with PRFeedbackSkipped: the head moved under it), and then
// publishes the new head's status at once.
func TestPoller_NewHeadWaitsForTheChangeRequestToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	asked := e.askForChanges("please fix")

	e.tick()
	human, err := e.sim.PushCommit(e.repo, "feature", "bob", map[string]string{"bob.go": "package main\n"}, "A push of bob's")
	require.NoError(t, err)
	e.waitProbes(3)
	assert.Equal(t, []events.Type{events.TypeWatchRequested, events.TypeReviewPending, events.TypeFeedbackReceived}, e.rec.Types(e.pr),
		"nothing about %s while the change request on %s is open", human, asked.HeadSHA)

	_, _, err = e.emit.Emit(t.Context(), &events.FeedbackSkipped{Base: events.Base{PR: e.pr, HeadSHA: asked.HeadSHA}, Detail: "the head moved"}, "test")
	require.NoError(t, err)
	pending := e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, human, pending.HeadSHA)
}

// TestPoller_RestartResumes: a poller stopped and started again resumes from
// KV state: it neither repeats a transition nor loses one made meanwhile.
func TestPoller_RestartResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "eyes")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
	e.stop()

	e.tick()
	_, err = e.sim.AddReaction(e.pr, "bob", "+1") // while no poller runs
	require.NoError(t, err)
	e.sim.ResetStats()
	e.start(e.config())
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
	e.waitProbes(5)
	assert.Equal(t, []events.Type{events.TypeWatchRequested, events.TypeReviewPending, events.TypeReviewInProgress, events.TypeReviewApproved}, e.rec.Types(e.pr))
}

// TestPoller_ClosedAndReopened: closing publishes PRClosed and stops
// watching; reopening resumes.
func TestPoller_ClosedAndReopened(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	require.NoError(t, e.sim.ClosePR(e.pr))
	closed := e.rec.Wait(t, e.pr, events.TypeClosed, waitFor).Data.(*events.Closed)
	assert.False(t, closed.Merged)

	e.tick()
	require.NoError(t, e.sim.ReopenPR(e.pr))
	e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor)
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeClosed))
}

// TestPoller_MergedByPrloopIsNotClosed: a merge prloop made (PRMerged on
// the stream) is not reported as PRClosed.
func TestPoller_MergedByPrloopIsNotClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	_, err = e.client.Merge(t.Context(), e.pr, githubMerge(info.HeadSHA))
	require.NoError(t, err)
	_, _, err = e.emit.Emit(t.Context(), &events.Merged{Base: events.Base{PR: e.pr, HeadSHA: info.HeadSHA}, MergeSHA: "m"}, "1")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && st.Closed && st.Merged
	}, waitFor, 10*time.Millisecond)
	assert.Zero(t, e.rec.Count(e.pr, events.TypeClosed))
}

// TestPoller_MergedOutsidePrloop: a merge by someone else is PRClosed{merged}.
func TestPoller_MergedOutsidePrloop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	_, err = e.client.Merge(t.Context(), e.pr, githubMerge(info.HeadSHA))
	require.NoError(t, err)
	closed := e.rec.Wait(t, e.pr, events.TypeClosed, waitFor).Data.(*events.Closed)
	assert.True(t, closed.Merged)
}

// TestPoller_ReviewTimeout: ReviewTimeout once, after the timeout, and
// watching goes on (a late approval still comes through).
func TestPoller_ReviewTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config(func(c *poller.Config) { c.ReviewTimeout = time.Hour }))
	e.watchPending()
	e.sim.Advance(59 * time.Minute)
	e.waitProbes(3)
	assert.Zero(t, e.rec.Count(e.pr, events.TypeReviewTimeout), "not yet")
	e.sim.Advance(2 * time.Minute)
	to := e.rec.Wait(t, e.pr, events.TypeReviewTimeout, waitFor).Data.(*events.ReviewTimeout)
	assert.Equal(t, events.ReasonReviewTimeout, to.Reason)

	e.sim.Advance(time.Hour)
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeReviewTimeout))
}

// TestPoller_AutoDiscovery watches every open PR of PRLOOP_REPOS that has
// the watch label.
func TestPoller_AutoDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.sim.PushCommit(e.repo, "other", "agent", map[string]string{"o.go": "package main\n"}, "Other")
	require.NoError(t, err)
	other, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: "Other", Head: "other", Author: "agent"})
	require.NoError(t, err)
	_, err = e.client.AddLabels(t.Context(), other, "prloop")
	require.NoError(t, err)

	e.start(e.config(func(c *poller.Config) { c.Repos = []string{"Acme/Socket.IO"}; c.WatchLabel = "prloop" }))
	e.rec.Wait(t, other, events.TypeReviewPending, waitFor)
	e.waitProbes(3)
	assert.Empty(t, e.rec.For(e.pr), "the unlabelled PR is not watched")
}

// TestPoller_QuorumEndToEnd: two bot reviewers must both respond on the
// head; a finding requests changes, a failing workflow escalates, and a
// missing reviewer is named by ReviewTimeout.
func TestPoller_QuorumEndToEnd(t *testing.T) {
	t.Parallel()
	quorum := func(c *poller.Config) {
		c.ReviewProtocols = []string{"quorum"}
		c.RequiredReviewers = "copilot-pull-request-reviewer,github-actions[bot]/OpenAI Code Review"
		c.ReviewTimeout = time.Hour
	}
	t.Run("findings request changes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.start(e.config(quorum))
		e.watch(e.pr)
		e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
		e.tick()
		_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "copilot-pull-request-reviewer", State: "COMMENTED", Body: "Copilot reviewed 1 file",
			Comments: []ghsim.ReviewCommentInput{{Path: "main.go", Line: 3, Body: "main does nothing"}}})
		require.NoError(t, err)
		e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
		_, err = e.sim.AddIssueComment(e.pr, "github-actions[bot]", "Lint passed") // another workflow: no marker
		require.NoError(t, err)
		_, err = e.sim.AddIssueComment(e.pr, "github-actions[bot]", "## OpenAI Code Review\nNo issues found.")
		require.NoError(t, err)
		fb := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
		assert.Len(t, fb.CommentIDs, 1)
		assert.Equal(t, []string{"copilot-pull-request-reviewer"}, fb.Reviewers)
	})
	t.Run("no findings approve", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.start(e.config(quorum))
		e.watch(e.pr)
		e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
		e.tick()
		_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "copilot-pull-request-reviewer", State: "COMMENTED", Body: "No comments."})
		require.NoError(t, err)
		_, err = e.sim.AddIssueComment(e.pr, "github-actions[bot]", "## OpenAI Code Review\nLooks good.")
		require.NoError(t, err)
		ok := e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor).Data.(*events.ReviewApproved)
		assert.ElementsMatch(t, []string{"copilot-pull-request-reviewer", "github-actions[bot]/OpenAI Code Review"}, ok.Approvers)
	})
	t.Run("failed workflow escalates", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.start(e.config(quorum))
		e.watch(e.pr)
		e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
		e.tick()
		_, err := e.sim.AddIssueComment(e.pr, "github-actions[bot]", "## OpenAI Code Review\nReview failed: API Error (503)")
		require.NoError(t, err)
		esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
		assert.Equal(t, events.ReasonReviewWorkflowFailed, esc.Reason)
		assert.Contains(t, esc.Detail, "github-actions[bot]/OpenAI Code Review")
		assert.Zero(t, e.rec.Count(e.pr, events.TypeReviewApproved))
	})
	t.Run("timeout names the missing reviewer", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.start(e.config(quorum))
		e.watch(e.pr)
		e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
		e.tick()
		_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "copilot-pull-request-reviewer", State: "COMMENTED", Body: "ok"})
		require.NoError(t, err)
		e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
		e.sim.Advance(2 * time.Hour)
		to := e.rec.Wait(t, e.pr, events.TypeReviewTimeout, waitFor).Data.(*events.ReviewTimeout)
		assert.Equal(t, []string{"github-actions[bot]/OpenAI Code Review"}, to.MissingReviewers)
	})
}

// TestPoller_WebhookTriggersEvaluation: with polling too slow to notice, a
// signed webhook makes the poller evaluate the PR at once; a forged one
// changes nothing.
func TestPoller_WebhookTriggersEvaluation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.start(e.config(func(c *poller.Config) { c.PollInterval = time.Hour }))
	e.watch(e.pr)
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor) // the watch request kicks an evaluation
	srv := httptest.NewServer(poller.WebhookHandler([]byte("hook-secret"), s, quiet()))
	t.Cleanup(srv.Close)

	e.tick()
	_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "APPROVED"})
	require.NoError(t, err)
	body := []byte(`{"action":"submitted","pull_request":{"number":` + strconv.Itoa(e.pr.Number) + `},"repository":{"name":"socket.io","owner":{"login":"acme"}}}`)

	forged := postHook(t, srv.URL, "pull_request_review", body, "sha256=00")
	assert.Equal(t, http.StatusUnauthorized, forged)
	assert.Equal(t, http.StatusAccepted, postHook(t, srv.URL, "pull_request_review", body, signHook([]byte("hook-secret"), body)))
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
}

func postHook(t *testing.T, url, event string, body []byte, sig string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func signHook(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestPoller_DiscoveryOfUntouchedPRsCostsOnlyTheProbe: watching begins on
// a PR nobody has touched without reading its details; a later reaction is
// then read and counted.
func TestPoller_DiscoveryOfUntouchedPRsCostsOnlyTheProbe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sim.ResetStats()
	e.start(e.config(func(c *poller.Config) { c.Repos = []string{"acme/socket.io"} }))
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
	st := e.sim.Stats()
	for _, route := range []string{
		"GET /repos/{owner}/{repo}/issues/{number}/reactions", "GET /repos/{owner}/{repo}/issues/{number}/comments",
		"GET /repos/{owner}/{repo}/pulls/{number}/reviews", "GET /repos/{owner}/{repo}/pulls/{number}/comments",
		"GET /repos/{owner}/{repo}/commits/{ref...}", "GET /repos/{owner}/{repo}/pulls/{number}",
	} {
		assert.Zero(t, st.ByRoute[route], route)
	}
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
	st = e.sim.Stats()
	assert.Equal(t, 1, st.ByRoute[reactionsRoute], "a reaction is read once")
	for _, route := range []string{
		"GET /repos/{owner}/{repo}/issues/{number}/comments", "GET /repos/{owner}/{repo}/pulls/{number}/reviews",
		"GET /repos/{owner}/{repo}/pulls/{number}/comments", "GET /repos/{owner}/{repo}/commits/{ref...}",
	} {
		assert.Zero(t, st.ByRoute[route], "a change of reactions alone reads nothing else: %s", route)
	}
}

// TestPoller_RemovingEscalationLabelResumes: after an escalation (label on
// the PR, recorded in state), a human removing the label resets the fix
// cycle and the pending change request reaches the agent again.
func TestPoller_RemovingEscalationLabelResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.askForChanges("please fix")

	// The escalator's part: record the escalation, then label the PR.
	_, err := e.store.Update(t.Context(), e.pr, func(p *state.PR) error {
		p.FixCycle = 2
		p.Escalations = map[events.Reason]time.Time{events.ReasonMaxFixCycles: e.sim.Now()}
		return nil
	})
	require.NoError(t, err)
	_, err = e.client.AddLabels(t.Context(), e.pr, "human-review-required")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && st.EscalationLabelSeen
	}, waitFor, 10*time.Millisecond)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeFeedbackReceived), "nothing republished while escalated")

	e.tick()
	require.NoError(t, e.client.RemoveLabel(t.Context(), e.pr, "human-review-required"))
	fb := e.rec.WaitCount(t, e.pr, events.TypeFeedbackReceived, 2, waitFor).Data.(*events.FeedbackReceived)
	assert.Zero(t, fb.FixCycle, "the fix cycle starts again")
	require.Eventually(t, func() bool { // the record follows the event
		st, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && len(st.Escalations) == 0
	}, waitFor, 10*time.Millisecond, "the escalation is cleared from the poller's record")
}

// TestPoller_LabelRemovedBeforeAnyProbeSawItResumes: the human removes
// the escalation label within a poll interval of its being applied, so no
// probe ever shows it. The escalator's PREscalated says the label went on;
// a read of the PR after it lacks the label, so the loop resumes: a new
// escalation epoch, the escalation cleared, the status published anew.
func TestPoller_LabelRemovedBeforeAnyProbeSawItResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config(func(c *poller.Config) { c.PollInterval = time.Hour })) // no probe after the first
	e.watchPending()
	probes := e.sim.Stats().ByRoute[probeRoute]

	// The escalator's part, with the human removing the label before the
	// escalator finished (its webhook retries) and recorded anything.
	e.tick()
	_, err := e.client.AddLabels(t.Context(), e.pr, "human-review-required")
	require.NoError(t, err)
	e.tick()
	require.NoError(t, e.client.RemoveLabel(t.Context(), e.pr, "human-review-required"))
	_, _, err = e.emit.Emit(t.Context(), &events.Escalated{
		Base: events.Base{PR: e.pr}, Reason: events.ReasonReviewTimeout, Severity: events.SeverityWarning,
		Actions: []string{events.ActionLabel, "comment"},
	}, string(events.ReasonReviewTimeout), events.EpochPart(0))
	require.NoError(t, err)

	e.rec.WaitCount(t, e.pr, events.TypeReviewPending, 2, waitFor)
	st, _, err := e.store.Get(t.Context(), e.pr)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Epoch, "a new escalation epoch")
	assert.False(t, st.EscalationLabelSeen)
	assert.Equal(t, probes, e.sim.Stats().ByRoute[probeRoute], "no probe saw the label come or go")

}

// TestPoller_DryRunMergeChangesNothing: a merger in dry-run mode reports
// what it would merge; the poller does not take the PR for merged.
func TestPoller_DryRunMergeChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config(func(c *poller.Config) { c.PollInterval = time.Hour })) // only events move it
	e.watchPending()
	_, _, err := e.emit.Emit(t.Context(), &events.Merged{Base: events.Base{PR: e.pr}, DryRun: true}, "dry")
	require.NoError(t, err)
	cons := natstest.Consumer(t, e.conn.JS, poller.Name)
	require.Eventually(t, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream >= 3
	}, waitFor, 10*time.Millisecond, "the poller consumed the dry-run PRMerged")
	st, _, err := e.store.Get(t.Context(), e.pr)
	require.NoError(t, err)
	assert.False(t, st.Merged)
	assert.False(t, st.Closed)
}

// TestPoller_StatusEventsCarryTheCleanTitle: the poller's status events
// carry the PR's title as GitHub has it, with control and bidi characters
// made spaces, for the page and `prloop status`; a watched PR's and a
// discovered PR's alike.
func TestPoller_StatusEventsCarryTheCleanTitle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.sim.PushCommit(e.repo, "other", "agent", map[string]string{"o.go": "package main\n"}, "Other")
	require.NoError(t, err)
	other, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: "Fix\n\u202e<b>the</b>\tbug", Head: "other", Author: "agent"})
	require.NoError(t, err)
	_, err = e.client.AddLabels(t.Context(), other, "prloop")
	require.NoError(t, err)

	e.start(e.config(func(c *poller.Config) { c.Repos = []string{"acme/socket.io"}; c.WatchLabel = "prloop" }))
	e.watch(e.pr)
	watched := e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, "Add main", watched.Title)
	discovered := e.rec.Wait(t, other, events.TypeReviewPending, waitFor).Data.(*events.ReviewPending)
	assert.Equal(t, "Fix <b>the</b> bug", discovered.Title)
}

// TestPoller_ASignalInTheSameSecondAsTheLastIsSeen: GitHub's updated_at
// has whole seconds, so a review that lands in the same second as the
// activity before it, after the poller read the PR's lists, leaves the
// probe's summary of the PR as it was. The poller reads the lists once
// more when the summary can be trusted again, and not on every probe
// before that.
func TestPoller_ASignalInTheSameSecondAsTheLastIsSeen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config(func(c *poller.Config) { c.ReviewProtocols = []string{"reviews"} }))
	e.watchPending()
	e.tick()
	// Activity that changes nothing (a reader cannot review), read by the
	// poller before the approval below: the clock stays in this second.
	_, err := e.sim.AddIssueComment(e.pr, "reader", "any news?")
	require.NoError(t, err)
	e.waitRequests(reviewsRoute, 1)
	e.waitProbes(2) // the evaluation that read the comment has ended
	_, err = e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "APPROVED"})
	require.NoError(t, err)

	reads := e.sim.Stats().ByRoute[reviewsRoute]
	e.waitProbes(3)
	assert.Equal(t, reads, e.sim.Stats().ByRoute[reviewsRoute], "the reviews are read again only once the summary settled")
	e.sim.Advance(poller.ListSettle)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
}
