package merger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/ghref"
)

func TestChooseMerge_EachMergedPRHasItsOwnCandidateGreen(t *testing.T) {
	t.Parallel()
	G, P, F := ChecksGreen, ChecksPending, ChecksFailed
	for _, tc := range []struct {
		name   string
		states []ChecksState
		want   mergeDecision
	}{
		{name: "nothing built", want: mergeDecision{Stack: true}},
		{name: "first pending waits", states: []ChecksState{P, P}, want: mergeDecision{Stack: true}},
		{name: "first green merges one", states: []ChecksState{G, P, P}, want: mergeDecision{Merge: 1, Stack: true}},
		{name: "pending then green waits for the first: merging PR 1 would put main on its untested tree", states: []ChecksState{P, G}, want: mergeDecision{Stack: true}},
		{name: "green then pending merges the first only", states: []ChecksState{G, P}, want: mergeDecision{Merge: 1, Stack: true}},
		{name: "a later green candidate does not prove the pending ones before it", states: []ChecksState{P, P, G, P}, want: mergeDecision{Stack: true}},
		{name: "a green prefix merges up to the first pending one", states: []ChecksState{G, G, P, G}, want: mergeDecision{Merge: 2, Stack: true}},
		{name: "green, green merges both", states: []ChecksState{G, G}, want: mergeDecision{Merge: 2, Stack: true}},
		{name: "all green merges all", states: []ChecksState{G, G, G, G}, want: mergeDecision{Merge: 4, Stack: true}},
		{name: "first failed removes the first PR", states: []ChecksState{F, G, G}, want: mergeDecision{Remove: 1}},
		{name: "failed, green removes the first PR and merges nothing", states: []ChecksState{F, G}, want: mergeDecision{Remove: 1}},
		{name: "a green after a failed one proves nothing", states: []ChecksState{P, F, G}, want: mergeDecision{}},
		{name: "failed after a green one: that PR broke it and leaves; the green ones merge", states: []ChecksState{G, G, F, G}, want: mergeDecision{Merge: 2, Remove: 3}},
		{name: "a failed one further back waits for the first", states: []ChecksState{P, F}, want: mergeDecision{}},
		{name: "nothing is stacked on a failed candidate", states: []ChecksState{G, F, P}, want: mergeDecision{Merge: 1, Remove: 2}},
		{name: "a failed one after a green one is the culprit even behind a pending one, which does not merge", states: []ChecksState{P, G, F}, want: mergeDecision{Remove: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, chooseMerge(tc.states))
		})
	}
}

func TestCandidates_KeptByWhatTheyTest(t *testing.T) {
	t.Parallel()
	pr := func(n int) ghref.PR { return ghref.PR{Owner: "acme", Repo: "widgets", Number: n} }
	old := []Candidate{
		{PR: pr(1), Head: "h1", Tree: "t1", SHA: "c1"},
		{PR: pr(2), Head: "h2", Tree: "t12", SHA: "c2"},
		{PR: pr(3), Head: "h3", Tree: "t123", SHA: "c3"},
	}
	for _, tc := range []struct {
		name       string
		pr         int
		head, tree string
		want       bool
	}{
		{name: "same PR, head and tree", pr: 2, head: "h2", tree: "t12", want: true},
		{name: "PR 1 merged: candidate 2 moves up and still tests main plus PR 2", pr: 2, head: "h2", tree: "t12", want: true},
		{name: "new head", pr: 2, head: "h2b", tree: "t12b"},
		{name: "base moved: another tree", pr: 1, head: "h1", tree: "t1'"},
		{name: "a PR ahead left: the tree lacks it", pr: 3, head: "h3", tree: "t13"},
		{name: "a PR new to the chain", pr: 4, head: "h4", tree: "t1234"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ok := reusable(old, pr(tc.pr), tc.head, tc.tree)
			assert.Equal(t, tc.want, ok)
		})
	}
	t.Run("invalidated names the dropped candidates of queued PRs only", func(t *testing.T) {
		t.Parallel()
		next := []Candidate{old[0], {PR: pr(3), Head: "h3", Tree: "t13", SHA: "c3b"}}
		queued := func(p ghref.PR) bool { return p.Number != 2 } // PR 2 left
		got := invalidated(old, next, queued)
		assert.Equal(t, []Candidate{old[2]}, got)
	})
}

// statuses is a candidate's checks: each context at success.
func statuses(contexts ...string) ChecksInput {
	in := ChecksInput{Own: "prloop", Combined: &gh.CombinedStatus{}}
	for _, c := range contexts {
		in.Combined.Statuses = append(in.Combined.Statuses, &gh.RepoStatus{Context: gh.String(c), State: gh.String("success")})
	}
	return in
}

func TestJudgeCandidates_ACheckOnOneCandidateIsExpectedOfTheOnesBehindIt(t *testing.T) {
	t.Parallel()
	G, P := ChecksGreen, ChecksPending
	for _, tc := range []struct {
		name     string
		inputs   []ChecksInput
		required []string
		seen     []string
		// heads are the checks that reported on each candidate's PR's head.
		heads    [][]string
		want     []ChecksState
		wantSeen []string
	}{
		{name: "the same checks everywhere", inputs: []ChecksInput{statuses("ci", "lint"), statuses("ci", "lint")},
			want: []ChecksState{G, G}, wantSeen: []string{"ci", "lint"}},
		{name: "lint on the first and not yet on the second", inputs: []ChecksInput{statuses("ci", "lint"), statuses("ci")},
			want: []ChecksState{G, P}, wantSeen: []string{"ci", "lint"}},
		{name: "lint only on the second: not asked of the one ahead", inputs: []ChecksInput{statuses("ci"), statuses("ci", "lint")},
			want: []ChecksState{G, G}, wantSeen: []string{"ci", "lint"}},
		{name: "seen on an earlier pass", inputs: []ChecksInput{statuses("ci")}, seen: []string{"lint"},
			want: []ChecksState{P}, wantSeen: []string{"ci", "lint"}},
		{name: "required and absent", inputs: []ChecksInput{statuses("lint")}, required: []string{"ci"},
			want: []ChecksState{P}, wantSeen: []string{"lint"}},
		{name: "nothing reported is not tested", inputs: []ChecksInput{statuses()},
			want: []ChecksState{P}},
		{name: "prloop's own status is not a check", inputs: []ChecksInput{statuses("prloop", "ci"), statuses("ci")},
			want: []ChecksState{G, G}, wantSeen: []string{"ci"}},
		{name: "a check of the PR's own head not yet on its candidate", inputs: []ChecksInput{statuses("build")},
			heads: [][]string{{"build", "test"}}, want: []ChecksState{P}, wantSeen: []string{"build"}},
		{name: "the own head's checks on its candidate", inputs: []ChecksInput{statuses("build", "test")},
			heads: [][]string{{"build", "test"}}, want: []ChecksState{G}, wantSeen: []string{"build", "test"}},
		{name: "a head's checks are expected of every candidate carrying it", inputs: []ChecksInput{statuses("build", "test"), statuses("build")},
			heads: [][]string{{"test"}, nil}, want: []ChecksState{G, P}, wantSeen: []string{"build", "test"}},
		{name: "not of the candidates ahead of it", inputs: []ChecksInput{statuses("build"), statuses("build", "e2e")},
			heads: [][]string{nil, {"e2e"}}, want: []ChecksState{G, G}, wantSeen: []string{"build", "e2e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _, seen := judgeCandidates(tc.inputs, tc.required, tc.seen, tc.heads)
			var states []ChecksState
			for _, c := range got {
				states = append(states, c.State)
			}
			assert.Equal(t, tc.want, states)
			assert.Equal(t, tc.wantSeen, seen)
		})
	}
}

func TestBlame_AnErrorIsChargedToThePRItIsAbout(t *testing.T) {
	t.Parallel()
	pr := func(n int) ghref.PR { return ghref.PR{Owner: "acme", Repo: "widgets", Number: n} }
	prs := []ghref.PR{pr(1), pr(2), pr(3)}
	down := errors.New("502 from GitHub")
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{name: "about the base or the queue: the first", err: down, want: 0},
		{name: "about the first", err: about(pr(1), down), want: 0},
		{name: "about the second: the second, not the first", err: about(pr(2), down), want: 1},
		{name: "wrapped around the mark", err: fmt.Errorf("read: %w", about(pr(3), down)), want: 2},
		{name: "two PRs behind the first: the earlier", err: errors.Join(about(pr(3), down), about(pr(2), down)), want: 1},
		{name: "a PR and the base: the first", err: errors.Join(about(pr(3), down), down), want: 0},
		{name: "a joined nil is nothing", err: errors.Join(nil, about(pr(2), down)), want: 1},
		{name: "a PR not riding: the first", err: about(pr(9), down), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, blame(tc.err, prs))
		})
	}
	t.Run("about keeps nil and the cause", func(t *testing.T) {
		t.Parallel()
		assert.NoError(t, about(pr(1), nil))
		assert.ErrorIs(t, about(pr(1), down), down)
		assert.Equal(t, down.Error(), about(pr(1), down).Error())
	})
}

func TestRiding_APRInBackoffHoldsOnlyItselfAndThoseBehindIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	queue := func(notBefore ...time.Time) []Entry {
		out := make([]Entry, len(notBefore))
		for i, nb := range notBefore {
			out[i].NotBefore = nb
		}
		return out
	}
	var zero time.Time
	for _, tc := range []struct {
		name    string
		entries []Entry
		depth   int
		want    int
	}{
		{name: "empty", depth: 4, want: 0},
		{name: "all ready, fewer than the depth", entries: queue(zero, zero), depth: 4, want: 2},
		{name: "all ready, capped at the depth", entries: queue(zero, zero, zero, zero, zero), depth: 4, want: 4},
		{name: "the third waits: the first two ride", entries: queue(zero, zero, later, zero), depth: 4, want: 2},
		{name: "a backoff that ended does not hold", entries: queue(zero, earlier, zero), depth: 4, want: 3},
		{name: "the first waits: nobody rides", entries: queue(later, zero), depth: 4, want: 0},
		{name: "a wait beyond the depth changes nothing", entries: queue(zero, zero, later), depth: 2, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, riding(tc.entries, tc.depth, now))
		})
	}
}

func TestBackoff_ErrorsInARowDoubleTheWaitAndGiveUpAtTheBound(t *testing.T) {
	t.Parallel()
	poll := 100 * time.Millisecond
	for _, tc := range []struct {
		name      string
		failures  int
		poll      time.Duration
		wantN     int
		wantDelay time.Duration
		wantGive  bool
	}{
		{name: "first error waits one poll interval", failures: 0, poll: poll, wantN: 1, wantDelay: poll},
		{name: "second doubles it", failures: 1, poll: poll, wantN: 2, wantDelay: 2 * poll},
		{name: "seventh", failures: 6, poll: poll, wantN: 7, wantDelay: 64 * poll},
		{name: "the eighth in a row gives up", failures: maxFailures - 1, poll: poll, wantN: maxFailures, wantGive: true},
		{name: "the wait is capped at five minutes", failures: 6, poll: time.Minute, wantN: 7, wantDelay: 5 * time.Minute},
		{name: "after a reset, an error counts as the first again", failures: 0, poll: time.Minute, wantN: 1, wantDelay: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, delay, giveUp := backoff(tc.failures, tc.poll)
			assert.Equal(t, tc.wantN, n)
			assert.Equal(t, tc.wantDelay, delay)
			assert.Equal(t, tc.wantGive, giveUp)
		})
	}
}
