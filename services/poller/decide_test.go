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

func TestDecide(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	watched := state.PR{PR: pr, Status: events.StatusPending, HeadSHA: "h1", HeadAnchor: now.Add(-time.Hour), WatchedSince: now.Add(-time.Hour), Transitions: 1}
	tm := Timing{ReviewTimeout: 2 * time.Hour, EscalationLabel: "human-review-required"}
	escalated := watched
	escalated.Status, escalated.FixCycle, escalated.FeedbackHeadSHA = events.StatusChangesRequested, 2, "h1"
	escalated.Escalations = map[events.Reason]time.Time{events.ReasonMaxFixCycles: now}
	verdict := func(s events.Status) review.Verdict { return review.Verdict{Status: s} }
	onMain := watched // approved for main
	onMain.Status, onMain.BaseRef = events.StatusApproved, "main"
	tests := []struct {
		name      string
		cur       state.PR
		obs       Observation
		wantTypes []events.Type
		wantIDs   [][]string
		hold      bool
		check     func(t *testing.T, next state.PR)
	}{
		{
			name:      "first evaluation publishes the status the PR has",
			cur:       state.PR{PR: pr},
			obs:       Observation{HeadSHA: "h1", Anchor: now.Add(-time.Hour), Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending},
			wantIDs:   [][]string{{"h1", "1"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, now, n.WatchedSince)
				assert.Equal(t, now.Add(-time.Hour), n.HeadAnchor)
			},
		},
		{
			name:      "first evaluation of an approved PR publishes the approval",
			cur:       state.PR{PR: pr},
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusApproved, Actor: "alice", Approvers: []string{"alice"}}, Now: now},
			wantTypes: []events.Type{events.TypeReviewApproved},
			wantIDs:   [][]string{{"h1", "1"}},
		},
		{name: "no change publishes nothing", cur: watched, obs: Observation{HeadSHA: "h1", Verdict: verdict(events.StatusPending), Now: now}},
		{
			name: "each transition is one event with a fresh id", cur: watched,
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Actor: "bob"}, Now: now},
			wantTypes: []events.Type{events.TypeReviewInProgress}, wantIDs: [][]string{{"h1", "2"}},
			check: func(t *testing.T, n state.PR) { assert.Equal(t, 2, n.Transitions) },
		},
		{
			name: "changes requested records the head being addressed", cur: watched,
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusChangesRequested, Feedback: []review.Item{{Kind: review.KindComment, ID: 5, Author: "alice"}}}, Now: now},
			wantTypes: []events.Type{events.TypeFeedbackReceived}, wantIDs: [][]string{{"h1", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h1", n.FeedbackHeadSHA)
				assert.Equal(t, []string{"comment:5"}, n.AskedItems, "what a fix will have addressed, by identity")
			},
		},
		{
			name: "no second feedback for a head being addressed",
			cur: func() state.PR {
				c := watched
				c.Status, c.FeedbackHeadSHA = events.StatusInProgress, "h1"
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Verdict: verdict(events.StatusChangesRequested), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, events.StatusInProgress, n.Status, "the stored status stays what was last published")
			},
		},
		{
			name: "a new head while the change request on the old one is addressed is held back",
			cur: func() state.PR {
				c := watched
				c.Status, c.FeedbackHeadSHA = events.StatusChangesRequested, "h1"
				return c
			}(),
			obs:  Observation{HeadSHA: "h2", Anchor: now, Verdict: verdict(events.StatusApproved), Now: now.Add(5 * time.Hour)},
			hold: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h1", n.HeadSHA, "nothing about h2 before the feedback service says what h2 is")
				assert.Equal(t, "h1", n.FeedbackHeadSHA)
			},
		},
		{
			name: "a stale change request on an older head holds nothing back",
			cur: func() state.PR {
				c := watched
				c.FeedbackHeadSHA = "h0"
				return c
			}(),
			obs:       Observation{HeadSHA: "h2", Anchor: now, Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending}, wantIDs: [][]string{{"h2", "2"}},
		},
		{
			name: "a new head republishes its status, anchored, once the change request ended",
			cur: func() state.PR {
				c := watched
				c.Status, c.PushedHeadSHA = events.StatusChangesRequested, "h2"
				return c
			}(),
			obs:       Observation{HeadSHA: "h2", Anchor: now, Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending}, wantIDs: [][]string{{"h2", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h2", n.HeadSHA)
				assert.Equal(t, now, n.HeadAnchor)
			},
		},
		{
			name: "an approval on a new head is published even if the last status was approved",
			cur: func() state.PR {
				c := watched
				c.Status = events.StatusApproved
				return c
			}(),
			obs:       Observation{HeadSHA: "h2", Anchor: now, Verdict: verdict(events.StatusApproved), Now: now},
			wantTypes: []events.Type{events.TypeReviewApproved}, wantIDs: [][]string{{"h2", "2"}},
		},
		{
			name: "a failed review workflow escalates once per head", cur: watched,
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Quorum: &review.QuorumResult{Failed: map[string]string{"bot": "503"}}}, Now: now},
			wantTypes: []events.Type{events.TypeReviewInProgress, events.TypeEscalationRequested},
			wantIDs:   [][]string{{"h1", "2"}, {"h1", "e0"}},
			check:     func(t *testing.T, n state.PR) { assert.Equal(t, "h1", n.WorkflowFailedHead) },
		},
		{
			name: "a failed workflow already escalated for the head is not repeated",
			cur: func() state.PR {
				c := watched
				c.Status, c.WorkflowFailedHead = events.StatusInProgress, "h1"
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Quorum: &review.QuorumResult{Failed: map[string]string{"bot": "503"}}}, Now: now},
		},
		{
			name:      "review timeout once, naming the missing reviewers",
			cur:       watched,
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Quorum: &review.QuorumResult{Missing: []string{"copilot"}}}, Now: now.Add(time.Hour)},
			wantTypes: []events.Type{events.TypeReviewInProgress, events.TypeReviewTimeout},
			wantIDs:   [][]string{{"h1", "2"}, {"e0"}},
			check: func(t *testing.T, n state.PR) {
				assert.True(t, n.ReviewTimeoutSent)
				assert.Equal(t, []string{"copilot"}, n.MissingReviewers)
			},
		},
		{
			name: "another quorum bot's response publishes the same status again, saying who is still missing",
			cur: func() state.PR {
				c := watched
				c.Status, c.Transitions, c.MissingReviewers = events.StatusInProgress, 2, []string{"copilot", "gemini"}
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Actor: "coderabbitai[bot]",
				Quorum: &review.QuorumResult{Responded: []string{"coderabbitai[bot]", "copilot"}, Missing: []string{"gemini"}}}, Now: now},
			wantTypes: []events.Type{events.TypeReviewInProgress}, wantIDs: [][]string{{"h1", "3"}},
			check: func(t *testing.T, n state.PR) { assert.Equal(t, []string{"gemini"}, n.MissingReviewers) },
		},
		{
			name: "an unchanged quorum publishes nothing",
			cur: func() state.PR {
				c := watched
				c.Status, c.Transitions, c.MissingReviewers = events.StatusInProgress, 2, []string{"gemini"}
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress,
				Quorum: &review.QuorumResult{Responded: []string{"copilot"}, Missing: []string{"gemini"}}}, Now: now},
		},
		{
			name: "the escalation label is noted while it is on the PR",
			cur:  escalated,
			obs:  Observation{HeadSHA: "h1", Labels: []string{"Human-Review-Required"}, Verdict: verdict(events.StatusChangesRequested), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.True(t, n.EscalationLabelSeen)
				assert.Equal(t, 2, n.FixCycle)
			},
		},
		{
			name: "the label is noted before the escalator recorded its escalation",
			cur:  watched,
			obs:  Observation{HeadSHA: "h1", Labels: []string{"human-review-required"}, Updated: now, Verdict: verdict(events.StatusPending), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.True(t, n.EscalationLabelSeen, "its removal must resume whenever the record lands")
				assert.Equal(t, now, n.EscalationLabelSeenAt)
			},
		},
		{
			name: "a read older than the label's sighting does not undo the escalation",
			cur: func() state.PR {
				c := escalated
				c.EscalationLabelSeen, c.EscalationLabelSeenAt = true, now
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Updated: now.Add(-time.Second), Verdict: verdict(events.StatusChangesRequested), Now: now.Add(time.Minute)},
			check: func(t *testing.T, n state.PR) {
				assert.True(t, n.EscalationLabelSeen)
				assert.NotEmpty(t, n.Escalations)
				assert.Zero(t, n.Epoch)
			},
		},
		{
			name: "after a resume the same failed workflow on the same head escalates again, with a new id",
			cur: func() state.PR {
				c := watched
				c.Status, c.WorkflowFailedHead, c.EscalationLabelSeen = events.StatusInProgress, "h1", true
				c.Escalations = map[events.Reason]time.Time{events.ReasonReviewWorkflowFailed: now}
				return c
			}(),
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress, Quorum: &review.QuorumResult{Failed: map[string]string{"bot": "503"}}}, Now: now},
			wantTypes: []events.Type{events.TypeEscalationResolved, events.TypeReviewInProgress, events.TypeEscalationRequested},
			wantIDs:   [][]string{{"e1"}, {"h1", "2"}, {"h1", "e1"}},
			check:     func(t *testing.T, n state.PR) { assert.Equal(t, 1, n.Epoch) },
		},
		{
			name: "after a resume the review timeout comes again, with a new id",
			cur: func() state.PR {
				c := watched
				c.ReviewTimeoutSent, c.EscalationLabelSeen, c.Epoch = true, true, 3
				c.Escalations = map[events.Reason]time.Time{events.ReasonReviewTimeout: now}
				return c
			}(),
			obs:       Observation{HeadSHA: "h1", Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeEscalationResolved, events.TypeReviewPending}, wantIDs: [][]string{{"e4"}, {"h1", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, 4, n.Epoch)
				assert.Equal(t, now, n.WatchedSince, "the timeout counts from the resume")
				again := decide(n, Observation{HeadSHA: "h1", Verdict: verdict(events.StatusPending), Now: now.Add(3 * time.Hour)}, tm)
				if assert.Len(t, again.Emits, 1) {
					assert.Equal(t, events.TypeReviewTimeout, again.Emits[0].Data.EventType())
					assert.Equal(t, []string{"e4"}, again.Emits[0].Parts, "not the id of the timeout before the resume")
				}
			},
		},
		{
			name: "an escalation whose label never showed is not undone",
			cur:  escalated,
			obs:  Observation{HeadSHA: "h1", Verdict: verdict(events.StatusChangesRequested), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.False(t, n.EscalationLabelSeen)
				assert.NotEmpty(t, n.Escalations)
			},
		},
		{
			name: "removing the escalation label resets the fix cycle and republishes",
			cur: func() state.PR {
				c := escalated
				c.EscalationLabelSeen = true
				return c
			}(),
			obs:       Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusChangesRequested, Feedback: []review.Item{{ID: 9, Author: "alice"}}}, Now: now},
			wantTypes: []events.Type{events.TypeEscalationResolved, events.TypeFeedbackReceived}, wantIDs: [][]string{{"e1"}, {"h1", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Zero(t, n.FixCycle)
				assert.Empty(t, n.Escalations)
				assert.Equal(t, "h1", n.FeedbackHeadSHA)
				assert.Equal(t, 1, n.Epoch, "a new escalation epoch")
				assert.False(t, n.EscalationLabelSeen)
			},
		},
		{
			name: "the merger's own update of an approved head keeps the approval",
			cur: func() state.PR {
				c := watched
				c.Status, c.MergeUpdatedHeadSHA = events.StatusApproved, "h2"
				return c
			}(),
			obs: Observation{HeadSHA: "h2", Anchor: now, Verdict: verdict(events.StatusPending), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h2", n.HeadSHA)
				assert.Equal(t, events.StatusApproved, n.Status)
				assert.Equal(t, now.Add(-time.Hour), n.HeadAnchor, "the approved head's anchor stands")
			},
		},
		{
			name: "changes requested on the merger's updated head still count",
			cur: func() state.PR {
				c := watched
				c.Status, c.HeadSHA, c.MergeUpdatedHeadSHA = events.StatusApproved, "h2", "h2"
				return c
			}(),
			obs:       Observation{HeadSHA: "h2", Verdict: verdict(events.StatusChangesRequested), Now: now},
			wantTypes: []events.Type{events.TypeFeedbackReceived}, wantIDs: [][]string{{"h2", "2"}},
		},
		{
			name: "someone else's push after approval is a new, unreviewed head",
			cur: func() state.PR {
				c := watched
				c.Status, c.MergeUpdatedHeadSHA = events.StatusApproved, "h2"
				return c
			}(),
			obs:       Observation{HeadSHA: "h3", Anchor: now, Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending}, wantIDs: [][]string{{"h3", "2"}},
		},
		{
			name: "a retargeted PR's approval is published anew, for the new base", cur: onMain,
			obs: Observation{HeadSHA: "h1", Base: "release", BaseSince: now, Verdict: verdict(events.StatusApproved), Now: now},
			// The verdict was made with BaseSince: only an approval given
			// since the retarget can be in it.
			wantTypes: []events.Type{events.TypeReviewApproved}, wantIDs: [][]string{{"h1", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "release", n.BaseRef)
				assert.Equal(t, now, n.BaseSince)
			},
		},
		{
			name: "retargeting withdraws the approval: nobody approved the PR on its new base", cur: onMain,
			obs:       Observation{HeadSHA: "h1", Base: "release", BaseSince: now, Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending}, wantIDs: [][]string{{"h1", "2"}},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, events.StatusPending, n.Status)
				assert.Equal(t, now, n.BaseSince)
			},
		},
		{
			name: "retargeting ends the approval the merger's update carried",
			cur: func() state.PR {
				c := onMain
				c.HeadSHA, c.MergeUpdatedHeadSHA = "h2", "h2"
				return c
			}(),
			obs:       Observation{HeadSHA: "h2", Base: "release", BaseSince: now, Verdict: verdict(events.StatusPending), Now: now},
			wantTypes: []events.Type{events.TypeReviewPending}, wantIDs: [][]string{{"h2", "2"}},
			check: func(t *testing.T, n state.PR) { assert.Empty(t, n.MergeUpdatedHeadSHA) },
		},
		{
			name: "the first base seen is where watching began, no retarget",
			cur:  watched,
			obs:  Observation{HeadSHA: "h1", Base: "main", BaseSince: now, Verdict: verdict(events.StatusPending), Now: now},
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "main", n.BaseRef)
				assert.Zero(t, n.BaseSince)
			},
		},
		{
			name: "no timeout once approved", cur: watched,
			obs:       Observation{HeadSHA: "h1", Verdict: verdict(events.StatusApproved), Now: now.Add(5 * time.Hour)},
			wantTypes: []events.Type{events.TypeReviewApproved}, wantIDs: [][]string{{"h1", "2"}},
		},
		{
			name: "no second timeout",
			cur: func() state.PR {
				c := watched
				c.ReviewTimeoutSent = true
				return c
			}(),
			obs: Observation{HeadSHA: "h1", Verdict: verdict(events.StatusPending), Now: now.Add(5 * time.Hour)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decide(tt.cur, tt.obs, tm)
			var types []events.Type
			var ids [][]string
			for _, e := range d.Emits {
				types = append(types, e.Data.EventType())
				ids = append(ids, e.Parts)
				assert.True(t, e.Data.Ref().Same(pr))
			}
			assert.Equal(t, tt.wantTypes, types)
			assert.Equal(t, tt.wantIDs, ids)
			assert.Equal(t, tt.hold, d.Hold)
			if tt.check != nil {
				tt.check(t, d.Next)
			}
		})
	}
}

func TestDecide_IsDeterministic(t *testing.T) {
	t.Parallel()
	cur := state.PR{PR: ghref.PR{Owner: "a", Repo: "b", Number: 2}, HeadSHA: "h", Transitions: 4, Status: events.StatusPending}
	obs := Observation{HeadSHA: "h", Verdict: review.Verdict{Status: events.StatusApproved, Approvers: []string{"x"}}, Now: time.Unix(0, 0)}
	a, b := decide(cur, obs, Timing{}), decide(cur, obs, Timing{})
	assert.Equal(t, a, b, "a retried decision repeats the same event ids, so JetStream drops the repeat")
}

// TestDecide_EventsCarryWhatOtherServicesNeed: the feedback service, the
// merger and the escalator read no record of the poller's, so what they
// need of it travels in its events.
func TestDecide_EventsCarryWhatOtherServicesNeed(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cur := state.PR{
		PR: pr, Status: events.StatusPending, HeadSHA: "h1", HeadAnchor: now.Add(-time.Hour), WatchedSince: now.Add(-3 * time.Hour),
		Transitions: 1, Epoch: 2, FixCycle: 1, Worktree: "/src/w", ContextPath: "specs/x.md", AddressedItems: []string{"c1"},
	}
	tm := Timing{ReviewTimeout: 2 * time.Hour}
	tests := []struct {
		name  string
		obs   Observation
		want  events.Type
		check func(t *testing.T, d events.Data)
	}{
		{
			name: "an approval carries the head's anchor and the epoch", want: events.TypeReviewApproved,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusApproved, Approvers: []string{"alice"}}, Now: now},
			check: func(t *testing.T, d events.Data) {
				a := d.(*events.ReviewApproved)
				assert.Equal(t, now.Add(-time.Hour), a.Anchor)
				assert.Equal(t, 2, a.Epoch)
			},
		},
		{
			name: "an approval names the base it is for, and since when", want: events.TypeReviewApproved,
			obs: Observation{HeadSHA: "h1", Base: "release", BaseSince: now, Verdict: review.Verdict{Status: events.StatusApproved, Approvers: []string{"alice"}}, Now: now},
			check: func(t *testing.T, d events.Data) {
				a := d.(*events.ReviewApproved)
				assert.Equal(t, "release", a.BaseBranch)
				assert.Zero(t, a.BaseSince, "the first base seen is no retarget")
			},
		},
		{
			name: "a change request carries the epoch, the fix cycle, the worktree, the spec, the anchor and what was addressed", want: events.TypeFeedbackReceived,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusChangesRequested, Feedback: []review.Item{{ID: 9, Author: "alice"}}}, Now: now},
			check: func(t *testing.T, d events.Data) {
				f := d.(*events.FeedbackReceived)
				assert.Equal(t, 2, f.Epoch)
				assert.Equal(t, 1, f.FixCycle)
				assert.Equal(t, "/src/w", f.Worktree)
				assert.Equal(t, "specs/x.md", f.ContextPath)
				assert.Equal(t, now.Add(-time.Hour), f.Anchor, "the feedback counts from the head's anchor")
				assert.Equal(t, []string{"c1"}, f.AddressedItems, "what earlier fixes addressed asks for nothing")
			},
		},
		{
			name: "an approval lists the findings set aside", want: events.TypeReviewApproved,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusApproved, Approvers: []string{"copilot"},
				Ignored: []review.Item{{Kind: review.KindReviewComment, ID: 7, Author: "copilot", Path: "main.go", Line: 4, URL: "u", Why: "matches PRLOOP_FINDING_IGNORE pattern nit"}}}, Now: now},
			check: func(t *testing.T, d events.Data) {
				assert.Equal(t, []events.IgnoredFinding{{Author: "copilot", Location: "main.go:4", URL: "u", Reason: "matches PRLOOP_FINDING_IGNORE pattern nit"}},
					d.(*events.ReviewApproved).IgnoredFindings)
			},
		},
		{
			name: "a change request lists the findings set aside", want: events.TypeFeedbackReceived,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusChangesRequested, Feedback: []review.Item{{ID: 9, Author: "copilot"}},
				Ignored: []review.Item{{ID: 7, Author: "copilot", Why: "nit"}}}, Now: now},
			check: func(t *testing.T, d events.Data) {
				f := d.(*events.FeedbackReceived)
				assert.Equal(t, []int64{9}, f.CommentIDs)
				assert.Equal(t, []events.IgnoredFinding{{Author: "copilot", Reason: "nit"}}, f.IgnoredFindings)
			},
		},
		{
			name: "quorum progress names who responded and who is missing", want: events.TypeReviewInProgress,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusInProgress,
				Quorum: &review.QuorumResult{Responded: []string{"a", "b"}, Missing: []string{"gemini"}}}, Now: now.Add(-2 * time.Hour)},
			check: func(t *testing.T, d events.Data) {
				p := d.(*events.ReviewInProgress)
				assert.Equal(t, []string{"a", "b"}, p.QuorumResponded)
				assert.Equal(t, []string{"gemini"}, p.MissingReviewers)
			},
		},
		{
			name: "a review timeout carries the epoch", want: events.TypeReviewTimeout,
			obs:   Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusPending}, Now: now},
			check: func(t *testing.T, d events.Data) { assert.Equal(t, 2, d.(*events.ReviewTimeout).Epoch) },
		},
		{
			name: "a failed review workflow's escalation carries the epoch", want: events.TypeEscalationRequested,
			obs: Observation{HeadSHA: "h1", Verdict: review.Verdict{Status: events.StatusPending, Quorum: &review.QuorumResult{Failed: map[string]string{"bot": "503"}}}, Now: now.Add(-2 * time.Hour)},
			check: func(t *testing.T, d events.Data) {
				assert.Equal(t, 2, d.(*events.EscalationRequested).Epoch)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dec := decide(cur, tt.obs, tm)
			var checked int
			for _, e := range dec.Emits {
				if e.Data.EventType() == tt.want {
					tt.check(t, e.Data)
					checked++
				}
			}
			assert.Equal(t, 1, checked, "one %s among %v", tt.want, dec.Emits)
		})
	}
}
