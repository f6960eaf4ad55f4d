package feedback

import (
	"fmt"

	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
)

// newPolicies is the feedback service's reader of each base's
// .github/prloop.yml (pkg/policy, the one owner of policy facts): the
// fix limit, and whose review comments the agent is given.
func newPolicies(cfg Config, g GitHub, auth *review.Authorization) *policy.Reader {
	op := policy.FromReview(cfg.PolicyConfig)
	op.MaxFixCycles, op.EscalationLabel = cfg.MaxFixCycles, cfg.EscalationLabel
	op.AgentTimeout, op.AgentBudget, op.AgentMayEditWorkflows = cfg.AgentTimeout, cfg.AgentBudget, cfg.AgentMayEditWorkflows
	op.Ceilings = policy.Ceilings{AgentTimeout: cfg.AgentTimeout, AgentBudget: cfg.AgentBudget, AgentMayEditWorkflows: cfg.AgentMayEditWorkflows}
	return policy.NewReader(op, cfg.Settings, g, auth)
}

// limits are the policy's settings from the configuration.
func (c Config) limits() limits {
	lim := limits{
		MaxFixCycles: c.MaxFixCycles, Label: c.EscalationLabel,
		AgentAttempts: c.AgentAttempts, AgentBudget: c.AgentBudget, AgentBackoff: c.AgentBackoff,
		AgentTimeout:  c.AgentTimeout,
		BudgetSetting: fmt.Sprintf("PRLOOP_AGENT_BUDGET=%s", c.AgentBudget),
		Rerun:         c.RerunFailedChecks, MaxCIFixCycles: c.MaxCIFixCycles,
	}
	if !c.AgentMayEditWorkflows {
		lim.ForbidWorkflows = "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS=false"
	}
	return lim
}

// limitsUnder are the service's limits under e: its fix cycles, and the
// agent's timeout, budget and workflow rule (the file's, cut to the
// operator's ceilings by policy.Resolve).
func (c Config) limitsUnder(e policy.Effective) limits {
	lim := c.limits()
	lim.MaxFixCycles = e.MaxFixCycles.V
	lim.AgentTimeout, lim.AgentBudget = e.AgentTimeout.V, e.AgentBudget.V
	lim.BudgetSetting = e.AgentBudget.Named("agent.budget", "PRLOOP_AGENT_BUDGET")
	lim.ForbidWorkflows = ""
	if !e.AgentMayEditWorkflows.V {
		lim.ForbidWorkflows = e.AgentMayEditWorkflows.Named("agent.may_edit_workflows", "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS")
	}
	return lim
}
