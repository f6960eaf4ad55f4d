package merger_test

import (
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/services/merger"
)

// speculative is the test configuration of the speculative queue.
func speculative(c *merger.Config) { c.QueueMode, c.QueueDepth = merger.QueueSpeculative, 4 }

// candidateCI is CI for the merger's candidates: it reports status "ci"
// on each candidate built, in the state verdict gives from the
// candidate's event and the files of its tree; "" leaves it pending and
// asks again later.
func (e *env) candidateCI(verdict func(c *events.MergeCandidate, files []string) string) {
	e.candidateChecks(func(c *events.MergeCandidate, files []string) (string, []string) {
		return verdict(c, files), []string{"ci"}
	})
}

// candidateChecks is candidateCI with the statuses chosen by verdict too:
// it sets them all at once, as when every job finishes between two polls.
func (e *env) candidateChecks(verdict func(c *events.MergeCandidate, files []string) (state string, contexts []string)) {
	e.onCandidates(0, func(c *events.MergeCandidate, files []string) bool {
		st, contexts := verdict(c, files)
		return st != "" && e.sim.SetStatuses(e.repo, c.Candidate, st, contexts...) == nil
	})
}

// onCandidates is the test's CI: for each candidate built, once pushed
// and delay after it was first seen pushed, it calls report with the
// candidate's event and the files of its tree until report says it
// reported, polling until the test ends.
func (e *env) onCandidates(delay time.Duration, report func(c *events.MergeCandidate, files []string) bool) {
	t := e.t
	go func() {
		done := map[string]bool{}
		seen := map[string]time.Time{}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, r := range e.rec.All() {
				c, ok := r.Data.(*events.MergeCandidate)
				if !ok || c.State != events.CandidateBuilt || done[c.Candidate] {
					continue
				}
				cmd := exec.Command("git", "--git-dir", e.sim.GitDir(e.repo), "ls-tree", "-r", "--name-only", c.Candidate)
				cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent", "LC_ALL=C"}
				out, err := cmd.Output()
				if err != nil {
					continue // not pushed yet
				}
				if seen[c.Candidate].IsZero() {
					seen[c.Candidate] = time.Now()
				}
				if time.Since(seen[c.Candidate]) < delay {
					continue // CI takes its time
				}
				done[c.Candidate] = report(c, strings.Fields(string(out)))
			}
			select {
			case <-t.Context().Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// candidates returns the PRMergeCandidate events of pr in state.
func (e *env) candidates(pr ghref.PR, state string) []*events.MergeCandidate {
	var out []*events.MergeCandidate
	for _, r := range e.rec.For(pr) {
		if c, ok := r.Data.(*events.MergeCandidate); ok && c.State == state {
			out = append(out, c)
		}
	}
	return out
}

// mergedTree returns the tree of the commit PRMerged says pr became.
func (e *env) mergedTree(pr ghref.PR) string {
	e.t.Helper()
	m := e.rec.Wait(e.t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	return e.git("rev-parse", m.MergeSHA+"^{tree}")
}

// openPRs opens one PR per file, each adding its own file.
func (e *env) openPRs(files ...string) ([]ghref.PR, []string) {
	e.t.Helper()
	var prs []ghref.PR
	var heads []string
	for _, f := range files {
		pr, head := e.openPR("add-"+strings.ToLower(strings.TrimSuffix(f, ".txt")), "Add "+f, map[string]string{f: f + "\n"})
		prs, heads = append(prs, pr), append(heads, head)
	}
	return prs, heads
}

func TestSpeculative_BatchMergesInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt")
	// CI passes nothing until all three ride in candidates, each holding
	// the ones before it; each PR then merges on its own green candidate.
	var green atomic.Bool
	e.candidateCI(func(*events.MergeCandidate, []string) string {
		if green.Load() {
			return "success"
		}
		return ""
	})
	e.start(config(speculative, func(c *merger.Config) { c.DeleteBranch = true }), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	require.Eventually(t, func() bool {
		built := e.candidates(prs[2], events.CandidateBuilt)
		return len(built) > 0 && len(built[len(built)-1].Ahead) == 2
	}, waitFor, 10*time.Millisecond, "c rides behind a and b")
	green.Store(true)

	var seqs []uint64
	for _, pr := range prs {
		seqs = append(seqs, e.rec.Wait(t, pr, events.TypeMerged, waitFor).Seq)
	}
	assert.True(t, slices.IsSorted(seqs), "PRs merged in queue order: %v", seqs)
	assert.Equal(t, 3, e.routeCount(routeMerge), "one merge call per PR")

	last := e.candidates(prs[2], events.CandidateBuilt)
	require.NotEmpty(t, last)
	tested := last[len(last)-1]
	assert.Equal(t, 3, tested.Position)
	assert.Equal(t, []int{prs[0].Number, prs[1].Number}, tested.Ahead)
	assert.Equal(t, tested.Tree, e.git("rev-parse", "main^{tree}"), "main is the tree CI tested")
	for _, pr := range prs {
		built := e.candidates(pr, events.CandidateBuilt)
		require.NotEmpty(t, built, "%s rode in a candidate", pr)
		assert.Equal(t, built[len(built)-1].Tree, e.mergedTree(pr), "main after merging %s is its candidate's tree", pr)
	}
	require.Eventually(t, func() bool {
		return e.git("for-each-ref", "refs/heads/prloop/") == ""
	}, waitFor, 20*time.Millisecond, "candidate branches deleted once the queue is empty")
	assert.Empty(t, e.git("for-each-ref", "refs/heads/add-*"), "PRLOOP_DELETE_BRANCH: the merged PRs' head branches deleted")
	e.waitQueueEmpty()
}

func TestSpeculative_FailingPRInTheMiddleIsRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "BROKEN.txt", "c.txt")
	// The broken candidate fails only once c rides behind it, so that c's
	// candidate must be rebuilt (nothing is stacked on a failed candidate).
	var cBehind atomic.Bool
	e.candidateCI(func(c *events.MergeCandidate, files []string) string {
		if c.PR.Number == prs[2].Number && slices.Contains(c.Ahead, prs[1].Number) {
			cBehind.Store(true)
		}
		if slices.Contains(files, "BROKEN.txt") {
			if !cBehind.Load() {
				return ""
			}
			return "failure"
		}
		return "success"
	})
	e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}

	failed := e.rec.Wait(t, prs[1], events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonChecksFailed, failed.Reason)
	own := e.candidates(prs[1], events.CandidateBuilt)
	require.NotEmpty(t, own)
	assert.Contains(t, failed.Detail, ghref.ShortSHA(own[len(own)-1].Candidate), "names the tested candidate")
	assert.Contains(t, failed.Detail, "status ci", "names the failing check")

	assert.NotEmpty(t, e.mergedTree(prs[0]))
	cTree := e.mergedTree(prs[2])
	assert.Zero(t, e.rec.Count(prs[1], events.TypeMerged), "the failing PR is not merged")
	assert.NotEmpty(t, e.candidates(prs[2], events.CandidateInvalidated), "the candidate after the failing PR is rebuilt")
	rebuilt := e.candidates(prs[2], events.CandidateBuilt)
	assert.Equal(t, rebuilt[len(rebuilt)-1].Tree, cTree, "main is the rebuilt, tested candidate")
	assert.NotContains(t, rebuilt[len(rebuilt)-1].Ahead, prs[1].Number, "the rebuilt candidate leaves the failing PR out")
	assert.NotContains(t, e.git("ls-tree", "-r", "--name-only", "main"), "BROKEN.txt")
	e.waitQueueEmpty()
}

// TestSpeculative_NextCandidatesRunWhileTheBatchMerges: when a batch is
// proven, the PRs after it get their candidates, stacked on the batch,
// before its PRs merge, so that their CI runs meanwhile. The merges leave
// main at the tree those candidates were built on, so they are kept, not
// rebuilt, and main ends on the trees they tested.
func TestSpeculative_NextCandidatesRunWhileTheBatchMerges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt", "d.txt")
	var allQueued atomic.Bool
	e.candidateCI(func(*events.MergeCandidate, []string) string {
		// Green once the whole queue is there (approve waits for each
		// PRMergeQueued), so that c waits behind the batch that is proven
		// first.
		if !allQueued.Load() {
			return ""
		}
		return "success"
	})
	e.start(config(func(c *merger.Config) { c.QueueMode, c.QueueDepth = merger.QueueSpeculative, 2 }), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	allQueued.Store(true)

	firstMerge := e.rec.Wait(t, prs[0], events.TypeMerged, waitFor).Seq
	for i, pr := range prs[2:] {
		tree := e.mergedTree(pr)
		built := e.candidates(pr, events.CandidateBuilt)
		require.Len(t, built, 1, "%s's candidate is built once and kept through the merges", pr)
		require.NotEmpty(t, built[0].Ahead)
		assert.Equal(t, prs[1+i].Number, built[0].Ahead[len(built[0].Ahead)-1], "stacked on the candidate of the PR before it")
		assert.Equal(t, built[0].Tree, tree, "main after merging %s is the tree its candidate tested", pr)
		assert.Empty(t, e.candidates(pr, events.CandidateInvalidated))
	}
	var builtSeqs []uint64
	for _, r := range e.rec.All() {
		if c, ok := r.Data.(*events.MergeCandidate); ok && c.State == events.CandidateBuilt && c.PR.Number == prs[2].Number {
			builtSeqs = append(builtSeqs, r.Seq)
		}
	}
	require.Len(t, builtSeqs, 1)
	assert.Less(t, builtSeqs[0], firstMerge, "c's CI started before the batch ahead of it merged")
	e.waitQueueEmpty()
}

func TestSpeculative_OutsidePushToBaseInvalidatesCandidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt")
	// CI passes only candidates built on the base after the outside push.
	e.candidateCI(func(_ *events.MergeCandidate, files []string) string {
		if slices.Contains(files, "outside.txt") {
			return "success"
		}
		return ""
	})
	e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMergeCandidate, waitFor)
	}
	before := e.candidates(prs[1], events.CandidateBuilt)[0]
	_, err := e.sim.PushCommit(e.repo, "main", "carol", map[string]string{"outside.txt": "pushed by hand\n"}, "Outside change")
	require.NoError(t, err)

	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	}
	for _, pr := range prs {
		gone := e.candidates(pr, events.CandidateInvalidated)
		require.NotEmpty(t, gone, "%s's candidate on the old base is invalidated", pr)
		assert.Equal(t, "the base branch moved", gone[0].Detail)
	}
	final := e.candidates(prs[1], events.CandidateBuilt)
	assert.NotEqual(t, before.Tree, final[len(final)-1].Tree)
	assert.Equal(t, final[len(final)-1].Tree, e.git("rev-parse", "main^{tree}"), "main is the candidate tested on the new base")
	assert.Contains(t, e.git("ls-tree", "-r", "--name-only", "main"), "outside.txt")
}

func TestSpeculative_WithdrawnApprovalLeavesItsCandidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt")
	var green atomic.Bool
	e.candidateCI(func(*events.MergeCandidate, []string) string {
		if green.Load() {
			return "success"
		}
		return ""
	})
	e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMergeCandidate, waitFor)
	}
	e.mu.Lock()
	thumb := e.thumbs[prs[1].Number]
	e.mu.Unlock()
	require.NoError(t, e.sim.RemoveReaction(prs[1], thumb))

	failed := e.rec.Wait(t, prs[1], events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonApprovalWithdrawn, failed.Reason)
	e.rec.Wait(t, prs[2], events.TypeMergeCandidate, waitFor)
	require.Eventually(t, func() bool {
		built := e.candidates(prs[2], events.CandidateBuilt)
		return len(e.candidates(prs[2], events.CandidateInvalidated)) > 0 && slices.Equal(built[len(built)-1].Ahead, []int{prs[0].Number})
	}, waitFor, 10*time.Millisecond, "the candidate of the PR behind the withdrawn one is rebuilt without it")
	green.Store(true)

	e.rec.Wait(t, prs[0], events.TypeMerged, waitFor)
	cTree := e.mergedTree(prs[2])
	assert.Zero(t, e.rec.Count(prs[1], events.TypeMerged))
	built := e.candidates(prs[2], events.CandidateBuilt)
	assert.Equal(t, built[len(built)-1].Tree, cTree)
	assert.NotContains(t, e.git("ls-tree", "-r", "--name-only", "main"), "b.txt")
	e.waitQueueEmpty()
}

func TestSpeculative_ReplicaTakingOverBuildsTheSameCandidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt")
	var green atomic.Bool
	e.candidateCI(func(*events.MergeCandidate, []string) string {
		if green.Load() {
			return "success"
		}
		return ""
	})
	stop := e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMergeCandidate, waitFor)
	}
	stop()
	// The record of the candidates is gone too, as if it had never been
	// written: the new replica builds from GitHub alone.
	require.NoError(t, e.kv.Purge(t.Context(), "batch.acme.widgets.main"))
	e.start(config(speculative), "replica-2")
	green.Store(true)

	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMerged, waitFor)
		assert.Equal(t, 1, e.rec.Count(pr, events.TypeMerged))
		built := e.candidates(pr, events.CandidateBuilt)
		assert.Len(t, built, 1, "the replica taking over built the same commit for %s, whose CI counts", pr)
		assert.Empty(t, e.candidates(pr, events.CandidateInvalidated))
		assert.Equal(t, built[0].Tree, e.mergedTree(pr))
	}
	e.waitQueueEmpty()
}
