package feedback

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/prstatus"
)

// TestExecutor_DailyBudgetWaitsForTheNextUTCDay: when all PRs' agent runs
// spent PRLOOP_AGENT_DAILY_COST_USD today, a change request runs no agent
// and escalates nothing: it waits until the next UTC day, then runs the
// agent on the fresh day's budget.
func TestExecutor_DailyBudgetWaitsForTheNextUTCDay(t *testing.T) {
	t.Parallel()
	w := newSpentDay(t, 0)

	res, err := w.svc.Address(t.Context(), w.req)
	require.NoError(t, err)
	assert.Equal(t, OutcomeAddressed, res.Outcome)
	assert.Equal(t, []time.Duration{90 * time.Minute}, w.slept, "waited until 00:00 UTC")
	assert.Zero(t, w.runsBeforeWake, "no agent ran on the spent day")
	assert.Equal(t, 1, w.agent.count())
	assert.Zero(t, w.rec.Count(w.req.PR, events.TypeEscalationRequested))
}

// TestExecutor_DailyBudgetWaitIsAnnouncedOnce: the wait for the next UTC
// day is told to the views with one PRAgentWaiting (waiting, with the
// figures and resume_at) and its end with one more (resumed) before the
// agent runs, even when the attempt is interrupted in the wait and comes
// back: the status line says why nothing happens, then clears.
func TestExecutor_DailyBudgetWaitIsAnnouncedOnce(t *testing.T) {
	t.Parallel()
	w := newSpentDay(t, 1)

	_, err := w.svc.Address(t.Context(), w.req)
	require.Error(t, err, "the first attempt is interrupted in its wait")
	res, err := w.svc.Address(t.Context(), w.req)
	require.NoError(t, err)
	assert.Equal(t, OutcomeAddressed, res.Outcome)
	w.rec.Wait(t, w.req.PR, events.TypeFeedbackAddressed, 5*time.Second)

	var waits []*events.AgentWaiting
	for _, r := range w.rec.For(w.req.PR) {
		if d, ok := r.Data.(*events.AgentWaiting); ok {
			waits = append(waits, d)
		}
	}
	require.Len(t, waits, 2, "one waiting, one resumed: %v", w.rec.Types(w.req.PR))
	resume := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, events.AgentWaitStarted, waits[0].State)
	assert.Equal(t, events.AgentWaitDailyBudget, waits[0].Reason)
	assert.InDelta(t, 10.5, waits[0].SpentUSD, 1e-9)
	assert.InDelta(t, 10.0, waits[0].BudgetUSD, 1e-9)
	assert.True(t, resume.Equal(waits[0].ResumeAt), "resume_at %s", waits[0].ResumeAt)
	assert.Equal(t, events.AgentWaitEnded, waits[1].State)
	assert.Equal(t, []events.Type{events.TypeAgentWaiting, events.TypeAgentWaiting, events.TypeFeedbackAddressed}, w.rec.Types(w.req.PR))

	// What the views make of it: the wait while it lasts, not after.
	b := prstatus.NewBoard()
	b.Apply(&events.FeedbackReceived{Base: events.Base{PR: w.req.PR, HeadSHA: w.req.HeadSHA}, Status: events.StatusChangesRequested}, w.now)
	b.Apply(waits[0], w.now)
	assert.Equal(t, "waiting: the agents' daily budget ($10.50 of $10.00) is spent; resumes at 00:00 UTC", b.Line(w.req.PR, prstatus.Options{}).Text)
	b.Apply(waits[1], w.now)
	assert.Equal(t, "changes requested — agent fixing (cycle 1)", b.Line(w.req.PR, prstatus.Options{}).Text)

	rec, _, err := w.svc.records.get(t.Context(), w.req.PR)
	require.NoError(t, err)
	assert.True(t, rec.AgentWaitUntil.IsZero(), "the end of the wait is recorded as told")
}

// spentDay is an executor world at 22:30 UTC whose day's agent budget
// ($10) all PRs' runs have spent ($10.50), with a fix for the agent to
// leave. Its sleep moves its clock, but the first interrupted ones fail
// as a crash or a shutdown in the wait would.
type spentDay struct {
	*executorWorld
	mu             sync.Mutex
	now            time.Time
	slept          []time.Duration
	runsBeforeWake int
	interrupted    int
}

func newSpentDay(t *testing.T, interrupted int) *spentDay {
	t.Helper()
	w := &spentDay{executorWorld: newExecutorWorld(t), now: time.Date(2026, 3, 4, 22, 30, 0, 0, time.UTC), interrupted: interrupted}
	w.result("fix", sha("start"))
	w.svc.cfg.AgentDailyCostUSD = 10
	w.svc.d.Now = func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
	w.svc.sleep = func(_ context.Context, d time.Duration) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.interrupted > 0 {
			w.interrupted--
			return errors.New("interrupted in the wait")
		}
		w.slept = append(w.slept, d)
		w.runsBeforeWake = w.agent.count()
		w.now = w.now.Add(d)
		return nil
	}
	require.NoError(t, w.svc.records.addDaySpend(t.Context(), w.now, 10.5))
	return w
}
