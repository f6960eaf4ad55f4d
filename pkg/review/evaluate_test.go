package review

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // the head's anchor
	before = t0.Add(-time.Hour)
	after  = t0.Add(time.Minute)
	head   = Head{SHA: "head", Anchor: t0, Author: "agent"}

	alice   = User{Login: "alice"}
	bob     = User{Login: "bob"}
	mallory = User{Login: "mallory"} // no write access
	agent   = User{Login: "agent"}   // the PR's author
	self    = User{Login: "prloop-bot"}
	copilot = User{Login: "copilot-pull-request-reviewer", Bot: true}
	actions = User{Login: "github-actions[bot]"}
)

func writers(login string) bool { return login == "alice" || login == "bob" }

var (
	emojiOnly   = Policy{Protocols: []Protocol{ProtocolEmoji}, Self: "prloop-bot"}
	reviewsOnly = Policy{Protocols: []Protocol{ProtocolReviews}, Self: "prloop-bot"}
	quorumPol   = Policy{
		Protocols:       []Protocol{ProtocolQuorum},
		Quorum:          []Reviewer{{Login: "copilot-pull-request-reviewer"}, {Login: "github-actions[bot]", Marker: "OpenAI Code Review"}},
		FailurePatterns: DefaultFailurePatterns,
		FindingIgnore:   mustCompile(DefaultFindingIgnore),
	}
)

func mustCompile(patterns []string) []*regexp.Regexp {
	res, err := CompileFindingIgnore(patterns)
	if err != nil {
		panic(err)
	}
	return res
}

func react(u User, content string, at time.Time) Reaction {
	return Reaction{ID: at.Unix(), Content: content, User: u, CreatedAt: at}
}

func comment(id int64, u User, body string, at time.Time) Comment {
	return Comment{ID: id, User: u, Body: body, CreatedAt: at}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		sig           Signals
		pol           Policy
		want          events.Status
		wantActor     string
		wantFeedback  []int64
		wantApprovers []string
		addressed     []string
	}{
		{name: "no signals is pending", pol: emojiOnly, want: events.StatusPending},
		{
			name: "feedback a fix addressed never asks again, even in the anchor's second", pol: Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolReviews}},
			sig: Signals{
				Comments:       []Comment{comment(1, alice, "rename x", t0), comment(3, bob, "and y", after)},
				ReviewComments: []ReviewComment{{ID: 2, User: alice, Path: "a.go", Line: 1, Body: "x", CreatedAt: t0}},
				Reviews:        []Review{{ID: 1, User: bob, State: "CHANGES_REQUESTED", CommitID: "head", SubmittedAt: t0}},
			},
			addressed: []string{ItemKey(KindComment, 1), ItemKey(KindReviewComment, 2), ItemKey(KindReview, 1)},
			want:      events.StatusChangesRequested, wantActor: "bob", wantFeedback: []int64{3},
		},
		{
			name: "an addressed id of one kind does not hide another kind's item", pol: emojiOnly,
			sig:       Signals{ReviewComments: []ReviewComment{{ID: 1, User: alice, Path: "a.go", Line: 1, Body: "x", CreatedAt: after}}},
			addressed: []string{ItemKey(KindComment, 1)},
			want:      events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{1},
		},
		{
			name: "ThumbsUpBeatsEyes", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(bob, "eyes", after), react(alice, "+1", after)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "EyesBeatsComments", pol: emojiOnly,
			sig: Signals{Reactions: []Reaction{react(alice, "eyes", after)}, Comments: []Comment{comment(1, alice, "rename x", after)}},
			// The change request is held back while the review goes on.
			want: events.StatusInProgress, wantActor: "alice", wantFeedback: []int64{1},
		},
		{
			name: "comments without emoji request changes", pol: emojiOnly,
			sig: Signals{
				Comments:       []Comment{comment(1, alice, "rename x", after)},
				ReviewComments: []ReviewComment{{ID: 2, User: bob, Path: "a.go", Line: 3, Body: "nil check", CreatedAt: after.Add(time.Second)}},
			},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{1, 2},
		},
		{
			name: "humans' nits are never classified: they request changes", pol: Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolQuorum}, Quorum: quorumPol.Quorum, FindingIgnore: quorumPol.FindingIgnore},
			sig: Signals{
				Comments:       []Comment{comment(1, alice, "Nit: rename x", after)},
				ReviewComments: []ReviewComment{{ID: 2, User: bob, Path: "a.go", Line: 3, Body: "Consider a shorter name.", CreatedAt: after}},
			},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{1, 2},
		},
		{
			name: "thumbs up before the push does not approve", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", before)}},
			want: events.StatusPending,
		},
		{
			name: "thumbs up before the push approves when approval survives", pol: Policy{Protocols: []Protocol{ProtocolEmoji}, ApprovalSurvivesPush: true},
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", before)}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "eyes before the push is stale", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(alice, "eyes", before)}},
			want: events.StatusPending,
		},
		{
			name: "comments answered by a fix do not request changes again", pol: emojiOnly,
			sig:  Signals{Comments: []Comment{comment(1, alice, "rename x", before)}, ReviewComments: []ReviewComment{{ID: 2, User: alice, Path: "a.go", Line: 1, Body: "x", CreatedAt: before}}},
			want: events.StatusPending,
		},
		{
			name: "a comment in the anchor's second counts", pol: emojiOnly,
			sig:  Signals{Comments: []Comment{comment(1, alice, "one more thing", t0)}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{1},
		},
		{
			name: "the PR author's signals never count", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(agent, "+1", after)}, Comments: []Comment{comment(1, agent, "done", after)}},
			want: events.StatusPending,
		},
		{
			name: "prloop's own signals never count", pol: emojiOnly,
			sig:  Signals{Comments: []Comment{comment(1, self, "escalated", after)}, Reactions: []Reaction{react(self, "+1", after)}},
			want: events.StatusPending,
		},
		{
			name: "unauthorized users do not count", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(mallory, "+1", after)}, Comments: []Comment{comment(1, mallory, "merge it", after)}},
			want: events.StatusPending,
		},
		{
			name: "another bot's eyes do not mean in review", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(copilot, "eyes", after), react(User{Login: "coderabbitai[bot]"}, "eyes", after)}},
			want: events.StatusPending,
		},
		{
			name: "other reactions mean nothing", pol: emojiOnly,
			sig:  Signals{Reactions: []Reaction{react(alice, "heart", after), react(alice, "-1", after)}},
			want: events.StatusPending,
		},
		{
			name: "latest review per reviewer: approval after changes requested", pol: reviewsOnly,
			sig: Signals{Reviews: []Review{
				{ID: 1, User: alice, State: "CHANGES_REQUESTED", Body: "fix", CommitID: "head", SubmittedAt: after},
				{ID: 2, User: alice, State: "APPROVED", CommitID: "head", SubmittedAt: after.Add(time.Minute)},
			}},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "latest review per reviewer: changes requested after approval", pol: reviewsOnly,
			sig: Signals{
				Reviews: []Review{
					{ID: 1, User: alice, State: "APPROVED", CommitID: "head", SubmittedAt: after},
					{ID: 2, User: alice, State: "CHANGES_REQUESTED", Body: "wait", CommitID: "head", SubmittedAt: after.Add(time.Minute)},
				},
				ReviewComments: []ReviewComment{
					{ID: 10, ReviewID: 2, User: alice, Path: "b.go", Line: 9, Body: "off by one", CommitID: "head", CreatedAt: after.Add(time.Minute)},
					{ID: 11, ReviewID: 99, User: alice, Path: "c.go", Line: 1, Body: "other review", CommitID: "head", CreatedAt: after},
				},
			},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{2, 10},
		},
		{
			name: "a COMMENTED review does not clear changes requested", pol: reviewsOnly,
			sig: Signals{Reviews: []Review{
				{ID: 1, User: alice, State: "CHANGES_REQUESTED", Body: "fix", CommitID: "head", SubmittedAt: after},
				{ID: 2, User: alice, State: "COMMENTED", Body: "also", CommitID: "head", SubmittedAt: after.Add(time.Minute)},
			}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{1},
		},
		{
			name: "a dismissed review counts for nothing", pol: reviewsOnly,
			sig: Signals{Reviews: []Review{
				{ID: 1, User: alice, State: "CHANGES_REQUESTED", Body: "fix", CommitID: "head", SubmittedAt: after},
				{ID: 2, User: alice, State: "DISMISSED", CommitID: "head", SubmittedAt: after.Add(time.Minute)},
			}},
			want: events.StatusPending,
		},
		{
			name: "reviews of an older head do not count", pol: reviewsOnly,
			sig: Signals{Reviews: []Review{
				{ID: 1, User: alice, State: "APPROVED", CommitID: "old", SubmittedAt: after},
				{ID: 2, User: bob, State: "CHANGES_REQUESTED", Body: "x", CommitID: "old", SubmittedAt: after},
			}},
			want: events.StatusPending,
		},
		{
			name: "bots' native reviews count only through the quorum", pol: reviewsOnly,
			sig:  Signals{Reviews: []Review{{ID: 1, User: copilot, State: "APPROVED", CommitID: "head", SubmittedAt: after}}},
			want: events.StatusPending,
		},
		{
			name: "another reviewer's change request blocks an approval", pol: reviewsOnly,
			sig: Signals{Reviews: []Review{
				{ID: 1, User: alice, State: "APPROVED", CommitID: "head", SubmittedAt: after},
				{ID: 2, User: bob, State: "CHANGES_REQUESTED", Body: "x", CommitID: "head", SubmittedAt: after},
			}},
			want: events.StatusChangesRequested, wantActor: "bob", wantFeedback: []int64{2},
		},
		{
			name: "strongest verdict across protocols", pol: Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolReviews}},
			sig: Signals{
				Reactions: []Reaction{react(bob, "eyes", after)},
				Reviews:   []Review{{ID: 1, User: alice, State: "APPROVED", CommitID: "head", SubmittedAt: after}},
			},
			want: events.StatusApproved, wantActor: "alice", wantApprovers: []string{"alice"},
		},
		{
			name: "prloop's own marked comments never ask for changes, whoever posted them", pol: Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolReviews}, Self: "prloop-bot"},
			sig: Signals{
				// Another prloop on the repository posts under a login with
				// write access: only the marker tells its notes apart.
				Comments: []Comment{comment(1, alice, OwnMarker+"notify head=abc -->\nFix ready in abc", after), comment(2, self, "fix pushed", after)},
				ReviewComments: []ReviewComment{
					{ID: 3, User: bob, Path: "a.go", Line: 1, Body: OwnMarker + "notify reply -->\naddressed in abc", CreatedAt: after, InReplyTo: 9},
				},
				Reviews: []Review{{ID: 4, User: bob, State: "CHANGES_REQUESTED", Body: OwnMarker + "notify -->", CommitID: "head", SubmittedAt: after}},
			},
			want: events.StatusPending,
		},
		{
			name: "a human's answer in a thread prloop replied to still counts", pol: emojiOnly,
			sig: Signals{ReviewComments: []ReviewComment{
				{ID: 3, User: self, Path: "a.go", Line: 1, Body: OwnMarker + "notify reply -->\naddressed in abc", CreatedAt: after, InReplyTo: 1},
				{ID: 4, User: alice, Path: "a.go", Line: 1, Body: "still nil here", CreatedAt: after, InReplyTo: 1},
			}},
			want: events.StatusChangesRequested, wantActor: "alice", wantFeedback: []int64{4},
		},
		{
			name: "a disabled protocol is ignored", pol: reviewsOnly,
			sig:  Signals{Reactions: []Reaction{react(alice, "+1", after)}},
			want: events.StatusPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := head
			if tt.addressed != nil {
				h.Addressed = map[string]bool{}
				for _, k := range tt.addressed {
					h.Addressed[k] = true
				}
			}
			assertVerdict(t, Evaluate(tt.sig, h, tt.pol, writers), tt.want, tt.wantActor, tt.wantApprovers, tt.wantFeedback)
		})
	}
}

// assertVerdict checks a verdict's status, actor, approvers and the ids of
// its feedback.
func assertVerdict(t *testing.T, v Verdict, status events.Status, actor string, approvers []string, feedback []int64) {
	t.Helper()
	assert.Equal(t, status, v.Status)
	assert.Equal(t, actor, v.Actor)
	assert.Equal(t, approvers, v.Approvers)
	var ids []int64
	for _, it := range v.Feedback {
		ids = append(ids, it.ID)
	}
	assert.Equal(t, feedback, ids)
}

func TestEvaluate_Quorum(t *testing.T) {
	t.Parallel()
	openAI := func(id int64, body string, at time.Time) Comment {
		return comment(id, actions, "## OpenAI Code Review\n"+body, at)
	}
	copilotReview := Review{ID: 50, User: copilot, State: "COMMENTED", Body: "Copilot reviewed 3 files", CommitID: "head", SubmittedAt: after}
	tests := []struct {
		name         string
		sig          Signals
		want         events.Status
		wantMissing  []string
		wantFailed   map[string]string
		wantFeedback []int64
		wantIgnored  []int64
	}{
		{
			name: "nobody responded", want: events.StatusPending,
			wantMissing: []string{"copilot-pull-request-reviewer", "github-actions[bot]/OpenAI Code Review"},
		},
		{
			name: "one of two responded", want: events.StatusInProgress,
			sig:         Signals{Reviews: []Review{copilotReview}},
			wantMissing: []string{"github-actions[bot]/OpenAI Code Review"},
		},
		{
			name: "all responded without findings approves", want: events.StatusApproved,
			sig: Signals{Reviews: []Review{copilotReview}, Comments: []Comment{openAI(1, "LGTM, no issues found.", after)}},
		},
		{
			name: "an inline finding requests changes", want: events.StatusChangesRequested,
			sig: Signals{
				Reviews:        []Review{copilotReview},
				ReviewComments: []ReviewComment{{ID: 7, ReviewID: 50, User: copilot, Path: "main.go", Line: 4, Body: "err is ignored", CommitID: "head", CreatedAt: after}},
				Comments:       []Comment{openAI(1, "No issues.", after)},
			},
			wantFeedback: []int64{7},
		},
		{
			name: "a quorum bot's comment carrying prloop's marker is no finding", want: events.StatusApproved,
			sig: Signals{
				Reviews:        []Review{copilotReview},
				ReviewComments: []ReviewComment{{ID: 7, ReviewID: 50, User: copilot, Path: "main.go", Line: 4, Body: OwnMarker + "notify reply -->\nerr is ignored", CommitID: "head", CreatedAt: after}},
				Comments:       []Comment{openAI(1, "No issues.", after)},
			},
		},
		{
			name: "a bot outside the quorum replying to prloop asks for nothing", want: events.StatusApproved,
			sig: Signals{
				Reviews: []Review{copilotReview},
				ReviewComments: []ReviewComment{
					{ID: 8, User: self, Path: "main.go", Line: 4, Body: OwnMarker + "notify reply -->\naddressed in abc", CommitID: "head", CreatedAt: after, InReplyTo: 7},
					{ID: 9, User: User{Login: "coderabbitai[bot]"}, Path: "main.go", Line: 4, Body: "err is still ignored", CommitID: "head", CreatedAt: after, InReplyTo: 7},
				},
				Comments: []Comment{openAI(1, "No issues.", after)},
			},
		},
		{
			name: "a quorum bot replying to prloop with a finding requests changes", want: events.StatusChangesRequested,
			sig: Signals{
				Reviews: []Review{copilotReview},
				ReviewComments: []ReviewComment{
					{ID: 8, User: self, Path: "main.go", Line: 4, Body: OwnMarker + "notify reply -->\naddressed in abc", CommitID: "head", CreatedAt: after, InReplyTo: 7},
					{ID: 9, ReviewID: 51, User: copilot, Path: "main.go", Line: 4, Body: "err is still ignored", CommitID: "head", CreatedAt: after, InReplyTo: 7},
				},
				Comments: []Comment{openAI(1, "No issues.", after)},
			},
			wantFeedback: []int64{9},
		},
		{
			name: "the marker tells bots sharing a login apart", want: events.StatusInProgress,
			sig: Signals{
				Reviews:  []Review{copilotReview},
				Comments: []Comment{comment(1, actions, "Lint passed", after)}, // another workflow, no marker
			},
			wantMissing: []string{"github-actions[bot]/OpenAI Code Review"},
		},
		{
			name: "a response before the push does not count", want: events.StatusInProgress,
			sig:         Signals{Reviews: []Review{copilotReview}, Comments: []Comment{openAI(1, "No issues.", before)}},
			wantMissing: []string{"github-actions[bot]/OpenAI Code Review"},
		},
		{
			name: "a review of an older head does not count", want: events.StatusPending,
			sig:         Signals{Reviews: []Review{{ID: 50, User: copilot, State: "COMMENTED", CommitID: "old", SubmittedAt: after}}},
			wantMissing: []string{"copilot-pull-request-reviewer", "github-actions[bot]/OpenAI Code Review"},
		},
		{
			name: "a failed review workflow is reported and does not approve", want: events.StatusInProgress,
			sig:        Signals{Reviews: []Review{copilotReview}, Comments: []Comment{openAI(1, "Review failed: API Error 503 from upstream", after)}},
			wantFailed: map[string]string{"github-actions[bot]/OpenAI Code Review": "API Error"},
		},
		{
			name: "findings are deduplicated across reviewers", want: events.StatusChangesRequested,
			sig: Signals{
				Reviews: []Review{copilotReview, {ID: 60, User: actions, State: "COMMENTED", Body: "## OpenAI Code Review", CommitID: "head", SubmittedAt: after}},
				ReviewComments: []ReviewComment{
					{ID: 7, ReviewID: 50, User: copilot, Path: "main.go", Line: 4, Body: "Error is ignored here.", CommitID: "head", CreatedAt: after},
					{ID: 8, ReviewID: 60, User: actions, Path: "main.go", Line: 4, Body: "error is  ignored here.", CommitID: "head", CreatedAt: after.Add(time.Second)},
					{ID: 9, ReviewID: 60, User: actions, Path: "main.go", Line: 5, Body: "error is ignored here.", CommitID: "head", CreatedAt: after.Add(time.Second)},
				},
			},
			wantFeedback: []int64{7, 9},
		},
		{
			name: "a quorum where one bot only nit-picks approves, and lists the nits", want: events.StatusApproved,
			sig: Signals{
				Reviews: []Review{copilotReview},
				ReviewComments: []ReviewComment{
					{ID: 7, ReviewID: 50, User: copilot, Path: "main.go", Line: 4, Body: "Nit: `x` could be named `count`.", CommitID: "head", CreatedAt: after},
					{ID: 8, ReviewID: 50, User: copilot, Path: "main.go", Line: 9, Body: "Consider adding a doc comment.", CommitID: "head", CreatedAt: after.Add(time.Second)},
				},
				Comments: []Comment{openAI(1, "No issues.", after)},
			},
			wantIgnored: []int64{7, 8},
		},
		{
			name: "a bug with a suggestion requests changes; the nit beside it is listed", want: events.StatusChangesRequested,
			sig: Signals{
				Reviews: []Review{copilotReview},
				ReviewComments: []ReviewComment{
					{ID: 7, ReviewID: 50, User: copilot, Path: "main.go", Line: 4, Body: "Nit: trailing space.", CommitID: "head", CreatedAt: after},
					{ID: 8, ReviewID: 50, User: copilot, Path: "main.go", Line: 9, Body: "Bug: the error is dropped.\n\n```suggestion\nreturn err\n```", CommitID: "head", CreatedAt: after.Add(time.Second)},
				},
				Comments: []Comment{openAI(1, "No issues.", after)},
			},
			wantFeedback: []int64{8}, wantIgnored: []int64{7},
		},
		{
			name: "a nit-picking review that requests changes does not", want: events.StatusApproved,
			sig: Signals{
				Reviews:  []Review{{ID: 50, User: copilot, State: "CHANGES_REQUESTED", Body: "_🧹 Nitpick_: prefer `any` to `interface{}`.", CommitID: "head", SubmittedAt: after}},
				Comments: []Comment{openAI(1, "No issues.", after)},
			},
			wantIgnored: []int64{50},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Evaluate(tt.sig, head, quorumPol, writers)
			assert.Equal(t, tt.want, v.Status)
			if assert.NotNil(t, v.Quorum) {
				assert.Equal(t, tt.wantMissing, v.Quorum.Missing)
				if tt.wantFailed == nil {
					tt.wantFailed = map[string]string{}
				}
				assert.Equal(t, tt.wantFailed, v.Quorum.Failed)
			}
			var ids []int64
			for _, it := range v.Feedback {
				ids = append(ids, it.ID)
			}
			assert.Equal(t, tt.wantFeedback, ids)
			var ignored []int64
			for _, it := range v.Ignored {
				ignored = append(ignored, it.ID)
				assert.NotEmpty(t, it.Why, "an ignored finding says why")
			}
			assert.Equal(t, tt.wantIgnored, ignored)
		})
	}
}

func TestEvaluate_AuthorizerCalledOncePerLogin(t *testing.T) {
	t.Parallel()
	calls := map[string]int{}
	auth := func(login string) bool { calls[login]++; return true }
	sig := Signals{
		Reactions: []Reaction{react(alice, "eyes", after), react(alice, "+1", after)},
		Comments:  []Comment{comment(1, alice, "a", after), comment(2, User{Login: "Alice"}, "b", after)},
	}
	Evaluate(sig, head, Policy{Protocols: []Protocol{ProtocolEmoji, ProtocolReviews}}, auth)
	assert.Equal(t, map[string]int{"alice": 1}, calls)
}

func TestParseReviewers(t *testing.T) {
	t.Parallel()
	got := ParseReviewers(" copilot-pull-request-reviewer, github-actions[bot]/OpenAI Code Review ,,")
	assert.Equal(t, []Reviewer{{Login: "copilot-pull-request-reviewer"}, {Login: "github-actions[bot]", Marker: "OpenAI Code Review"}}, got)
	assert.Empty(t, ParseReviewers(""))
}

func TestDedupe_KeepsOldestAndOrders(t *testing.T) {
	t.Parallel()
	items := []Item{
		{ID: 3, Path: "a.go", Line: 1, Body: "Same thing", CreatedAt: after.Add(2 * time.Second)},
		{ID: 1, Path: "a.go", Line: 1, Body: "same   THING", CreatedAt: after},
		{ID: 2, Body: "same thing", CreatedAt: after.Add(time.Second)},
	}
	got := Dedupe(items)
	assert.Equal(t, []int64{1, 2}, []int64{got[0].ID, got[1].ID})
	assert.Len(t, got, 2)
	assert.Equal(t, int64(3), items[0].ID, "input left untouched")
}
