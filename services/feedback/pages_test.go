package feedback_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/review"
)

// TestFeedback_PromptQuotesACommentOnANewPage: with the simulator at 3
// items a page, the PR's 3 comments were read (as the poller's gathering
// does, through the same client and cache), then a 4th lands on page 2.
// Page 1 revalidates as a 304; the 4th must still reach the agent's prompt.
func TestFeedback_PromptQuotesACommentOnANewPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simtest.TinyPages)
	for i := range 3 {
		e.sim.Advance(time.Second)
		_, err := e.sim.AddIssueComment(e.pr, "alice", "PAGE-ONE-COMMENT "+strconv.Itoa(i))
		require.NoError(t, err)
	}
	sig, err := review.Gather(t.Context(), e.client, e.pr, e.anchor)
	require.NoError(t, err)
	require.Len(t, sig.Comments, 3, "one full page")

	e.sim.Advance(time.Second)
	_, err = e.sim.AddIssueComment(e.pr, "bob", "PAGE-TWO-COMMENT rename main")
	require.NoError(t, err)

	// The feedback service gathers through the same client: page 1 is a 304.
	e.start("a", e.config("edit_only.sh"))
	e.request(e.pr, e.head, 0)
	e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor)
	prompt := e.agentFile("stdin", e.waitRuns(1)[0])
	for _, want := range []string{"PAGE-ONE-COMMENT 0", "PAGE-ONE-COMMENT 2", "PAGE-TWO-COMMENT rename main"} {
		assert.Contains(t, prompt, want)
	}
}
