package feedback_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

// TestFeedback_EscalatesAgainWhenTheChangeRequestComesAgain: a human
// removed the escalation label, and the poller published the same change
// request (same head, fix cycle 2) anew, with an id of its own. Still past
// the limit, it is escalated again, and that request is not dropped as a
// duplicate of the first.
func TestFeedback_EscalatesAgainWhenTheChangeRequestComesAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "still wrong")
	e.start("a", e.config("commit_push.sh"))
	e.request(e.pr, e.head, 2, "h", "1")
	e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor)
	e.consumerSettled()

	e.request(e.pr, e.head, 2, "h", "7") // published anew after the resume
	esc := e.rec.WaitCount(t, e.pr, events.TypeEscalationRequested, 2, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonMaxFixCycles, esc.Reason)
	assert.Equal(t, e.head, esc.HeadSHA)
	e.consumerSettled()
	assert.Equal(t, 2, e.rec.Count(e.pr, events.TypeEscalationRequested))
}
