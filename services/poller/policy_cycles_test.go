package poller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_ReviewStatusCarriesThePolicysFixLimit: the review statuses
// carry the PR's max_fix_cycles when its base's .github/prloop.yml sets it
// (cut to PRLOOP_MAX_FIX_CYCLES_CEILING), so that the status line's "cycle
// 1 of M" is the PR's limit, not the operator's; without a file they carry
// none, and the line keeps PRLOOP_MAX_FIX_CYCLES. A file that asks for
// another merge queue than the operator's gets a warning on the line.
func TestPoller_ReviewStatusCarriesThePolicysFixLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string // "" for no file
		want *int
		// warning is the status line's policy warning.
		warning string
	}{
		{name: "no file"},
		{name: "the file's limit", file: "version: 1\nfeedback:\n  max_fix_cycles: 4\n", want: ptr(4)},
		{name: "a limit above the ceiling", file: "version: 1\nfeedback:\n  max_fix_cycles: 9\n", want: ptr(5), warning: "ceiling: feedback.max_fix_cycles=5"},
		{name: "the merge queue is the operator's", file: "version: 1\nmerge:\n  queue: {mode: speculative}\n", warning: "ceiling: merge.queue.mode=serial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tt.file != "" {
				_, err := e.sim.PushCommit(e.repo, "main", "alice", map[string]string{policy.Path: tt.file}, "Add the prloop policy")
				require.NoError(t, err)
			}
			e.start(e.config(func(c *poller.Config) {
				c.MaxFixCycles, c.Settings = 2, policy.Settings{RepoPolicy: true, MaxFixCyclesCeiling: 5}
				c.QueueMode, c.QueueDepth = "serial", 4
			}))
			e.watch(e.pr)
			pending := e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor).Data.(*events.ReviewPending)
			assert.Equal(t, tt.want, pending.MaxFixCycles)
			assert.Equal(t, tt.warning, pending.PolicyWarning)

			e.tick()
			_, err := e.sim.AddIssueComment(e.pr, "alice", "Please handle the error case.")
			require.NoError(t, err)
			fb := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
			assert.Equal(t, tt.want, fb.MaxFixCycles, "the change request the status line says 'cycle 1 of M' for")
		})
	}
}

func ptr[T any](v T) *T { return &v }
