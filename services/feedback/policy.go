package feedback

import (
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

// limitsUnder are the service's limits under e: its fix cycles, and the
// agent's timeout, budget and workflow rule (the file's, cut to the
// operator's ceilings by policy.Resolve).
func (s *Service) limitsUnder(e policy.Effective) limits {
	lim := s.limits()
	lim.MaxFixCycles = e.MaxFixCycles.V
	lim.AgentTimeout, lim.AgentBudget = e.AgentTimeout.V, e.AgentBudget.V
	lim.BudgetSetting = e.AgentBudget.Named("agent.budget", "PRLOOP_AGENT_BUDGET")
	lim.ForbidWorkflows = ""
	if !e.AgentMayEditWorkflows.V {
		lim.ForbidWorkflows = e.AgentMayEditWorkflows.Named("agent.may_edit_workflows", "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS")
	}
	return lim
}
