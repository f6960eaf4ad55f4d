package merger

import (
	"testing"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// queued is a queue entry for PR n, approved at seq, on head "h<n>".
func queued(n int, seq uint64, mut ...func(*stored)) stored {
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: n}
	s := stored{Entry: Entry{PR: pr, Base: "main", Seq: seq, ApprovedHead: head(n), Head: head(n)}, key: entryKey(pr, "main")}
	for _, m := range mut {
		m(&s)
	}
	return s
}

func head(n int) string { return "h" + string(rune('0'+n)) }

func prio(s *stored) { s.Priority = true }

func numbers(entries []stored) []int {
	out := make([]int, len(entries))
	for i, s := range entries {
		out[i] = s.PR.Number
	}
	return out
}

func TestQueueOrder_PriorityGoesAheadOfEveryPRNotPinned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries []stored
		pinned  []int
		want    []int
	}{
		{name: "first come first served without priority", entries: []stored{queued(3, 30), queued(1, 10), queued(2, 20)}, want: []int{1, 2, 3}},
		{name: "a priority PR approved last goes first", entries: []stored{queued(1, 10), queued(2, 20), queued(3, 30, prio)}, want: []int{3, 1, 2}},
		{name: "arrival order among priority PRs", entries: []stored{queued(4, 40, prio), queued(1, 10), queued(3, 30, prio)}, want: []int{3, 4, 1}},
		{name: "the pinned keep their places ahead of priority", entries: []stored{queued(1, 10), queued(2, 20), queued(3, 30), queued(9, 90, prio)}, pinned: []int{1, 2}, want: []int{1, 2, 9, 3}},
		{name: "pinned in chain order, not arrival order", entries: []stored{queued(1, 10), queued(2, 20), queued(3, 30, prio)}, pinned: []int{3, 1}, want: []int{3, 1, 2}},
		{name: "pinned PRs merged from the front are passed over", entries: []stored{queued(2, 20), queued(3, 30), queued(9, 90, prio)}, pinned: []int{1, 2, 3}, want: []int{2, 3, 9}},
		{name: "pinned only as far as each is queued", entries: []stored{queued(1, 10), queued(3, 30), queued(9, 90, prio)}, pinned: []int{1, 2, 3}, want: []int{1, 9, 3}},
		{name: "equal sequences ordered by key", entries: []stored{queued(2, 10), queued(1, 10)}, want: []int{1, 2}},
		{name: "empty queue", want: []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, numbers(queueOrder(tc.entries, tc.pinned)))
		})
	}
}

func TestPinnedOf_RidersAndSpentStepsKeepTheirPlaces(t *testing.T) {
	t.Parallel()
	cand := func(n int, head string) Candidate {
		return Candidate{PR: ghref.PR{Owner: "acme", Repo: "widgets", Number: n}, Head: head}
	}
	updated := func(s *stored) { s.Head = "u" + s.Head }
	merging := func(s *stored) { s.Intent = &Intent{Kind: intentMerge, Head: s.Head} }
	for _, tc := range []struct {
		name    string
		entries []stored
		batch   Batch
		want    []int
	}{
		{name: "nothing under way", entries: []stored{queued(1, 10), queued(2, 20)}},
		{name: "serial: an updated branch is pinned", entries: []stored{queued(1, 10), queued(2, 20, updated)}, want: []int{2}},
		{name: "serial: a merge under way is pinned", entries: []stored{queued(1, 10, merging)}, want: []int{1}},
		{name: "speculative: the chain's riders in chain order", entries: []stored{queued(1, 10), queued(2, 20), queued(3, 30)},
			batch: Batch{Candidates: []Candidate{cand(2, head(2)), cand(1, head(1))}}, want: []int{2, 1}},
		{name: "speculative: a rider whose head moved ends the pinned prefix", entries: []stored{queued(1, 10), queued(2, 20), queued(3, 30)},
			batch: Batch{Candidates: []Candidate{cand(1, head(1)), cand(2, "old"), cand(3, head(3))}}, want: []int{1}},
		{name: "speculative: riders merged from the front are passed over", entries: []stored{queued(2, 20), queued(3, 30)},
			batch: Batch{Candidates: []Candidate{cand(1, head(1)), cand(2, head(2))}}, want: []int{2}},
		{name: "speculative: a rider that left behind one riding ends the pinned prefix", entries: []stored{queued(1, 10), queued(3, 30)},
			batch: Batch{Candidates: []Candidate{cand(1, head(1)), cand(2, head(2)), cand(3, head(3))}}, want: []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, pinnedOf(tc.entries, tc.batch))
		})
	}
}

func TestReprioritised_AnnouncesThePlaceAndCountsTheChange(t *testing.T) {
	t.Parallel()
	e := queued(3, 30)
	order := queueOrder([]stored{queued(1, 10, func(s *stored) { s.Intent = &Intent{Kind: intentUpdate} }), queued(2, 20), queued(3, 30, prio)}, []int{1})
	tr := reprioritised(e.Entry, true, order, QueueSerial)
	assert.True(t, tr.Next.Priority)
	assert.Equal(t, 1, tr.Next.Reprioritised)
	mq := tr.Events[0].Data.(*events.MergeQueued)
	assert.Equal(t, 2, mq.Position, "behind the PR whose update is under way, ahead of the one that is not")
	assert.Equal(t, []int{1}, mq.Ahead)
	assert.True(t, mq.Priority)
	again := reprioritised(tr.Next, false, order, QueueSerial)
	assert.NotEqual(t, tr.Events[0].Parts, again.Events[0].Parts, "each change is news")
}

func TestHasLabel_ComparesNamesCaseInsensitively(t *testing.T) {
	t.Parallel()
	p := &gh.PullRequest{Labels: []*gh.Label{{Name: gh.String("bug")}, {Name: gh.String("PRLoop:Priority")}}}
	assert.True(t, hasLabel(p, "prloop:priority"))
	assert.False(t, hasLabel(p, "urgent"))
	assert.False(t, hasLabel(p, ""))
}
