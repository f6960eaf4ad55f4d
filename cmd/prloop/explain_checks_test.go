package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/state"
)

// TestExplain_FailingChecksAndFlakyPasses: explain says what the agent is
// fixing and how many failures passed on a re-run (the poller's count).
func TestExplain_FailingChecksAndFlakyPasses(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.Apply(&events.ReviewPending{Base: events.Base{PR: pr, HeadSHA: "aaaaaaaaaaaa"}, Status: events.StatusPending}, at)
	b.Apply(&events.ChecksFailed{Base: events.Base{PR: pr, HeadSHA: "aaaaaaaaaaaa"}, Round: 2,
		Checks: []events.FailedCheck{{Name: "test"}, {Name: "lint"}}}, at)
	rec := &state.PR{PR: pr, Status: events.StatusPending, Checks: state.ChecksRecord{FlakyPasses: 1}}
	out, next := explainBoard(t, b, pr, rec, at)
	assert.Contains(t, out, "agent fixing failing checks: test, lint (cycle 1 of 2)")
	assert.Contains(t, out, "1 failing check run(s) passed on a re-run")
	assert.Contains(t, next, "the agent is fixing the failing checks test, lint")
}

// explainBoard is explain's text and next step for pr from b and rec
// alone (no GitHub, no policy read), under PRLOOP_MAX_FIX_CYCLES=2.
func explainBoard(t *testing.T, b *prstatus.Board, pr ghref.PR, rec *state.PR, at time.Time) (out, next string) {
	t.Helper()
	s := cliSettings{MaxFixCycles: 2}
	x := explanation{PR: pr, Line: b.Line(pr, s.lineOptions()), Records: recordsOf(b, pr, rec, s)}
	x.Next = nextStep(b.Get(pr), x, s)
	var w strings.Builder
	require.NoError(t, printExplanation(&w, x, at))
	return w.String(), x.Next
}

// TestExplain_AgentWaitsForTheDaysBudget: while the agents' daily budget
// is spent, explain says the wait and when it ends, not that the agent is
// addressing the change request.
func TestExplain_AgentWaitsForTheDaysBudget(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 22, 0, 0, 0, time.UTC)
	head := events.Base{PR: pr, HeadSHA: "aaaaaaaaaaaa"}
	b.Apply(&events.FeedbackReceived{Base: head, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}}, at)
	b.Apply(&events.AgentWaiting{Base: head, State: events.AgentWaitStarted, Reason: events.AgentWaitDailyBudget,
		SpentUSD: 10.5, BudgetUSD: 10, ResumeAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}, at)
	s := cliSettings{MaxFixCycles: 2}
	x := explanation{PR: pr, Line: b.Line(pr, s.lineOptions()), Records: recordsOf(b, pr, &state.PR{PR: pr, Status: events.StatusChangesRequested}, s)}
	x.Next = nextStep(b.Get(pr), x, s)
	var out strings.Builder
	require.NoError(t, printExplanation(&out, x, at))
	assert.Contains(t, out.String(), "waiting: the agents' daily budget ($10.50 of $10.00) is spent; resumes at 00:00 UTC")
	assert.Equal(t, "wait until 2026-01-02 00:00 UTC: the agents' daily budget is spent (PRLOOP_AGENT_DAILY_COST_USD=$10.00); "+
		"to go on now, raise it and restart the feedback service", x.Next)
}
