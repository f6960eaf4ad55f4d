package events

import (
	"fmt"
	"time"
)

// States of a PRAgentWaiting: the wait begins, or it is over and the run
// starts.
const (
	AgentWaitStarted = "waiting"
	AgentWaitEnded   = "resumed"
)

// Reasons of a PRAgentWaiting.
const (
	// AgentWaitDailyBudget is the day's agent budget spent.
	AgentWaitDailyBudget = "daily_budget"
)

// AgentWaiting says the agent's next run on HeadSHA waits (State
// AgentWaitStarted) until ResumeAt, or that the wait is over and the run
// starts (AgentWaitEnded). Its id is ID(pr, PRAgentWaiting, EventSHA(head),
// fix cycle, state, ResumeAt's date, the change request's id): one of each
// per PR per wait, however often the feedback service restarts in between.
// It is for the views (the status line, explain, the page): no service
// acts on it.
type AgentWaiting struct {
	Base
	State  string `json:"state"`
	Reason string `json:"reason"`
	// SpentUSD and BudgetUSD are the agents' spend today (UTC) on all PRs
	// and PRLOOP_AGENT_DAILY_COST_USD, when the wait began.
	SpentUSD  float64   `json:"spent_usd,omitempty"`
	BudgetUSD float64   `json:"budget_usd,omitempty"`
	ResumeAt  time.Time `json:"resume_at,omitzero"`
	FixCycle  int       `json:"fix_cycle"`
}

// Text says the wait in one line for people: "waiting: the agents' daily
// budget ($12.40 of $10.00) is spent; resumes at 00:00 UTC".
func (w *AgentWaiting) Text() string {
	if w.State == AgentWaitEnded {
		return "the wait is over: the agent's run starts"
	}
	return fmt.Sprintf("waiting: the agents' daily budget ($%.2f of $%.2f) is spent; resumes at %s UTC",
		w.SpentUSD, w.BudgetUSD, w.ResumeAt.UTC().Format("15:04"))
}
