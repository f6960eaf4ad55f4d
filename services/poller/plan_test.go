package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// TestPlanEvaluation is the policy of evaluate, rule by rule: which PRs
// are left alone, which need a fresh read, what is gathered and from
// which anchor.
func TestPlanEvaluation(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	opened := now.Add(-2 * time.Hour)
	anchor := now.Add(-time.Hour)
	watched := state.PR{PR: pr, Status: events.StatusPending, HeadSHA: "h1", HeadAnchor: anchor}
	merged := watched
	merged.Closed, merged.Merged = true, true
	closed := watched
	closed.Closed = true
	stopped := watched // "/prloop stop"
	stopped.Stopped = true
	addressing := watched // a change request on h1 is being addressed
	addressing.Status, addressing.FeedbackHeadSHA = events.StatusChangesRequested, "h1"
	pushed := watched // prloop pushed h2, GitHub's lists may still show h1
	pushed.PushedHeadSHA, pushed.PushedAt = "h2", now.Add(-time.Minute)

	// pull and issue are a list's entries for a PR on head, last active
	// at updated.
	pull := func(head string, updated time.Time) pullInfo {
		return pullInfo{head: head, base: "main", created: opened, updated: updated}
	}
	issue := func(updated time.Time) *issueInfo { return &issueInfo{updated: updated, comments: 1} }
	active := now.Add(-10 * time.Minute)
	// seen is what the last evaluation read from the lists, listedAt.
	seen := func(head string, listedAt time.Time) *seenSignals {
		return &seenSignals{head: head, updated: activityKey(pull(head, active), issue(active)), listedAt: listedAt}
	}
	untouchedPull := pullInfo{head: "h1", created: opened, updated: opened}
	untouchedIssue := &issueInfo{updated: opened}

	tests := []struct {
		name string
		cur  state.PR
		l    listing
		want evaluationPlan
	}{
		{name: "a merged PR is never evaluated again, even seen open in an old list",
			cur: merged, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalSkip}},
		{name: "a merged PR read fresh is not evaluated either",
			cur: merged, l: listing{pull: pull("h1", active)}, want: evaluationPlan{Kind: evalSkip}},
		{name: `a stopped PR ("/prloop stop") is not evaluated, whatever moved`,
			cur: stopped, l: listing{pull: pull("h2", active), issue: issue(active)}, want: evaluationPlan{Kind: evalSkip, Why: `not watched after "/prloop stop" until a watch request`}},
		{name: "a closed PR seen open in a list: a reopen or an old list, only a fresh read tells",
			cur: closed, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalFetchFresh}},
		{name: "a closed PR read fresh and open is a reopen: gathered",
			cur: closed, l: listing{pull: pull("h1", active)}, want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "a new head while the change request on the old one is addressed is held back",
			cur: addressing, l: listing{pull: pull("h2", active), issue: issue(active)},
			want: evaluationPlan{Kind: evalSkip, Why: "new head held back until the change request on the old one ends"}},
		{name: "the head under address itself is evaluated",
			cur: addressing, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "a list still showing the head prloop's push replaced is older than the push",
			cur: pushed, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalFetchFresh}},
		{name: "a fresh read showing that head is believed",
			cur: pushed, l: listing{pull: pull("h1", active)}, want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "prloop's own push is anchored at the push",
			cur: pushed, l: listing{pull: pull("h2", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: pushed.PushedAt}},
		{name: "someone else's new head is anchored when prloop first saw it, never at the commit's dates",
			cur: watched, l: listing{pull: pull("h9", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: now}},
		{name: "a push that is not the one prloop recorded is someone else's",
			cur: pushed, l: listing{pull: pull("h3", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: now}},
		{name: "the known head keeps its anchor",
			cur: watched, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "an untouched PR watched for the first time reads nothing, anchored at its creation",
			cur: state.PR{PR: pr}, l: listing{pull: untouchedPull, issue: untouchedIssue}, want: evaluationPlan{Kind: evalNoSignals, Anchor: opened}},
		{name: "an untouched PR already watched is gathered",
			cur: watched, l: listing{pull: untouchedPull, issue: untouchedIssue}, want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "a first watch of a PR with activity gathers from now",
			cur: state.PR{PR: pr}, l: listing{pull: pull("h1", active), issue: issue(active)}, want: evaluationPlan{Kind: evalGather, Anchor: now}},
		{name: "only the reactions moved since lists read after the activity settled",
			cur: watched, l: listing{pull: pull("h1", active), issue: issue(active), last: seen("h1", active.Add(ListSettle+time.Second))},
			want: evaluationPlan{Kind: evalReactionsOnly, Anchor: anchor}},
		{name: "lists read within ListSettle of the activity may miss a same-second comment: gathered",
			cur: watched, l: listing{pull: pull("h1", active), issue: issue(active), last: seen("h1", active.Add(time.Second))},
			want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "activity since the last lists: gathered",
			cur: watched, l: listing{pull: pull("h1", now.Add(-time.Minute)), issue: issue(now.Add(-time.Minute)), last: seen("h1", active.Add(time.Minute))},
			want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "the last lists were of another head: gathered",
			cur: watched, l: listing{pull: pull("h1", active), issue: issue(active), last: seen("h0", active.Add(time.Minute))},
			want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
		{name: "a fresh read has no reactions rollup to compare: gathered",
			cur: watched, l: listing{pull: pull("h1", active), last: seen("h1", active.Add(time.Minute))},
			want: evaluationPlan{Kind: evalGather, Anchor: anchor}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, planEvaluation(tt.cur, tt.l, now))
		})
	}
}

// TestDecideEvaluation: decide on the record the compare-and-set reads,
// which may have changed since evaluate planned.
func TestDecideEvaluation(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	closedAt := now.Add(-time.Hour)
	watched := state.PR{PR: pr, Status: events.StatusApproved, HeadSHA: "h1", HeadAnchor: now.Add(-3 * time.Hour), WatchedSince: now.Add(-3 * time.Hour), Transitions: 2, ReviewTimeoutSent: true}
	closed := watched
	closed.Closed, closed.ClosedAt = true, closedAt
	merged := closed
	merged.Merged = true
	stopped := watched
	stopped.Stopped = true
	obs := Observation{HeadSHA: "h1", Anchor: watched.HeadAnchor, Verdict: review.Verdict{Status: events.StatusApproved}, Now: now}
	tm := Timing{ReviewTimeout: 2 * time.Hour}
	tests := []struct {
		name      string
		cur       state.PR
		listed    bool
		wantHold  bool
		wantTypes []events.Type
		check     func(t *testing.T, next state.PR)
	}{
		{name: "merged meanwhile: left alone", cur: merged, wantHold: true},
		{name: "merged meanwhile, seen in a list: left alone", cur: merged, listed: true, wantHold: true},
		{name: `stopped meanwhile ("/prloop stop"): left alone`, cur: stopped, listed: true, wantHold: true},
		{name: "closed meanwhile while a list showed it open: left alone", cur: closed, listed: true, wantHold: true},
		{name: "reopened (read fresh): resumes as if watching began now", cur: closed,
			wantTypes: []events.Type{events.TypeReviewApproved},
			check: func(t *testing.T, next state.PR) {
				assert.False(t, next.Closed)
				assert.True(t, next.ClosedAt.IsZero())
				assert.Equal(t, now, next.WatchedSince, "the review timeout counts from the reopen")
				assert.False(t, next.ReviewTimeoutSent)
				assert.Equal(t, events.StatusApproved, next.Status, "its status is published again")
			}},
		{name: "open: decide as usual", cur: watched, listed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, _ := decideEvaluation(tt.cur, obs, tt.listed, tm, nil, commandFacts{Head: obs.HeadSHA, Now: now})
			assert.Equal(t, tt.wantHold, d.Hold)
			if tt.wantHold {
				assert.Equal(t, tt.cur, d.Next)
			}
			var types []events.Type
			for _, e := range d.Emits {
				types = append(types, e.Data.EventType())
			}
			assert.Equal(t, tt.wantTypes, types)
			if tt.check != nil {
				tt.check(t, d.Next)
			}
		})
	}
}
