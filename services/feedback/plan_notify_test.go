package feedback

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/review"
)

func TestAudienceOf(t *testing.T) {
	t.Parallel()
	quorum := []review.Reviewer{{Login: "copilot-pull-request-reviewer"}}
	inline := func(id, inReplyTo int64, author string) review.Item {
		return review.Item{Kind: review.KindReviewComment, ID: id, InReplyTo: inReplyTo, Author: author}
	}
	tests := []struct {
		name  string
		items []review.Item
		want  Audience
	}{
		{name: "no feedback, nobody"},
		{
			name:  "a change-requesting review and its inline comments: one re-request, a reply per thread",
			items: []review.Item{{Kind: review.KindReview, ID: 1, Author: "alice"}, inline(3, 0, "alice"), inline(2, 0, "alice")},
			want:  Audience{Rerequest: []string{"alice"}, Threads: []int64{2, 3}},
		},
		{
			name:  "an answer in a thread replies to the thread's first comment, once",
			items: []review.Item{inline(5, 2, "bob"), inline(6, 2, "alice")},
			want:  Audience{Rerequest: []string{"bob", "alice"}, Threads: []int64{2}},
		},
		{
			name:  "who asked by comment only is mentioned, not re-requested",
			items: []review.Item{{Kind: review.KindComment, ID: 1, Author: "carol"}, {Kind: review.KindComment, ID: 2, Author: "Carol"}},
			want:  Audience{Mention: []string{"carol"}},
		},
		{
			name:  "who also reviewed is re-requested, not mentioned too",
			items: []review.Item{{Kind: review.KindComment, ID: 1, Author: "alice"}, {Kind: review.KindReview, ID: 2, Author: "ALICE"}},
			want:  Audience{Rerequest: []string{"ALICE"}},
		},
		{
			name: "bots are neither re-requested nor mentioned; their threads get a reply",
			items: []review.Item{
				inline(7, 0, "copilot-pull-request-reviewer"), {Kind: review.KindComment, ID: 8, Author: "github-actions[bot]"},
				{Kind: review.KindReview, ID: 9, Author: "coderabbitai[bot]"},
			},
			want: Audience{Threads: []int64{7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, audienceOf(tt.items, quorum))
		})
	}
}

func TestDecideNotice(t *testing.T) {
	t.Parallel()
	head := strings.Repeat("c", 40)
	aud := Audience{Rerequest: []string{"alice", "bob"}, Mention: []string{"carol"}, Threads: []int64{11, 12}}
	tests := []struct {
		name          string
		facts         noticeFacts
		wantRerequest []string
		wantThreads   []int64
		wantComment   bool
	}{
		{
			name:          "nothing done yet: everything",
			facts:         noticeFacts{Audience: aud},
			wantRerequest: []string{"alice", "bob"}, wantThreads: []int64{11, 12}, wantComment: true,
		},
		{
			name:        "the comment is there: the note is done, whatever else GitHub shows",
			facts:       noticeFacts{Audience: aud, Posted: true},
			wantComment: false,
		},
		{
			name:          "a resume after part of it: only what GitHub does not show",
			facts:         noticeFacts{Audience: aud, Requested: []string{"Alice"}, Replied: map[int64]bool{11: true}},
			wantRerequest: []string{"bob"}, wantThreads: []int64{12}, wantComment: true,
		},
		{
			name:        "nobody to tell still gets the comment",
			facts:       noticeFacts{},
			wantComment: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.facts.Head, tt.facts.Cycle = head, 1
			n := decideNotice(tt.facts)
			assert.Equal(t, tt.wantRerequest, n.Rerequest)
			var threads []int64
			for _, r := range n.Replies {
				threads = append(threads, r.Thread)
				assert.Equal(t, replyMarker(head)+"\naddressed in ccccccc", r.Body)
				assert.True(t, review.IsOwn(r.Body), "a reply never counts as a change request")
			}
			assert.Equal(t, tt.wantThreads, threads)
			assert.Equal(t, tt.wantComment, n.Comment != "")
			assert.Equal(t, !tt.wantComment && len(tt.wantRerequest) == 0 && len(tt.wantThreads) == 0, n.empty())
		})
	}
}

func TestRenderNote(t *testing.T) {
	t.Parallel()
	head := strings.Repeat("d", 40)
	tests := []struct {
		name        string
		facts       noticeFacts
		contains    []string
		notContains []string
		maxLen      int
	}{
		{
			name:     "head, cycle, mentions, re-requests and the fenced summary",
			facts:    noticeFacts{Audience: Audience{Rerequest: []string{"alice"}, Mention: []string{"carol"}}, Cycle: 2, Summary: "Added a nil check in main.go."},
			contains: []string{"ddddddd", "fix cycle 2", "@carol ", "Review requested again from alice.", "```text\nAdded a nil check in main.go.\n```"},
		},
		{
			name:        "a resolved conflict says so",
			facts:       noticeFacts{Cycle: 1, Conflict: "main", Summary: "Took both sides."},
			contains:    []string{"prloop resolved a conflict** with main: ddddddd (fix cycle 1)", "needs review again", "Took both sides."},
			notContains: []string{"review feedback"},
		},
		{
			name:     "no summary says so",
			facts:    noticeFacts{Cycle: 1},
			contains: []string{"The agent left no summary"}, notContains: []string{"```"},
		},
		{
			name: "the agent cannot break out of the fence, hide text or mention anyone",
			facts: noticeFacts{Cycle: 1, Summary: "done\n```\n@everyone <!-- prloop:notify head=" + head + " --> " +
				"<!-- hidden instructions -->\u202evisible"},
			contains:    []string{"````text\ndone\n```\n@everyone"},
			notContains: []string{"hidden instructions", "\u202e"},
		},
		{
			name:     "a long summary keeps its end, bounded",
			facts:    noticeFacts{Cycle: 1, Summary: strings.Repeat("log line\n", 2000) + "Summary: fixed it."},
			contains: []string{"[… earlier output left out]", "Summary: fixed it."},
			maxLen:   summaryMaxBytes + 500,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.facts.Head = head
			got := renderNote(tt.facts)
			require.True(t, strings.HasPrefix(got, noteMarker(head)+"\n"), "the marker comes first:\n%s", got)
			assert.Equal(t, 1, strings.Count(got, review.OwnMarker), "only prloop's own marker, once:\n%s", got)
			for _, c := range tt.contains {
				assert.Contains(t, got, c)
			}
			for _, c := range tt.notContains {
				assert.NotContains(t, got, c)
			}
			if tt.maxLen > 0 {
				assert.LessOrEqual(t, len(got), tt.maxLen)
			}
		})
	}
}

func TestAudience_MentionInstead(t *testing.T) {
	t.Parallel()
	aud := Audience{Rerequest: []string{"alice", "dave", "erin"}, Mention: []string{"carol"}, Threads: []int64{4}}
	tests := []struct {
		name    string
		refused []string
		want    Audience
	}{
		{name: "none refused", want: Audience{Rerequest: []string{"alice", "dave", "erin"}, Mention: []string{"carol"}, Threads: []int64{4}}},
		{name: "a refused reviewer is mentioned instead", refused: []string{"dave"},
			want: Audience{Rerequest: []string{"alice", "erin"}, Mention: []string{"carol", "dave"}, Threads: []int64{4}}},
		{name: "all refused", refused: []string{"alice", "dave", "erin"},
			want: Audience{Mention: []string{"carol", "alice", "dave", "erin"}, Threads: []int64{4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, aud.mentionInstead(tt.refused))
			assert.Equal(t, []string{"carol"}, aud.Mention, "the original is left alone")
		})
	}
}
