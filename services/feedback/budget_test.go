package feedback

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJudgeBudget_OneRuleBeforeAndDuringARun: the PR's cost budget ends
// the PR's agent work, the run's turns stop the run at the first turn over
// the bound, and the day's budget only makes runs wait; 0 is no bound, and
// the PR's budget wins over the others.
func TestJudgeBudget_OneRuleBeforeAndDuringARun(t *testing.T) {
	t.Parallel()
	all := budget{MaxTurns: 10, MaxCostUSD: 5, DailyCostUSD: 50}
	tests := []struct {
		name string
		b    budget
		s    spend
		want budgetKind
		// figures are parts of the answer's figures.
		figures []string
	}{
		{name: "nothing spent", b: all, s: spend{}, want: budgetOK},
		{name: "no bounds at all", b: budget{}, s: spend{Turns: 1000, RunCostUSD: 1e6, PRCostUSD: 1e6, DayCostUSD: 1e6}, want: budgetOK},
		{name: "at the turn bound, not over", b: all, s: spend{Turns: 10}, want: budgetOK},
		{name: "the first turn over stops", b: all, s: spend{Turns: 11, RunCostUSD: 0.5, PRCostUSD: 1}, want: budgetTurns,
			figures: []string{"turn 11", "PRLOOP_AGENT_MAX_TURNS=10", "$0.5000", "$1.5000"}},
		{name: "the PR's earlier runs spent it: no run starts", b: all, s: spend{PRCostUSD: 5}, want: budgetPRCost,
			figures: []string{"$5.0000", "PRLOOP_AGENT_MAX_COST_USD=$5"}},
		{name: "this run crosses the PR's budget", b: all, s: spend{Turns: 3, RunCostUSD: 2.5, PRCostUSD: 2.5}, want: budgetPRCost,
			figures: []string{"$5.0000 (this run $2.5000)"}},
		{name: "just under the PR's budget", b: all, s: spend{RunCostUSD: 2.49, PRCostUSD: 2.5}, want: budgetOK},
		{name: "the PR's budget wins over turns", b: all, s: spend{Turns: 50, RunCostUSD: 6}, want: budgetPRCost},
		{name: "turns win over the day", b: all, s: spend{Turns: 11, DayCostUSD: 60}, want: budgetTurns},
		{name: "the day's budget spent by other PRs", b: all, s: spend{DayCostUSD: 50}, want: budgetDay,
			figures: []string{"$50.0000 today (UTC)", "PRLOOP_AGENT_DAILY_COST_USD=$50"}},
		{name: "this run crosses the day's budget", b: all, s: spend{RunCostUSD: 1, DayCostUSD: 49.5}, want: budgetDay},
		{name: "the day unbounded", b: budget{MaxTurns: 10, MaxCostUSD: 5}, s: spend{DayCostUSD: 1e6}, want: budgetOK},
		{name: "a fractional price bound", b: budget{MaxCostUSD: 0.25}, s: spend{RunCostUSD: 0.25}, want: budgetPRCost,
			figures: []string{"PRLOOP_AGENT_MAX_COST_USD=$0.25"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := judgeBudget(tt.b, tt.s)
			assert.Equal(t, tt.want, got.Kind)
			if tt.want == budgetOK {
				assert.Empty(t, got.Figures)
			}
			for _, f := range tt.figures {
				assert.Contains(t, got.Figures, f)
			}
		})
	}
}

// TestNextUTCDay: the day's budget is fresh at the next midnight UTC,
// whatever the local zone.
func TestNextUTCDay(t *testing.T) {
	t.Parallel()
	tokyo := time.FixedZone("JST", 9*3600)
	tests := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{name: "mid-day", now: time.Date(2026, 3, 4, 13, 0, 0, 0, time.UTC), want: time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{name: "at midnight", now: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), want: time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
		{name: "end of a year", now: time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), want: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "another zone's date", now: time.Date(2026, 3, 5, 8, 0, 0, 0, tokyo), want: time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.True(t, tt.want.Equal(nextUTCDay(tt.now)), "got %s", nextUTCDay(tt.now))
		})
	}
}

// TestPrices_TokensTimesTheTable: a model's tokens are priced by the first
// matching rule, cache reads and writes at their own or the default
// fraction of the input price; no match is free (and said so by a zero).
func TestPrices_TokensTimesTheTable(t *testing.T) {
	t.Parallel()
	table, err := parsePrices("claude-opus*=15/75, claude-*=3/15/0.3/3.75 ,gpt-5*-mini*=0.25/2,gpt-*=1.25/10")
	require.NoError(t, err)
	tests := []struct {
		name  string
		model string
		u     tokenUsage
		want  float64
	}{
		{name: "first match wins", model: "claude-opus-4-1", u: tokenUsage{Input: 1e6, Output: 1e6}, want: 90},
		{name: "explicit cache prices", model: "claude-sonnet-4-5", u: tokenUsage{Input: 1e6, Output: 1e6, CacheRead: 1e6, CacheWrite: 1e6}, want: 3 + 15 + 0.3 + 3.75},
		{name: "default cache prices", model: "gpt-5", u: tokenUsage{CacheRead: 1e6, CacheWrite: 1e6}, want: 0.125 + 1.5625},
		{name: "mini before the wildcard", model: "gpt-5.1-codex-mini", u: tokenUsage{Output: 1e6}, want: 2},
		{name: "no rule", model: "llama", u: tokenUsage{Input: 1e6}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.InDelta(t, tt.want, table.cost(tt.model, tt.u), 1e-9)
		})
	}
	for _, bad := range []string{"gpt=1", "=1/2", "x=a/b", "x=1/-2", "[=1/2", "x=1/2/3/4/5"} {
		_, err := parsePrices(bad)
		assert.Error(t, err, bad)
	}
}
