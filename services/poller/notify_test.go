package poller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/review"
)

// TestPoller_PrloopsNotesNeverAskForChanges: the note prloop posts when a
// fix is ready, and its replies in review threads, carry prloop's marker
// and never yield PRFeedbackReceived: not under prloop's own login, not
// under another prloop's login that counts as a reviewer here (bob, a
// maintainer), and a bot outside the quorum answering them changes
// nothing. An authorized reviewer's 👍 afterwards still approves.
func TestPoller_PrloopsNotesNeverAskForChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, poster string
	}{
		{name: "posted by prloop itself", poster: "prloop-bot"},
		{name: "posted by another prloop under a reviewer's login", poster: "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(e.config())
			e.watch(e.pr)
			e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
			e.tick()

			note := review.OwnMarker + "notify head=0123456789abcdef0123456789abcdef01234567 -->\n" +
				"**prloop pushed a fix** for the review feedback: 0123456 (fix cycle 1).\n\n@alice your comments were addressed; please have another look.\n"
			_, err := e.sim.AddIssueComment(e.pr, tt.poster, note)
			require.NoError(t, err)
			thread, err := e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "coderabbitai[bot]", Path: "main.go", Line: 3, Body: "consider logging"})
			require.NoError(t, err)
			_, err = e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: tt.poster, InReplyTo: thread,
				Body: review.OwnMarker + "notify-reply head=0123456789abcdef0123456789abcdef01234567 -->\naddressed in 0123456"})
			require.NoError(t, err)
			_, err = e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "coderabbitai[bot]", InReplyTo: thread, Body: "Thanks! Also rename x."})
			require.NoError(t, err)
			_, err = e.sim.AddIssueComment(e.pr, "coderabbitai[bot]", "@prloop-bot the fix looks incomplete, please fix y")
			require.NoError(t, err)

			e.signalsChangeNothing()
			assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackReceived), "%v", e.rec.Types(e.pr))
		})
	}
}
