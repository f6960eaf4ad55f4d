package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// TestReduce_ConflictResolution: PRConflictResolveRequested holds the PR's
// next head back like a change request, and the feedback service's answer
// ends it; a resolution is remembered as such and addresses no feedback.
func TestReduce_ConflictResolution(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b := func(head string) events.Base { return events.Base{PR: pr, HeadSHA: head} }
	approved := state.PR{PR: pr, Status: events.StatusApproved, HeadSHA: "h1", FixCycle: 1, AskedItems: []string{"c9"}}
	resolving := approved
	resolving.FeedbackHeadSHA, resolving.ConflictHeadSHA = "h1", "h1"
	tests := []struct {
		name    string
		cur     state.PR
		event   events.Data
		changed bool
		check   func(t *testing.T, n state.PR)
	}{
		{
			name: "the request holds the next head back", cur: approved, changed: true,
			event: &events.ConflictResolveRequested{Base: b("h1"), BaseBranch: "main", BaseSHA: "m1", FixCycle: 1},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h1", n.FeedbackHeadSHA)
				assert.Equal(t, "h1", n.ConflictHeadSHA)
				assert.True(t, holdsNewHead(n, "h2"), "the resolution's head waits for PRFeedbackAddressed")
			},
		},
		{
			name: "a candidate's failure handed to the agent holds the next head back too", cur: approved, changed: true,
			event: &events.MergeFailed{Base: b("h1"), Reason: events.ReasonCandidateFailed, Candidate: "c1", BaseBranch: "main", BaseSHA: "m1"},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h1", n.ConflictHeadSHA)
				assert.True(t, holdsNewHead(n, "h2"), "the fix's head waits for PRFeedbackAddressed")
			},
		},
		{
			name: "a dry run's candidate failure holds nothing", cur: approved,
			event: &events.MergeFailed{Base: b("h1"), Reason: events.ReasonCandidateFailed, DryRun: true},
		},
		{
			name: "a closed PR holds nothing", cur: state.PR{PR: pr, HeadSHA: "h1", Closed: true},
			event: &events.ConflictResolveRequested{Base: b("h1")},
		},
		{
			name: "the resolution ends it and is remembered; no feedback was addressed", cur: resolving, changed: true,
			event: &events.FeedbackAddressed{Base: b("h2"), PreviousHeadSHA: "h1", FixCycle: 2, PushedAt: now},
			check: func(t *testing.T, n state.PR) {
				assert.Empty(t, n.FeedbackHeadSHA)
				assert.Empty(t, n.ConflictHeadSHA)
				assert.Equal(t, "h2", n.ConflictFixHeadSHA)
				assert.Equal(t, 2, n.FixCycle, "a resolution is a fix cycle")
				assert.Equal(t, []string{"c9"}, n.AskedItems)
				assert.Empty(t, n.AddressedItems)
				assert.False(t, holdsNewHead(n, "h2"))
			},
		},
		{
			name: "a skip ends it", cur: resolving, changed: true,
			event: &events.FeedbackSkipped{Base: b("h1"), Detail: "the head moved"},
			check: func(t *testing.T, n state.PR) {
				assert.Empty(t, n.FeedbackHeadSHA)
				assert.Empty(t, n.ConflictHeadSHA)
			},
		},
		{
			name: "an escalation ends it", cur: resolving, changed: true,
			event: &events.EscalationRequested{Base: b("h1"), Reason: events.ReasonMergeConflict},
			check: func(t *testing.T, n state.PR) {
				assert.Empty(t, n.FeedbackHeadSHA)
				assert.Empty(t, n.ConflictHeadSHA)
				assert.Empty(t, n.ConflictFixHeadSHA)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, changed := reduce(tt.cur, tt.event, now, now)
			assert.Equal(t, tt.changed, changed)
			if tt.check != nil {
				tt.check(t, next)
			}
		})
	}
}

// TestDecide_ConflictResolution: the head the agent's resolution made
// needs review again, unless PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX carries
// the approval over; then the approval is published anew for the new head
// (the PR left the merge queue) with the approved head's anchor.
func TestDecide_ConflictResolution(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	anchor := now.Add(-time.Hour)
	resolved := state.PR{
		PR: pr, Status: events.StatusApproved, HeadSHA: "h1", HeadAnchor: anchor, WatchedSince: anchor, Transitions: 2,
		FixCycle: 1, ConflictFixHeadSHA: "h2",
	}
	obs := func(head string, s events.Status) Observation {
		return Observation{HeadSHA: head, Anchor: now, Verdict: review.Verdict{Status: s}, Now: now}
	}
	tests := []struct {
		name     string
		survives bool
		cur      state.PR
		obs      Observation
		want     events.Type // "" publishes nothing
		anchor   time.Time
	}{
		{name: "the approval does not carry over by default", cur: resolved, obs: obs("h2", events.StatusPending), want: events.TypeReviewPending, anchor: now},
		{name: "carried over when allowed, and published anew", survives: true, cur: resolved, obs: obs("h2", events.StatusPending), want: events.TypeReviewApproved, anchor: anchor},
		{name: "a change request on the resolution wins", survives: true, cur: resolved, obs: obs("h2", events.StatusChangesRequested), want: events.TypeFeedbackReceived, anchor: anchor},
		{name: "another head is not the resolution", survives: true, cur: resolved, obs: obs("h3", events.StatusPending), want: events.TypeReviewPending, anchor: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decide(tt.cur, tt.obs, Timing{ApprovalSurvivesConflictFix: tt.survives})
			require.False(t, d.Hold)
			var types []events.Type
			for _, e := range d.Emits {
				types = append(types, e.Data.EventType())
			}
			if tt.want == "" {
				assert.Empty(t, types)
			} else {
				assert.Equal(t, []events.Type{tt.want}, types)
			}
			assert.Equal(t, tt.anchor, d.Next.HeadAnchor)
			if a, ok := d.Emits[0].Data.(*events.ReviewApproved); ok {
				assert.Equal(t, anchor, a.Anchor)
				assert.Equal(t, 1, a.FixCycle)
				// Later evaluations keep it, as for the merger's own update.
				again := decide(d.Next, tt.obs, Timing{ApprovalSurvivesConflictFix: tt.survives})
				assert.Empty(t, again.Emits)
			}
		})
	}
}
