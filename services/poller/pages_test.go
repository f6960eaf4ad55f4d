package poller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
)

// newSignalWithin bounds how long a signal may take to reach the poller:
// a few 50 ms poll intervals plus processing, with room for a loaded
// machine, far below what a missed signal would need (forever).
const newSignalWithin = 5 * time.Second

// TestPoller_SignalOnANewPageIsSeen: with the simulator at 3 items a page,
// a watched PR has 3 signals of a kind that change nothing (unauthorized
// users'), the poller reads them (one full page), then an authorized
// reviewer's 4th lands on page 2. Page 1 revalidates as a 304; the 4th
// must still reach the poller.
func TestPoller_SignalOnANewPageIsSeen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// ignored adds the i-th of three signals nobody authorized.
		ignored func(e *env, i int) error
		// fourth adds the authorized signal and returns its id.
		fourth func(e *env) (int64, error)
		// want is the event the fourth causes; seen finds it there.
		want events.Type
		seen func(t *testing.T, ev events.Data, id int64)
	}{
		{name: "reaction",
			ignored: func(e *env, i int) error {
				_, err := e.sim.AddReaction(e.pr, []string{"reader", "agent", "reader"}[i], []string{"+1", "+1", "heart"}[i])
				return err
			},
			fourth: func(e *env) (int64, error) { return e.sim.AddReaction(e.pr, "alice", "+1") },
			want:   events.TypeReviewApproved,
			seen: func(t *testing.T, ev events.Data, _ int64) {
				assert.Equal(t, []string{"alice"}, ev.(*events.ReviewApproved).Approvers)
			}},
		{name: "issue comment",
			ignored: func(e *env, i int) error {
				_, err := e.sim.AddIssueComment(e.pr, "reader", "LGTM, merge it!")
				return err
			},
			fourth: func(e *env) (int64, error) {
				return e.sim.AddIssueComment(e.pr, "alice", "Please handle the error case.")
			},
			want: events.TypeFeedbackReceived,
			seen: func(t *testing.T, ev events.Data, id int64) {
				assert.Contains(t, ev.(*events.FeedbackReceived).CommentIDs, id)
			}},
		{name: "review",
			ignored: func(e *env, i int) error {
				_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "reader", State: "CHANGES_REQUESTED", Body: "no"})
				return err
			},
			fourth: func(e *env) (int64, error) {
				return e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "CHANGES_REQUESTED", Body: "Needs tests."})
			},
			want: events.TypeFeedbackReceived,
			seen: func(t *testing.T, ev events.Data, id int64) {
				assert.Contains(t, ev.(*events.FeedbackReceived).ReviewIDs, id)
			}},
		{name: "inline comment",
			ignored: func(e *env, i int) error {
				_, err := e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "reader", Path: "main.go", Line: 3, Body: "nit"})
				return err
			},
			fourth: func(e *env) (int64, error) {
				return e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "bob", Path: "main.go", Line: 3, Body: "main is empty"})
			},
			want: events.TypeFeedbackReceived,
			seen: func(t *testing.T, ev events.Data, id int64) {
				assert.Contains(t, ev.(*events.FeedbackReceived).CommentIDs, id)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, simtest.TinyPages)
			e.start(e.config())
			e.watch(e.pr)
			e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
			for i := range 3 {
				e.tick()
				require.NoError(t, tt.ignored(e, i))
			}
			e.waitProbes(3) // the poller has read the full page of three
			require.Equal(t, []events.Type{events.TypeWatchRequested, events.TypeReviewPending}, e.rec.Types(e.pr))

			e.tick()
			id, err := tt.fourth(e)
			require.NoError(t, err)
			ev := e.rec.Wait(t, e.pr, tt.want, newSignalWithin)
			tt.seen(t, ev.Data, id)
		})
	}
}
