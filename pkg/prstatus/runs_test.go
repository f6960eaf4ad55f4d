package prstatus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/prstatus"
)

func TestBoard_KeepsTheAgentRuns(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sum := &events.AgentRunSummary{Preset: "claude-code", Turns: 3, CostUSD: 0.12, Final: "done"}
	tests := []struct {
		name   string
		events []events.Data
		want   []string // outcomes, oldest first
	}{
		{name: "a fix, with and without a preset's summary", events: []events.Data{
			&events.FeedbackAddressed{Base: base(pr1, headB), PreviousHeadSHA: headA, FixCycle: 1, Agent: sum},
			&events.FeedbackAddressed{Base: base(pr1, headA), PreviousHeadSHA: headB, FixCycle: 2},
		}, want: []string{"fix pushed as bbbbbbb", "fix pushed as aaaaaaa"}},
		{name: "an escalation after a preset's run", events: []events.Data{
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonAgentBudgetExhausted, Agent: sum},
		}, want: []string{"escalated: agent budget exhausted"}},
		{name: "an escalation without a run is none", events: []events.Data{
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonReviewTimeout},
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := prstatus.NewBoard()
			for i, e := range tc.events {
				b.Apply(e, at.Add(time.Duration(i)*time.Second))
			}
			p := b.Get(pr1)
			require.NotNil(t, p)
			var got []string
			for _, r := range p.Runs {
				got = append(got, r.Outcome)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBoard_KeepsTheLatestAgentRuns(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range prstatus.MaxRuns + 5 {
		b.Apply(&events.FeedbackAddressed{Base: base(pr1, fmt.Sprintf("%040d", i)), FixCycle: i + 1}, at.Add(time.Duration(i)*time.Second))
	}
	runs := b.Get(pr1).Runs
	require.Len(t, runs, prstatus.MaxRuns)
	assert.Equal(t, 6, runs[0].FixCycle, "the oldest dropped")
	assert.Equal(t, prstatus.MaxRuns+5, runs[len(runs)-1].FixCycle)
}
