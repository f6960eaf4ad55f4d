package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// TestDescribe: what `prloop events` and explain's history say of an event.
func TestDescribe(t *testing.T) {
	t.Parallel()
	b := events.Base{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}, HeadSHA: "0123456789abcdef0123456789abcdef01234567"}
	nit := []events.IgnoredFinding{{Author: "coderabbitai[bot]", Location: "main.go:3", Reason: "matches PRLOOP_FINDING_IGNORE pattern nit"}}
	tests := []struct {
		name string
		d    events.Data
		want string
	}{
		{name: "pending quorum", d: &events.ReviewPending{Base: b, MissingReviewers: []string{"copilot", "gemini"}},
			want: "waiting for review on 0123456; 0 of 2 bot reviews: waiting for copilot, gemini"},
		{name: "quorum in progress", d: &events.ReviewInProgress{Base: b, Actor: "copilot", QuorumResponded: []string{"copilot"}, MissingReviewers: []string{"gemini"}, IgnoredFindings: nit},
			want: "1 of 2 bot reviews: waiting for gemini (on 0123456); 1 bot finding set aside"},
		{name: "eyes", d: &events.ReviewInProgress{Base: b, Actor: "alice"}, want: "👀 alice is reviewing 0123456"},
		{name: "approved with a nit", d: &events.ReviewApproved{Base: b, Approvers: []string{"copilot"}, IgnoredFindings: nit},
			want: "👍 approved 0123456 by copilot; 1 bot finding set aside"},
		{name: "serial queue, as before", d: &events.MergeQueued{Base: b, Position: 1, BaseBranch: "main"},
			want: "queued for merge into main at position 1"},
		{name: "speculative queue names the batch", d: &events.MergeQueued{Base: b, Position: 3, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41, 42}},
			want: "queued for merge into main at position 3, tested together with #41, #42 (speculative)"},
		{name: "checks waited for", d: &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
			want: "waiting for checks: ci/build, lint"},
		{name: "no check left", d: &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{}},
			want: "no check left to wait for"},
		{name: "candidate built", d: specCandidate(events.CandidateBuilt, ""),
			want: "candidate 2 built: c0ffee1 on prloop/queue/main/2, from main at ba5e123 with #41 ahead"},
		{name: "candidate invalidated, its detail cleaned for a terminal", d: specCandidate(events.CandidateInvalidated, "main moved\n\x1b[2J"),
			want: "candidate 2 invalidated: c0ffee1 (main moved [2J)"},
		{name: "a fix with the agent's run", d: &events.FeedbackAddressed{Base: b, PreviousHeadSHA: "abcdef0123456789", FixCycle: 1, Agent: &events.AgentRunSummary{
			Preset: "codex", Turns: 3, CostUSD: 0.008, CostEstimated: true, PRCostUSD: 0.008, Tools: []string{"command_execution×2"}, Final: "Fixed\nmain.go.\x1b[2J",
		}}, want: "fix pushed: abcdef0 → 0123456 (fix cycle 1); agent codex: 3 turn(s), $0.0080 (estimated from tokens), $0.0080 on this PR so far; " +
			"tools command_execution×2; it said: Fixed main.go. [2J"},
		{name: "an escalation over a budget", d: &events.EscalationRequested{Base: b, Reason: events.ReasonAgentBudgetExhausted, Severity: events.SeverityBlocking,
			Agent: &events.AgentRunSummary{Preset: "claude-code", Turns: 4, CostUSD: 0.1, PRCostUSD: 0.3, Budget: "turns"}},
			want: "escalation requested: agent_budget_exhausted (blocking); agent claude-code: 4 turn(s), $0.1000, $0.3000 on this PR so far; stopped by prloop's turns budget"},
		{name: "the agent waits for the day's budget", d: &events.AgentWaiting{Base: b, State: events.AgentWaitStarted, Reason: events.AgentWaitDailyBudget,
			SpentUSD: 10.004, BudgetUSD: 10, ResumeAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
			want: "waiting: the agents' daily budget ($10.00 of $10.00) is spent; resumes at 00:00 UTC (2026-01-02 00:00 UTC)"},
		{name: "the wait is over", d: &events.AgentWaiting{Base: b, State: events.AgentWaitEnded, Reason: events.AgentWaitDailyBudget},
			want: "the wait is over: the agent's run starts"},
		{name: "conflict handed to the agent", d: specConflict(),
			want: "conflicts with main at ba5e123: the agent is asked to resolve it (both modified a.go)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, describe(tt.d))
		})
	}
}

func TestPrintExplanation_ListsSetAsideFindings(t *testing.T) {
	t.Parallel()
	x := explanation{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}, Records: &records{
		Verdict: events.StatusApproved, MaxFixCycles: 2,
		IgnoredFindings: []events.IgnoredFinding{{Author: "coderabbitai[bot]", Location: "main.go:3", URL: "https://x/1", Reason: "matches PRLOOP_FINDING_IGNORE pattern nit"}},
	}}
	var out bytes.Buffer
	require.NoError(t, printExplanation(&out, x, time.Now()))
	assert.Regexp(t, `set aside\s+coderabbitai\[bot\] on main.go:3: matches PRLOOP_FINDING_IGNORE pattern nit \(https://x/1\)`, out.String())
}
