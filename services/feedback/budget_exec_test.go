package feedback

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
)

// TestExecutor_DailyBudgetWaitsForTheNextUTCDay: when all PRs' agent runs
// spent PRLOOP_AGENT_DAILY_COST_USD today, a change request runs no agent
// and escalates nothing: it waits until the next UTC day, then runs the
// agent on the fresh day's budget.
func TestExecutor_DailyBudgetWaitsForTheNextUTCDay(t *testing.T) {
	t.Parallel()
	w := newExecutorWorld(t)
	w.result("fix", sha("start"))
	w.svc.cfg.AgentDailyCostUSD = 10
	var mu sync.Mutex
	now := time.Date(2026, 3, 4, 22, 30, 0, 0, time.UTC)
	var slept []time.Duration
	var runsBeforeWake int
	w.svc.d.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	w.svc.sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		slept = append(slept, d)
		runsBeforeWake = w.agent.count()
		now = now.Add(d)
		return nil
	}
	require.NoError(t, w.svc.records.addDaySpend(t.Context(), now, 10.5))

	res, err := w.svc.Address(t.Context(), w.req)
	require.NoError(t, err)
	assert.Equal(t, OutcomeAddressed, res.Outcome)
	assert.Equal(t, []time.Duration{90 * time.Minute}, slept, "waited until 00:00 UTC")
	assert.Zero(t, runsBeforeWake, "no agent ran on the spent day")
	assert.Equal(t, 1, w.agent.count())
	assert.Zero(t, w.rec.Count(w.req.PR, events.TypeEscalationRequested))
}
