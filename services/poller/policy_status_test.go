package poller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
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
			e := newPolicyEnv(t, tt.file)
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

// TestPoller_RepositoryPolicy_FixChecks: feedback.fix_checks of the base's
// .github/prloop.yml decides which failing checks go back to the agent on
// that repository, over PRLOOP_FIX_CHECKS (required here).
func TestPoller_RepositoryPolicy_FixChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want []string // the checks handed to the agent; nil: none
	}{
		{name: "no file: the required check", want: []string{"test"}},
		{name: "the file turns it off", file: "version: 1\nfeedback:\n  fix_checks: none\n"},
		{name: "the file asks for every check", file: "version: 1\nfeedback:\n  fix_checks: all\n", want: []string{"lint", "test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newPolicyEnv(t, tt.file)
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			require.NoError(t, e.sim.SetRuleset(e.repo, "main", ghsim.RequiredChecks{Contexts: []string{"test"}}))
			_, _, err = e.sim.RunWorkflow(e.repo, info.HeadSHA, "CI",
				ghsim.JobInput{Name: "test", Conclusion: "failure"}, ghsim.JobInput{Name: "lint", Conclusion: "failure"})
			require.NoError(t, err)
			e.start(e.config(func(c *poller.Config) {
				c.FixChecks, c.Settings = poller.FixRequired, policy.Settings{RepoPolicy: true, MaxFixCyclesCeiling: 5}
			}))
			e.watch(e.pr)
			if tt.want == nil {
				e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
				e.waitProbes(5)
				assert.Zero(t, e.rec.Count(e.pr, events.TypeChecksFailed), "no failing check goes to the agent")
				return
			}
			cf := e.rec.Wait(t, e.pr, events.TypeChecksFailed, waitFor).Data.(*events.ChecksFailed)
			assert.ElementsMatch(t, tt.want, events.CheckNames(cf.Checks))
		})
	}
}

// newPolicyEnv is a test world whose base branch carries the policy file
// file (none when "").
func newPolicyEnv(t *testing.T, file string) *env {
	t.Helper()
	e := newEnv(t)
	if file != "" {
		_, err := e.sim.PushCommit(e.repo, "main", "alice", map[string]string{policy.Path: file}, "Add the prloop policy")
		require.NoError(t, err)
	}
	return e
}
