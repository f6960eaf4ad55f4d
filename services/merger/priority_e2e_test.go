package merger_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/services/merger"
)

// queuedAs waits for pr's PRMergeQueued saying priority, and returns it.
func (e *env) queuedAs(pr ghref.PR, priority bool) *events.MergeQueued {
	e.t.Helper()
	var got *events.MergeQueued
	require.Eventually(e.t, func() bool {
		for _, r := range e.rec.For(pr) {
			if q, ok := r.Data.(*events.MergeQueued); ok && q.Priority == priority {
				got = q
			}
		}
		return got != nil
	}, waitFor, 10*time.Millisecond, "%s queued with priority %v", pr, priority)
	return got
}

// mergeOrder waits for every PR's PRMerged and returns the PRs' numbers in
// the order they merged.
func (e *env) mergeOrder(prs ...ghref.PR) []int {
	e.t.Helper()
	type merged struct {
		n   int
		seq uint64
	}
	var all []merged
	for _, pr := range prs {
		all = append(all, merged{pr.Number, e.rec.Wait(e.t, pr, events.TypeMerged, waitFor).Seq})
	}
	slices.SortFunc(all, func(a, b merged) int { return int(a.seq) - int(b.seq) })
	out := make([]int, len(all))
	for i, m := range all {
		out[i] = m.n
	}
	return out
}

// TestPriority_SerialPRLabelledWhileQueuedMergesFirst: a PR approved last
// and labelled prloop:priority while it waits goes ahead of the PRs
// approved before it, the first of them included while it only waits for
// its own checks, and merges first; the others follow in arrival order.
func TestPriority_SerialPRLabelledWhileQueuedMergesFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, headA := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
	b, headB := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
	p, headP := e.openPR("hotfix", "Fix p", map[string]string{"p.txt": "p\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, headA, "ci", "pending"))
	e.start(config(), "replica-1")
	e.approve(a, headA, "1")
	e.approve(b, headB, "1")
	e.approve(p, headP, "1")
	q := e.queuedAs(p, false)
	assert.Equal(t, 3, q.Position)
	assert.Zero(t, e.routeCount(routeMerge), "a holds the queue while its check is pending")

	_, err := e.Client(t).AddLabels(t.Context(), p, merger.DefaultPriorityLabel)
	require.NoError(t, err)
	q = e.queuedAs(p, true)
	assert.Equal(t, 1, q.Position, "the label takes effect while queued")
	assert.Empty(t, q.Ahead)

	e.rec.Wait(t, p, events.TypeMerged, waitFor)
	require.NoError(t, e.sim.SetStatus(e.repo, headA, "ci", "success"))
	// a is behind main now: prloop updates it, and CI passes the new head.
	upd := e.rec.Wait(t, a, events.TypeBranchUpdated, waitFor).Data.(*events.BranchUpdated)
	require.NoError(t, e.sim.SetStatus(e.repo, upd.HeadSHA, "ci", "success"))
	assert.Equal(t, []int{p.Number, a.Number, b.Number}, e.mergeOrder(a, b, p))
	e.waitQueueEmpty()
}

// readCounter is the merger's GitHub client counting the reads of each PR.
type readCounter struct {
	merger.GitHub
	mu    sync.Mutex
	reads map[int]int
}

func (c *readCounter) GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error) {
	c.mu.Lock()
	c.reads[pr.Number]++
	c.mu.Unlock()
	return c.GitHub.GetPull(ctx, pr)
}

func (c *readCounter) of(pr ghref.PR) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[pr.Number]
}

// TestPriority_SpeculativePREntersTheNextBatchFirst: a priority PR
// approved last does not throw away the candidates already running (they
// would merge before it anyway); it rides first in the next batch, ahead
// of a PR approved before it.
func TestPriority_SpeculativePREntersTheNextBatchFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt")
	a, b, c := prs[0], prs[1], prs[2]
	p, headP := e.openPR("hotfix", "Fix p", map[string]string{"p.txt": "p\n"})
	_, err := e.Client(t).AddLabels(t.Context(), p, merger.DefaultPriorityLabel)
	require.NoError(t, err)
	var green atomic.Bool
	e.candidateCI(func(*events.MergeCandidate, []string) string {
		if green.Load() {
			return "success"
		}
		return ""
	})
	client := &readCounter{GitHub: e.Client(t), reads: map[int]int{}}
	e.start(config(speculative, func(c *merger.Config) { c.QueueDepth = 2 }), "replica-1", client)
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	require.Eventually(t, func() bool {
		return len(e.candidates(b, events.CandidateBuilt)) > 0
	}, waitFor, 10*time.Millisecond, "a and b ride in candidates")
	e.approve(p, headP, "1")
	q := e.queuedAs(p, true)
	assert.Equal(t, 3, q.Position, "behind the candidates running, ahead of c")
	assert.Equal(t, []int{a.Number, b.Number}, q.Ahead)
	// A pass that began before p was queued does not know it, and would
	// stack c behind the batch when CI turns green (then c is running).
	// The next pass reads p first: from then on CI may pass.
	read := client.of(p)
	require.Eventually(t, func() bool { return client.of(p) > read }, waitFor, 5*time.Millisecond)
	green.Store(true)

	assert.Equal(t, []int{a.Number, b.Number, p.Number, c.Number}, e.mergeOrder(a, b, c, p))
	assert.Empty(t, e.candidates(a, events.CandidateInvalidated), "the running candidates were kept")
	assert.Empty(t, e.candidates(b, events.CandidateInvalidated))
	e.waitQueueEmpty()
}
