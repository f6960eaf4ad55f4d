package events

import (
	"fmt"
	"strings"
)

// AgentRunSummary is what a coding agent preset's stream said of the run
// that ended a change request (PRFeedbackAddressed) or of the last run
// before an escalation (PREscalationRequested): an optional part of both,
// absent for PRLOOP_AGENT=command, whose output prloop does not read.
type AgentRunSummary struct {
	// Preset is the agent preset: claude-code or codex.
	Preset string `json:"preset"`
	// Turns is the run's model turns; CostUSD its cost, reported by the
	// CLI or, when CostEstimated, priced by prloop from its tokens.
	Turns         int     `json:"turns"`
	CostUSD       float64 `json:"cost_usd"`
	CostEstimated bool    `json:"cost_estimated,omitempty"`
	// PRCostUSD is what all the agent's runs on the PR cost so far.
	PRCostUSD    float64 `json:"pr_cost_usd,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	// Tools are the tools used, as name×count; Denials the tools whose use
	// was denied.
	Tools   []string `json:"tools,omitempty"`
	Denials []string `json:"denials,omitempty"`
	// Final is the agent's last message, sanitised and truncated.
	Final string `json:"final,omitempty"`
	// Budget names the budget that stopped the run (turns, pr_cost,
	// daily_cost), if one did.
	Budget string `json:"budget,omitempty"`
	// Transcript is the file name of the run's transcript on prloop's
	// server (never its path).
	Transcript string `json:"transcript,omitempty"`
}

// Text says the summary in one line for people (explain, the escalation
// comment): preset, turns, cost, tools, denials and the budget that
// stopped the run; the final message is left to the caller, which knows
// how much room it has.
func (s *AgentRunSummary) Text() string {
	if s == nil {
		return ""
	}
	cost := fmt.Sprintf("$%.4f", s.CostUSD)
	if s.CostEstimated {
		cost += " (estimated from tokens)"
	}
	text := fmt.Sprintf("%s: %d turn(s), %s, $%.4f on this PR so far", s.Preset, s.Turns, cost, s.PRCostUSD)
	if len(s.Tools) > 0 {
		text += "; tools " + strings.Join(s.Tools, " ")
	}
	if len(s.Denials) > 0 {
		text += "; denied " + strings.Join(s.Denials, " ")
	}
	if s.Budget != "" {
		text += "; stopped by prloop's " + s.Budget + " budget"
	}
	return CleanTitle(text)
}
