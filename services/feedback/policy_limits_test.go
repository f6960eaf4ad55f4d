package feedback

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/policy"
)

// TestLimitsUnder_AgentSection: the agent section of the base's
// .github/prloop.yml sets the attempt's agent timeout, budget and
// workflow rule, cut to the operator's PRLOOP_AGENT_* ceilings; the
// messages name the setting a person would change.
func TestLimitsUnder_AgentSection(t *testing.T) {
	t.Parallel()
	op := Config{AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour, AgentMayEditWorkflows: true, MaxFixCycles: 2, AgentAttempts: 3}
	s := &Service{cfg: op}
	operator := policy.Operator{
		MaxFixCycles: 2, AgentTimeout: op.AgentTimeout, AgentBudget: op.AgentBudget, AgentMayEditWorkflows: op.AgentMayEditWorkflows,
		Ceilings: policy.Ceilings{MaxFixCycles: 5, AgentTimeout: op.AgentTimeout, AgentBudget: op.AgentBudget, AgentMayEditWorkflows: op.AgentMayEditWorkflows},
	}
	tests := []struct {
		name string
		file string // "" for no file
		// noWorkflows is the operator forbidding workflow edits.
		noWorkflows bool
		want        limits
	}{
		{name: "no file: the operator's", want: limits{
			AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour, BudgetSetting: "PRLOOP_AGENT_BUDGET=1h0m0s",
		}},
		{name: "a file that tightens every limit", file: "version: 1\nagent: {timeout: 2m, budget: 15m, may_edit_workflows: false}\n", want: limits{
			AgentTimeout: 2 * time.Minute, AgentBudget: 15 * time.Minute, BudgetSetting: "agent.budget: 15m0s in .github/prloop.yml",
			ForbidWorkflows: "agent.may_edit_workflows: false in .github/prloop.yml",
		}},
		{name: "a branch override", file: "version: 1\nbranches:\n  \"main\": {agent: {may_edit_workflows: false}}\n", want: limits{
			AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour, BudgetSetting: "PRLOOP_AGENT_BUDGET=1h0m0s",
			ForbidWorkflows: `branches."main".agent.may_edit_workflows: false in .github/prloop.yml`,
		}},
		{name: "a file asking more than the ceilings is capped", file: "version: 1\nagent: {timeout: 2h, budget: 9h, may_edit_workflows: true}\n", noWorkflows: true, want: limits{
			AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour, BudgetSetting: "PRLOOP_AGENT_BUDGET=1h0m0s",
			ForbidWorkflows: "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS=false",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, svc := operator, *s
			if tt.noWorkflows {
				o.AgentMayEditWorkflows, o.Ceilings.AgentMayEditWorkflows = false, false
				svc.cfg.AgentMayEditWorkflows = false
			}
			var f *policy.File
			if tt.file != "" {
				var err error
				f, err = policy.Decode(policy.Path, []byte(tt.file))
				require.NoError(t, err)
			}
			got := svc.cfg.limitsUnder(policy.Resolve(o, f, "main"))
			assert.Equal(t, tt.want.AgentTimeout, got.AgentTimeout, "timeout")
			assert.Equal(t, tt.want.AgentBudget, got.AgentBudget, "budget")
			assert.Equal(t, tt.want.BudgetSetting, got.BudgetSetting)
			assert.Equal(t, tt.want.ForbidWorkflows, got.ForbidWorkflows)
			assert.Equal(t, 2, got.MaxFixCycles)
		})
	}
}
