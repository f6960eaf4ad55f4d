package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/kvlease"
)

// The agent's budgets in turns and money, which prloop counts from a
// preset's stream and enforces itself (docs/agents.md, "Budgets"):
// PRLOOP_AGENT_MAX_TURNS per run, PRLOOP_AGENT_MAX_COST_USD per PR across
// its runs and fix cycles, PRLOOP_AGENT_DAILY_COST_USD across all PRs per
// UTC day. judgeBudget is the one rule, asked before each run and after
// each line of its stream.

// budget is the settings judgeBudget follows; 0 is no bound.
type budget struct {
	MaxTurns     int
	MaxCostUSD   float64
	DailyCostUSD float64
}

// spend is what has been used when judgeBudget is asked.
type spend struct {
	// Turns and RunCostUSD are the current run's (0 before it starts).
	Turns      int
	RunCostUSD float64
	// PRCostUSD is what the PR's earlier runs cost; DayCostUSD what all
	// PRs' runs cost this UTC day, as recorded when the run started.
	PRCostUSD  float64
	DayCostUSD float64
}

// budgetKind is which budget, if any, is used up.
type budgetKind string

// Budget kinds; budgetOK is none.
const (
	budgetOK     budgetKind = ""
	budgetTurns  budgetKind = "turns"
	budgetPRCost budgetKind = "pr_cost"
	budgetDay    budgetKind = "daily_cost"
)

// budgetCall is judgeBudget's answer: which budget is used up, and the
// figures, for the escalation and the log.
type budgetCall struct {
	Kind    budgetKind
	Figures string
}

// judgeBudget decides whether a run may start (s.Turns == 0) or go on.
// The PR's budget comes first: it ends the PR's agent work (escalation);
// then the run's turns (the run is stopped at the first turn over the
// bound, and escalated); the day's budget last, which only makes new runs
// wait for the next UTC day.
func judgeBudget(b budget, s spend) budgetCall {
	pr := s.PRCostUSD + s.RunCostUSD
	switch {
	case b.MaxCostUSD > 0 && pr >= b.MaxCostUSD:
		return budgetCall{budgetPRCost, fmt.Sprintf("the agent's runs on this PR cost $%.4f (this run $%.4f), at or over PRLOOP_AGENT_MAX_COST_USD=$%s",
			pr, s.RunCostUSD, usd(b.MaxCostUSD))}
	case b.MaxTurns > 0 && s.Turns > b.MaxTurns:
		return budgetCall{budgetTurns, fmt.Sprintf("the agent's run reached turn %d, over PRLOOP_AGENT_MAX_TURNS=%d (it cost $%.4f; the PR's runs $%.4f)",
			s.Turns, b.MaxTurns, s.RunCostUSD, pr)}
	case b.DailyCostUSD > 0 && s.DayCostUSD+s.RunCostUSD >= b.DailyCostUSD:
		return budgetCall{budgetDay, fmt.Sprintf("the agent's runs on all PRs cost $%.4f today (UTC), at or over PRLOOP_AGENT_DAILY_COST_USD=$%s",
			s.DayCostUSD+s.RunCostUSD, usd(b.DailyCostUSD))}
	}
	return budgetCall{}
}

func usd(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// nextUTCDay is when a day's budget is fresh again after now.
func nextUTCDay(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// BudgetError is a run stopped, or not started, because a budget is used
// up; its message has the figures.
type BudgetError struct{ call budgetCall }

func (e *BudgetError) Error() string { return "agent budget used up: " + e.call.Figures }

// Kind is the budget used up: turns, pr_cost or daily_cost.
func (e *BudgetError) Kind() string { return string(e.call.Kind) }

// priceRule prices one model pattern's tokens, in USD per million.
type priceRule struct {
	pattern       string
	input, output float64
	cacheRead     float64
	cacheWrite    float64
}

// priceTable is PRLOOP_AGENT_PRICES: the first rule whose pattern
// (path.Match) matches the model prices its tokens.
type priceTable []priceRule

// parsePrices reads "pattern=input/output[/cache-read[/cache-write]]",
// comma-separated. Cache reads default to a tenth of the input price and
// cache writes to 1.25 times it, as Anthropic and OpenAI price them.
func parsePrices(s string) (priceTable, error) {
	var t priceTable
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pat, nums, ok := strings.Cut(part, "=")
		fs := strings.Split(nums, "/")
		if !ok || pat == "" || len(fs) < 2 || len(fs) > 4 {
			return nil, fmt.Errorf("%q: want model=input/output USD per million tokens", part)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		var v [4]float64
		for i, f := range fs {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || x < 0 {
				return nil, fmt.Errorf("%q: %q is not a price", part, f)
			}
			v[i] = x
		}
		r := priceRule{pattern: strings.TrimSpace(pat), input: v[0], output: v[1], cacheRead: v[0] / 10, cacheWrite: v[0] * 1.25}
		if len(fs) > 2 {
			r.cacheRead = v[2]
		}
		if len(fs) > 3 {
			r.cacheWrite = v[3]
		}
		t = append(t, r)
	}
	return t, nil
}

// cost prices u for model; 0 when no rule matches.
func (t priceTable) cost(model string, u tokenUsage) float64 {
	for _, r := range t {
		if ok, _ := path.Match(r.pattern, model); ok {
			return (float64(u.Input)*r.input + float64(u.Output)*r.output +
				float64(u.CacheRead)*r.cacheRead + float64(u.CacheWrite)*r.cacheWrite) / 1e6
		}
	}
	return 0
}

// validateAgent checks the preset and budget settings.
func (c Config) validateAgent() error {
	var errs []error
	if _, err := c.agentSpec(true); err != nil {
		errs = append(errs, err)
	}
	if _, err := parsePrices(c.AgentPrices); err != nil {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_PRICES: %w", err))
	}
	if c.AgentMaxTurns < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_MAX_TURNS=%d: want 0 (no bound) or more", c.AgentMaxTurns))
	}
	if c.AgentMaxCostUSD < 0 || c.AgentDailyCostUSD < 0 {
		errs = append(errs, errors.New("PRLOOP_AGENT_MAX_COST_USD and PRLOOP_AGENT_DAILY_COST_USD: want 0 (no bound) or more"))
	}
	if c.AgentTranscriptMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_TRANSCRIPT_MAX_BYTES=%d: want at least 1", c.AgentTranscriptMaxBytes))
	}
	return errors.Join(errs...)
}

// budget is the budgets from the configuration.
func (c Config) budget() budget {
	return budget{MaxTurns: c.AgentMaxTurns, MaxCostUSD: c.AgentMaxCostUSD, DailyCostUSD: c.AgentDailyCostUSD}
}

// spendPrefix keys the day's spend across PRs in the service's bucket:
// spend.<YYYY-MM-DD>, in UTC.
const spendPrefix = "spend."

// daySpend is the record of one UTC day's agent cost across all PRs.
type daySpend struct {
	CostUSD float64 `json:"cost_usd"`
	Runs    int     `json:"runs"`
}

func spendKey(day time.Time) string { return spendPrefix + day.UTC().Format("2006-01-02") }

// daySpent reads the cost of the day of now.
func (rs records) daySpent(ctx context.Context, now time.Time) (float64, error) {
	e, err := rs.kv.Get(ctx, spendKey(now))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("read the agent's spend of %s: %w", spendKey(now), err)
	}
	var d daySpend
	_ = json.Unmarshal(e.Value(), &d) // an unreadable record counts as nothing spent
	return d.CostUSD, nil
}

// addDaySpend adds a run's cost to the day of now.
func (rs records) addDaySpend(ctx context.Context, now time.Time, cost float64) error {
	_, err := kvlease.Update(ctx, rs.kv, spendKey(now), 20, func(cur []byte, _ uint64) ([]byte, error) {
		var d daySpend
		if len(cur) > 0 {
			_ = json.Unmarshal(cur, &d)
		}
		d.CostUSD += cost
		d.Runs++
		return json.Marshal(d)
	})
	return err
}
