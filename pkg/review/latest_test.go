package review

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

// TestEvaluate_LatestSignalOfEachReviewerWins: a reviewer's latest signal
// wins across protocols (emoji reactions, comments, native reviews), by the
// time GitHub recorded for it, and any current change request from an
// authorized reviewer (or the quorum) blocks every approval. An approval is
// for a head on a base: one older than the PR's retargeting counts for
// nothing.
func TestEvaluate_LatestSignalOfEachReviewerWins(t *testing.T) {
	t.Parallel()
	both := Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolReviews}, Self: "prloop-bot"}
	survives := both
	survives.ApprovalSurvivesPush = true
	withQuorum := Policy{
		Protocols: []Protocol{ProtocolEmoji, ProtocolReviews, ProtocolQuorum}, Self: "prloop-bot",
		Quorum: []Reviewer{{Login: copilot.Login}}, FindingIgnore: quorumPol.FindingIgnore,
	}
	twoBots := withQuorum
	twoBots.Quorum = append([]Reviewer{{Login: actions.Login}}, withQuorum.Quorum...)
	t1, t2, t3 := after, after.Add(time.Minute), after.Add(2*time.Minute)
	review := func(id int64, u User, state, commit string, at time.Time) Review {
		return Review{ID: id, User: u, State: state, Body: state + " by " + u.Login, CommitID: commit, SubmittedAt: at}
	}
	copilotClean := review(50, copilot, "COMMENTED", "head", t1)
	copilotFinding := ReviewComment{ID: 51, ReviewID: 50, User: copilot, Path: "a.go", Line: 1, Body: "Bug: err is dropped.", CommitID: "head", CreatedAt: t1}
	tests := []struct {
		name          string
		sig           Signals
		pol           Policy
		baseSince     time.Time
		want          events.Status
		wantActor     string
		wantFeedback  []int64
		wantApprovers []string
	}{
		{
			name: "👍 then a native request for changes withdraws the approval", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1)}, Reviews: []Review{review(7, alice, "CHANGES_REQUESTED", "head", t2)}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{7},
		},
		{
			name: "a native approval then a comment asking for changes withdraws the approval", pol: both,
			sig:  Signals{Reviews: []Review{review(7, alice, "APPROVED", "head", t1)}, Comments: []Comment{comment(8, alice, "wait, this breaks X", t2)}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{8},
		},
		{
			name: "a native request for changes then a later 👍 approves", pol: both,
			sig:  Signals{Reviews: []Review{review(7, alice, "CHANGES_REQUESTED", "head", t1)}, Reactions: []Reaction{react(alice, "+1", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "comments then a later native approval approves", pol: both,
			sig:  Signals{Comments: []Comment{comment(8, alice, "rename x", t1)}, Reviews: []Review{review(7, alice, "APPROVED", "head", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "only what a reviewer asked after their last approval is asked", pol: both,
			sig: Signals{
				Comments:  []Comment{comment(8, alice, "rename x", t1), comment(9, alice, "and y", t3)},
				Reviews:   []Review{review(7, alice, "APPROVED", "head", t2)},
				Reactions: []Reaction{react(bob, "+1", t1)},
			},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{9},
		},
		{
			name: "a 👍 and a comment in the same second: the change request wins", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1.Add(300*time.Millisecond))}, Comments: []Comment{comment(8, alice, "one thing", t1)}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{8},
		},
		{
			name: "one reviewer approves, another asks for changes: blocked", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t2)}, Comments: []Comment{comment(8, bob, "not like this", t1)}},
			want: events.StatusChangesRequested, wantActor: "bob", wantFeedback: []int64{8},
		},
		{
			name: "both reviewers approve", pol: both,
			sig:  Signals{Reactions: []Reaction{react(bob, "+1", t2)}, Reviews: []Review{review(7, alice, "APPROVED", "head", t1)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice", "bob"},
		},
		{
			name: "an unauthorized user's change request does not block", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1)}, Reviews: []Review{review(7, mallory, "CHANGES_REQUESTED", "head", t2)}, Comments: []Comment{comment(8, mallory, "no", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "the PR author's comment does not withdraw an approval", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1)}, Comments: []Comment{comment(8, agent, "thanks!", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "an APPROVED review's own inline notes are part of the approval", pol: both,
			sig: Signals{
				Reviews:        []Review{review(7, alice, "APPROVED", "head", t1)},
				ReviewComments: []ReviewComment{{ID: 9, ReviewID: 7, User: alice, Path: "a.go", Line: 2, Body: "nice", CommitID: "head", CreatedAt: t1}},
			},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "a dismissed change request does not bring back the approval it withdrew", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1)}, Reviews: []Review{review(7, alice, "DISMISSED", "head", t2)}},
			want: events.StatusPending,
		},
		{
			name: "a 👍 older than the head is no approval, and does not bring back an older request", pol: both,
			sig:  Signals{Reviews: []Review{review(7, alice, "CHANGES_REQUESTED", "head", before)}, Reactions: []Reaction{react(alice, "+1", before.Add(time.Minute))}},
			want: events.StatusPending,
		},
		{
			name: "an approval that survives the push outlives a change request the push answered", pol: survives,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", before)}, Reviews: []Review{review(7, alice, "CHANGES_REQUESTED", "old", before.Add(time.Minute))}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "a 👀 holds a change request back, and still no approval", pol: both,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1), react(bob, "eyes", t1)}, Reviews: []Review{review(7, bob, "CHANGES_REQUESTED", "head", t2)}},
			want: events.StatusInProgress, wantActor: "bob", wantFeedback: []int64{7},
		},
		{
			name: "quorum: a human's change request blocks the bots' approval", pol: withQuorum,
			sig:  Signals{Reviews: []Review{copilotClean}, Comments: []Comment{comment(8, alice, "rename x", t2)}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{8},
		},
		{
			name: "quorum: a bot's finding blocks a human's approval", pol: withQuorum,
			sig:  Signals{Reviews: []Review{copilotClean}, ReviewComments: []ReviewComment{copilotFinding}, Reactions: []Reaction{react(alice, "+1", t2)}},
			want: events.StatusChangesRequested, wantActor: copilot.Login, wantFeedback: []int64{51},
		},
		{
			name: "quorum: the bots and a human approve", pol: withQuorum,
			sig:  Signals{Reviews: []Review{copilotClean}, Reactions: []Reaction{react(alice, "+1", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice", copilot.Login},
		},
		{
			name: "quorum: bots still reviewing hold a human's change request back", pol: twoBots,
			sig:  Signals{Comments: []Comment{comment(1, copilot, "reviewing…", t1), comment(8, alice, "rename x", t2)}},
			want: events.StatusInProgress, wantActor: copilot.Login, wantFeedback: []int64{8},
		},
		{
			name: "retargeted: a 👍 given before the base changed approves nothing", pol: both, baseSince: t2,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t1)}},
			want: events.StatusPending,
		},
		{
			name: "retargeted: a native approval of the same head before the base changed approves nothing", pol: survives, baseSince: t2,
			sig:  Signals{Reviews: []Review{review(7, alice, "APPROVED", "head", t1)}},
			want: events.StatusPending,
		},
		{
			name: "retargeted: an approval after the base changed approves", pol: both, baseSince: t2,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", t2)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "retargeted: a change request from before still blocks", pol: both, baseSince: t2,
			sig:  Signals{Reviews: []Review{review(7, bob, "CHANGES_REQUESTED", "head", t1)}, Reactions: []Reaction{react(alice, "+1", t3)}},
			want: events.StatusChangesRequested, wantActor: "bob", wantFeedback: []int64{7},
		},
		{
			name: "retargeted: the quorum must respond again", pol: withQuorum, baseSince: t2,
			sig:  Signals{Reviews: []Review{copilotClean}},
			want: events.StatusPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := head
			h.BaseSince = tt.baseSince
			assertVerdict(t, Evaluate(tt.sig, h, tt.pol, writers), tt.want, tt.wantActor, tt.wantApprovers, tt.wantFeedback)
		})
	}
}

// TestLatestVerdicts: the fold itself. The latest signal of each reviewer
// wins; at the same second a change request comes last; consecutive change
// requests add up; logins compare case-insensitively.
func TestLatestVerdicts(t *testing.T) {
	t.Parallel()
	t1, t2 := after, after.Add(time.Minute)
	req := func(login string, id int64, at time.Time) signal {
		return signal{login: login, at: at, stance: stanceRequest, items: []Item{{ID: id, Author: login}}}
	}
	ok := func(login string, at time.Time) signal { return signal{login: login, at: at, stance: stanceApprove} }
	none := func(login string, at time.Time) signal { return signal{login: login, at: at, stance: stanceNone} }
	type got struct {
		login string
		stance
		items []int64
	}
	tests := []struct {
		name    string
		signals []signal
		want    []got
	}{
		{name: "nothing", want: []got{}},
		{name: "a request after an approval", signals: []signal{req("alice", 1, t2), ok("alice", t1)}, want: []got{{"alice", stanceRequest, []int64{1}}}},
		{name: "an approval after a request", signals: []signal{ok("alice", t2), req("alice", 1, t1)}, want: []got{{"alice", stanceApprove, nil}}},
		{name: "the same second: the request is later", signals: []signal{req("alice", 1, t1), ok("alice", t1.Add(999*time.Millisecond))}, want: []got{{"alice", stanceRequest, []int64{1}}}},
		{name: "requests add up after the last approval", signals: []signal{req("alice", 1, t1), ok("alice", t1.Add(time.Second)), req("alice", 2, t2), req("Alice", 3, t2.Add(time.Second))}, want: []got{{"alice", stanceRequest, []int64{2, 3}}}},
		{name: "a withdrawal that approves nothing", signals: []signal{ok("alice", t1), none("alice", t2)}, want: []got{{"alice", stanceNone, nil}}},
		{name: "reviewers are separate, ordered by their latest signal", signals: []signal{req("bob", 1, t2), ok("alice", t1)}, want: []got{{"alice", stanceApprove, nil}, {"bob", stanceRequest, []int64{1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := []got{}
			for _, v := range latestVerdicts(tt.signals) {
				g := got{login: v.login, stance: v.stance}
				for _, it := range v.items {
					g.items = append(g.items, it.ID)
				}
				out = append(out, g)
			}
			assert.Equal(t, tt.want, out)
		})
	}
}
