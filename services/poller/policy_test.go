package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// TestDecide_PolicyHold: a hold (an invalid policy file, a change of the
// file waiting for a person) publishes the status as pending with the
// hold as its detail, again whenever the hold changes, and the verdict
// once it lifts; no approval and no change request pass while it holds.
func TestDecide_PolicyHold(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	watched := state.PR{PR: pr, Status: events.StatusPending, HeadSHA: "h1", HeadAnchor: now.Add(-time.Hour), WatchedSince: now.Add(-time.Hour), Transitions: 1}
	held := watched
	held.PolicyHold = "bad"
	approved := review.Verdict{Status: events.StatusApproved, Actor: "alice", Approvers: []string{"alice"}}
	changes := review.Verdict{Status: events.StatusChangesRequested, Feedback: []review.Item{{Kind: review.KindComment, ID: 5, Author: "alice"}}}
	tests := []struct {
		name       string
		cur        state.PR
		verdict    review.Verdict
		hold       string
		wantType   events.Type // "" for nothing published
		wantDetail string
	}{
		{name: "an invalid file holds an approval back", cur: watched, verdict: approved, hold: "bad", wantType: events.TypeReviewPending, wantDetail: "bad"},
		{name: "an invalid file holds a change request back: no agent runs", cur: watched, verdict: changes, hold: "bad", wantType: events.TypeReviewPending, wantDetail: "bad"},
		{name: "the same hold again publishes nothing", cur: held, verdict: approved, hold: "bad"},
		{name: "another hold is published", cur: held, verdict: approved, hold: policy.NeedsHuman, wantType: events.TypeReviewPending, wantDetail: policy.NeedsHuman},
		{name: "a hold that lifts on a pending PR clears the line", cur: held, verdict: review.Verdict{Status: events.StatusPending}, wantType: events.TypeReviewPending},
		{name: "a hold that lifts publishes the approval", cur: held, verdict: approved, wantType: events.TypeReviewApproved},
		{name: "a hold that lifts publishes the change request", cur: held, verdict: changes, wantType: events.TypeFeedbackReceived},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decide(tt.cur, Observation{HeadSHA: "h1", Verdict: tt.verdict, Hold: tt.hold, Now: now}, Timing{})
			assert.Equal(t, tt.hold, d.Next.PolicyHold)
			if tt.wantType == "" {
				assert.Empty(t, d.Emits)
				return
			}
			require.Len(t, d.Emits, 1)
			assert.Equal(t, tt.wantType, d.Emits[0].Data.EventType())
			if p, ok := d.Emits[0].Data.(*events.ReviewPending); ok {
				assert.Equal(t, tt.wantDetail, p.Detail)
			}
		})
	}
}

func TestJudgement_PolicyHold(t *testing.T) {
	t.Parallel()
	_, bad := policy.Decode(policy.Path, []byte("version: 1\nreview:\n  reviwers: []\n"))
	require.Error(t, bad)
	approvedBy := func(who ...string) review.Verdict {
		return review.Verdict{Status: events.StatusApproved, Approvers: who}
	}
	quorum := policy.Resolve(policy.Operator{Quorum: []string{"review-bot"}}, nil, "main")
	tests := []struct {
		name string
		j    judgement
		v    review.Verdict
		want string
	}{
		{name: "invalid file", j: judgement{eff: policy.Failed(policy.Operator{}, bad)}, v: approvedBy("alice"), want: `.github/prloop.yml:3: unknown key "reviwers" (did you mean "reviewers"?)`},
		{name: "a change of the file approved by a bot", j: judgement{eff: quorum, changes: true}, v: approvedBy("copilot[bot]"), want: policy.NeedsHuman},
		{name: "a change of the file approved by the quorum's reviewer", j: judgement{eff: quorum, changes: true}, v: approvedBy("review-bot"), want: policy.NeedsHuman},
		{name: "a change of the file approved by prloop itself", j: judgement{eff: quorum, changes: true}, v: approvedBy("prloop"), want: policy.NeedsHuman},
		{name: "a change of the file approved by a person", j: judgement{eff: quorum, changes: true}, v: approvedBy("review-bot", "alice")},
		{name: "a change of the file not approved yet", j: judgement{eff: quorum, changes: true}, v: review.Verdict{Status: events.StatusPending}},
		{name: "no change of the file", j: judgement{eff: quorum}, v: approvedBy("review-bot")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.j.policyHold(tt.v, "prloop"))
		})
	}
}
