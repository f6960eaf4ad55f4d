package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/state"
)

// TestExplain_FixLimitOfTheBasePolicy: explain counts the fix cycles left
// against the PR's max_fix_cycles from its base's .github/prloop.yml (as
// the poller's review statuses carry it) and says so, not against
// PRLOOP_MAX_FIX_CYCLES.
func TestExplain_FixLimitOfTheBasePolicy(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	four := 4
	b.Apply(&events.FeedbackReceived{Base: events.Base{PR: pr, HeadSHA: "aaaaaaaaaaaa", MaxFixCycles: &four},
		Status: events.StatusChangesRequested, Reviewers: []string{"alice"}, FixCycle: 1}, at)
	rec := &state.PR{PR: pr, Status: events.StatusChangesRequested, FixCycle: 1}
	out, next := explainBoard(t, b, pr, rec, at)
	assert.Contains(t, out, "agent fixing (cycle 2 of 4)")
	assert.Contains(t, out, "2 used, 2 left (feedback.max_fix_cycles: 4 in .github/prloop.yml)")
	assert.Contains(t, next, "fix cycle 2 of 4")
}
