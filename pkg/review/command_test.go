package review

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

func TestParseCommand_HostileText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		ok   bool
		want Command
	}{
		{name: "plain", body: "/prloop retry", ok: true, want: Command{Name: "retry", Args: []string{}}},
		{name: "first line only", body: "/prloop fix\nplease look at the test\n/prloop stop", ok: true, want: Command{Name: "fix", Args: []string{}}},
		{name: "crlf", body: "/prloop dequeue\r\nthanks", ok: true, want: Command{Name: "dequeue", Args: []string{}}},
		{name: "upper-case command word", body: "/prloop EXPLAIN", ok: true, want: Command{Name: "explain", Args: []string{}}},
		{name: "args", body: "/prloop queue now please", ok: true, want: Command{Name: "queue", Args: []string{"now", "please"}}},
		{name: "tab separator", body: "/prloop\tstop", ok: true, want: Command{Name: "stop", Args: []string{}}},
		{name: "three leading spaces are still a paragraph", body: "   /prloop retry", ok: true, want: Command{Name: "retry", Args: []string{}}},
		{name: "bare prefix: a command line without a command", body: "/prloop", ok: true, want: Command{}},
		{name: "unknown command is still a command line", body: "/prloop deploy-to-prod", ok: true, want: Command{Name: "deploy-to-prod", Args: []string{}}},
		{name: "very long line", body: "/prloop retry " + strings.Repeat("a", MaxCommandLine), ok: true, want: Command{Malformed: "the command line is too long"}},
		{name: "control character", body: "/prloop re\x1btry", ok: true, want: Command{Malformed: "the command line holds control characters"}},
		{name: "invalid utf-8", body: "/prloop retry \xff", ok: true, want: Command{Malformed: "the command line is not UTF-8"}},

		{name: "four leading spaces make a code block", body: "    /prloop retry"},
		{name: "leading tab makes a code block", body: "\t/prloop retry"},
		{name: "leading blank line", body: "\n/prloop retry"},
		{name: "quoted", body: "> /prloop retry"},
		{name: "code fence", body: "```\n/prloop retry\n```"},
		{name: "inline code", body: "`/prloop retry`"},
		{name: "not on the first line", body: "please\n/prloop retry"},
		{name: "prefix of another word", body: "/prloopy retry"},
		{name: "fullwidth solidus", body: "／prloop retry"},
		{name: "cyrillic o", body: "/prlоop retry"},
		{name: "zero-width space before", body: "\u200b/prloop retry"},
		{name: "no-break space after the prefix", body: "/prloop\u00a0retry"},
		{name: "upper-case prefix", body: "/PRLOOP retry"},
		{name: "mid-sentence", body: "try /prloop retry"},
		{name: "empty", body: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseCommand(tt.body)
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, tt.want, got)
			}
			assert.Equal(t, tt.ok, IsCommand(tt.body))
		})
	}
}

func TestCommand_Known(t *testing.T) {
	t.Parallel()
	for _, n := range Commands {
		assert.True(t, Command{Name: n}.Known(), n)
	}
	assert.False(t, Command{Name: "deploy"}.Known())
	assert.False(t, Command{}.Known())
}

func TestMayCommand_SameRuleAsReviewers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		user User
		want bool
	}{
		{name: "writer", user: alice, want: true},
		{name: "no write access", user: mallory},
		{name: "the PR's author", user: agent},
		{name: "prloop itself", user: self},
		{name: "a bot", user: copilot},
		{name: "no login", user: User{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, MayCommand(tt.user, head, emojiOnly, writers))
			// The same user's comment counts as feedback exactly when they
			// may give commands: one rule.
			v := Evaluate(Signals{Comments: []Comment{comment(1, tt.user, "please rename x", after)}}, head, emojiOnly, writers)
			assert.Equal(t, tt.want, v.Status == events.StatusChangesRequested)
		})
	}
}

func TestEvaluate_CommandIsNeverFeedback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		comments []Comment
		want     events.Status
		items    int
	}{
		{name: "known command", comments: []Comment{comment(1, alice, "/prloop fix", after)}, want: events.StatusPending},
		{name: "unknown command", comments: []Comment{comment(1, alice, "/prloop deploy\nand rename x", after)}, want: events.StatusPending},
		{name: "command beside feedback", comments: []Comment{comment(1, alice, "/prloop retry", after), comment(2, bob, "rename x", after)}, want: events.StatusChangesRequested, items: 1},
		{name: "quoted command is feedback", comments: []Comment{comment(1, alice, "> /prloop retry\nno: rename x", after)}, want: events.StatusChangesRequested, items: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Evaluate(Signals{Comments: tt.comments}, head, emojiOnly, writers)
			assert.Equal(t, tt.want, v.Status)
			assert.Len(t, v.Feedback, tt.items)
		})
	}
}

func TestFixItems_WhatTheProtocolsDidNotAskFor(t *testing.T) {
	t.Parallel()
	remark := comment(1, alice, "please document this", after)
	tests := []struct {
		name string
		sig  Signals
		head Head
		pol  Policy
		want []int64
	}{
		{name: "reviews only: a remark is no change request, but fix hands it over", sig: Signals{Comments: []Comment{remark}}, head: head, pol: reviewsOnly, want: []int64{1}},
		{name: "emoji: the change request itself", sig: Signals{Comments: []Comment{remark}}, head: head, pol: emojiOnly, want: []int64{1}},
		{name: "the command itself is not feedback", sig: Signals{Comments: []Comment{comment(2, alice, "/prloop fix", after)}}, head: head, pol: reviewsOnly},
		{name: "someone who may not approve", sig: Signals{Comments: []Comment{comment(3, mallory, "do it", after)}}, head: head, pol: reviewsOnly},
		{name: "older than the head", sig: Signals{Comments: []Comment{comment(4, alice, "old", before)}}, head: head, pol: reviewsOnly},
		{name: "prloop's own", sig: Signals{Comments: []Comment{comment(5, alice, OwnMarker+"x -->", after)}}, head: head, pol: reviewsOnly},
		{
			name: "already addressed", sig: Signals{Comments: []Comment{remark}}, pol: reviewsOnly,
			head: Head{SHA: "head", Anchor: t0, Author: "agent", Addressed: map[string]bool{ItemKey(KindComment, 1): true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Evaluate(tt.sig, tt.head, tt.pol, writers)
			var ids []int64
			for _, it := range FixItems(v, tt.sig, tt.head, tt.pol, writers) {
				ids = append(ids, it.ID)
			}
			assert.Equal(t, tt.want, ids)
		})
	}
}

func TestFixCommanded_ChecksTheCommentOnGitHub(t *testing.T) {
	t.Parallel()
	sig := Signals{Comments: []Comment{
		comment(1, alice, "/prloop fix", after), comment(2, mallory, "/prloop fix", after), comment(3, alice, "/prloop stop", after),
	}}
	assert.True(t, FixCommanded(sig, 1, head, reviewsOnly, writers))
	assert.False(t, FixCommanded(sig, 2, head, reviewsOnly, writers), "not someone who may approve")
	assert.False(t, FixCommanded(sig, 3, head, reviewsOnly, writers), "another command")
	assert.False(t, FixCommanded(sig, 4, head, reviewsOnly, writers), "no such comment (a forged event)")
}
