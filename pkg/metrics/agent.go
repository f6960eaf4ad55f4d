package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a preset's agent run, as prloop_agent_runs_total labels them.
const (
	AgentRunOK     = "ok"     // the run ended on its own
	AgentRunFailed = "failed" // it failed, timed out or could not be run
	AgentRunBudget = "budget" // prloop stopped it over a budget
)

// Agent is what the coding agent presets' streams report, across runs:
// cost, turns and runs by outcome (docs/agents.md).
type Agent struct {
	cost  *prometheus.CounterVec
	turns *prometheus.HistogramVec
	runs  *prometheus.CounterVec
}

// NewAgent creates (or finds) the agent metrics on reg.
func NewAgent(reg prometheus.Registerer) *Agent {
	return &Agent{
		cost: counterVec(reg, "agent_cost_usd_total",
			"What the coding agent's runs cost in USD, as its stream reported it or priced from its tokens (PRLOOP_AGENT_PRICES), by preset.", "preset"),
		turns: histogramVec(reg, "agent_turns",
			"Model turns per coding agent run, by preset.", []float64{1, 2, 5, 10, 20, 50, 100, 200}, "preset"),
		runs: counterVec(reg, "agent_runs_total",
			"Coding agent runs of a preset, by outcome: ok, failed, budget (stopped by prloop over a budget).", "preset", "outcome"),
	}
}

// Run counts one preset run: its outcome, turns and cost.
func (a *Agent) Run(preset, outcome string, turns int, costUSD float64) {
	a.runs.WithLabelValues(preset, outcome).Inc()
	a.turns.WithLabelValues(preset).Observe(float64(turns))
	a.cost.WithLabelValues(preset).Add(max(0, costUSD))
}
