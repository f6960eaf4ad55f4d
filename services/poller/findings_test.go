package poller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_QuorumFindingClassifier: with three quorum bots, the status
// line says who is still missing while the quorum is incomplete; a bot
// that only nit-picks (even with a suggestion) does not stop the approval,
// and its nits are listed; a bug with a suggestion requests changes.
func TestPoller_QuorumFindingClassifier(t *testing.T) {
	t.Parallel()
	const openAI = "github-actions[bot]/OpenAI Code Review"
	quorum := func(c *poller.Config) {
		c.ReviewProtocols = []string{"quorum"}
		c.RequiredReviewers = "coderabbitai[bot],copilot-pull-request-reviewer," + openAI
		c.FindingIgnore = review.DefaultFindingIgnore
	}
	const suggestion = "\n\n```suggestion\nfunc main() { run() }\n```\n"
	tests := []struct {
		name string
		// rabbit is what coderabbitai[bot] says on main.go:3.
		rabbit string
		// want is the status the full quorum reaches.
		want        events.Type
		wantIgnored int
	}{
		{
			name:   "a quorum where one bot only nit-picks approves",
			rabbit: "_🧹 Nitpick (assertive)_\n\nPrefer a one-line main." + suggestion,
			want:   events.TypeReviewApproved, wantIgnored: 1,
		},
		{
			name:   "a bug with a suggestion requests changes",
			rabbit: "_⚠️ Potential issue_\n\n**Bug:** main never calls run, so nothing happens." + suggestion,
			want:   events.TypeFeedbackReceived,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(e.config(quorum))
			e.watch(e.pr)
			pending := e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor).Data.(*events.ReviewPending)
			assert.Equal(t, []string{"coderabbitai[bot]", "copilot-pull-request-reviewer", openAI}, pending.MissingReviewers)
			e.tick()

			_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "coderabbitai[bot]", State: "COMMENTED", Body: "**Actionable comments posted: 1**",
				Comments: []ghsim.ReviewCommentInput{{Path: "main.go", Line: 3, Body: tt.rabbit}}})
			require.NoError(t, err)
			first := e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor).Data.(*events.ReviewInProgress)
			assert.Equal(t, []string{"copilot-pull-request-reviewer", openAI}, first.MissingReviewers)

			e.tick()
			_, err = e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "copilot-pull-request-reviewer", State: "COMMENTED", Body: "Copilot reviewed 1 file and generated no comments."})
			require.NoError(t, err)
			second := e.rec.WaitCount(t, e.pr, events.TypeReviewInProgress, 2, waitFor).Data.(*events.ReviewInProgress)
			assert.Equal(t, []string{"coderabbitai[bot]", "copilot-pull-request-reviewer"}, second.QuorumResponded)
			assert.Equal(t, []string{openAI}, second.MissingReviewers)
			assert.Equal(t, "2 of 3 bot reviews: waiting for "+openAI, e.line().Text, "the status line names who is still missing")

			e.tick()
			_, err = e.sim.AddIssueComment(e.pr, "github-actions[bot]", "## OpenAI Code Review\nNo issues found.")
			require.NoError(t, err)
			got := e.rec.Wait(t, e.pr, tt.want, waitFor)
			e.waitProbes(2)
			switch d := got.Data.(type) {
			case *events.ReviewApproved:
				assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackReceived))
				require.Len(t, d.IgnoredFindings, tt.wantIgnored)
				assert.Equal(t, "coderabbitai[bot]", d.IgnoredFindings[0].Author)
				assert.Equal(t, "main.go:3", d.IgnoredFindings[0].Location)
				assert.Contains(t, d.IgnoredFindings[0].Reason, "PRLOOP_FINDING_IGNORE")
				assert.Equal(t, "approved by coderabbitai[bot], copilot-pull-request-reviewer, "+openAI+"; 1 bot finding set aside", e.line().Text)
			case *events.FeedbackReceived:
				assert.Zero(t, e.rec.Count(e.pr, events.TypeReviewApproved))
				assert.Len(t, d.CommentIDs, 1)
				assert.Equal(t, []string{"coderabbitai[bot]"}, d.Reviewers)
				assert.Empty(t, d.IgnoredFindings)
			}
		})
	}
}

// line folds the PR's recorded events into a status board, as the
// status writers do, and returns the PR's line.
func (e *env) line() prstatus.Line {
	b := prstatus.NewBoard()
	for _, r := range e.rec.For(e.pr) {
		b.Apply(r.Data, time.Time{})
	}
	return b.Line(e.pr, prstatus.Options{})
}
