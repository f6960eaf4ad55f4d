package feedback_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_RepositoryPolicy_AgentLimits: the agent section of the
// base's .github/prloop.yml bounds the agent on that repository (a
// shorter run, a smaller budget, no workflow edits), and a file that asks
// for more than the operator's PRLOOP_AGENT_* ceilings gets the ceiling.
func TestFeedback_RepositoryPolicy_AgentLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		file  string
		agent string
		// op sets the operator's settings.
		op     func(*feedback.Config)
		reason events.Reason
		// lastError and detail are in the escalation.
		lastError, detail string
	}{
		{
			name: "the file forbids workflow edits the operator allows", agent: "workflow.sh",
			file:   "version: 1\nagent:\n  may_edit_workflows: false\n",
			op:     func(c *feedback.Config) { c.AgentMayEditWorkflows = true },
			reason: events.ReasonFeedbackFailed, lastError: ".github/workflows/evil.yml (agent.may_edit_workflows: false in .github/prloop.yml)",
		},
		{
			name: "the file cannot allow workflow edits the operator forbids", agent: "workflow.sh",
			file:   "version: 1\nagent:\n  may_edit_workflows: true\n",
			op:     func(c *feedback.Config) { c.AgentMayEditWorkflows = false },
			reason: events.ReasonFeedbackFailed, lastError: ".github/workflows/evil.yml (PRLOOP_AGENT_MAY_EDIT_WORKFLOWS=false)",
		},
		{
			name: "the file's shorter agent timeout", agent: "hang.sh",
			file:   "version: 1\nagent:\n  timeout: 1s\n",
			op:     func(c *feedback.Config) { c.AgentTimeout, c.AgentAttempts = time.Minute, 1 },
			reason: events.ReasonFeedbackFailed, lastError: "timed out after 1s",
		},
		{
			name: "the file's longer agent timeout is capped", agent: "hang.sh",
			file:   "version: 1\nagent:\n  timeout: 1h\n",
			op:     func(c *feedback.Config) { c.AgentTimeout, c.AgentAttempts = time.Second, 1 },
			reason: events.ReasonFeedbackFailed, lastError: "timed out after 1s",
		},
		{
			name: "the file's smaller agent budget", agent: "hang.sh",
			file:   "version: 1\nagent:\n  budget: 700ms\n",
			op:     func(c *feedback.Config) { c.AgentTimeout, c.AgentBudget = time.Minute, time.Hour },
			reason: events.ReasonAgentBudgetExhausted, lastError: "timed out after 700ms",
			detail: "(agent.budget: 700ms in .github/prloop.yml)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			_, err := e.sim.PushCommit(e.repo, "main", "admin", map[string]string{policy.Path: tt.file}, "Add the prloop policy")
			require.NoError(t, err)
			e.comment(e.pr, "please fix")
			e.start("a", e.config(tt.agent, tt.op, func(c *feedback.Config) {
				c.Settings = policy.Settings{RepoPolicy: true, MaxFixCyclesCeiling: 5}
			}))
			e.request(e.pr, e.head, 0)

			esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
			assert.Equal(t, tt.reason, esc.Reason)
			assert.Contains(t, esc.LastError, tt.lastError)
			assert.Contains(t, esc.Detail, tt.detail)
			assert.Empty(t, e.bareLog("feature/x", e.head), "nothing pushed")
		})
	}
}
