package merger_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/services/merger"
)

// mergeWatch is the merger's GitHub client, watched: before each merge
// call it notes the trees CI has passed so far, and after it the commit
// the base moved to; and it counts the merger's reads of each commit's
// combined status.
type mergeWatch struct {
	merger.GitHub
	// passed returns the trees CI has passed up to now.
	passed func() map[string]bool

	mu sync.Mutex
	// merges holds, for each merge call that succeeded, the commit it made
	// and the trees CI had passed when the call began.
	merges []watchedMerge
	reads  map[string]int
}

type watchedMerge struct {
	pr     ghref.PR
	sha    string
	passed map[string]bool
}

func (w *mergeWatch) Merge(ctx context.Context, pr ghref.PR, opts github.MergeOptions) (*gh.PullRequestMergeResult, error) {
	passed := w.passed()
	res, err := w.GitHub.Merge(ctx, pr, opts)
	if err == nil {
		w.mu.Lock()
		w.merges = append(w.merges, watchedMerge{pr: pr, sha: res.GetSHA(), passed: passed})
		w.mu.Unlock()
	}
	return res, err
}

func (w *mergeWatch) GetCombinedStatus(ctx context.Context, repo ghref.Repo, ref string) (*gh.CombinedStatus, error) {
	w.mu.Lock()
	w.reads[ref]++
	w.mu.Unlock()
	return w.GitHub.GetCombinedStatus(ctx, repo, ref)
}

// statusReads is how often the merger read ref's combined status.
func (w *mergeWatch) statusReads(ref string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads[ref]
}

// passedTrees returns the trees of the candidates built so far whose
// status ci is success on GitHub now.
func (e *env) passedTrees() map[string]bool {
	out := map[string]bool{}
	for _, r := range e.rec.All() {
		c, ok := r.Data.(*events.MergeCandidate)
		if !ok || c.State != events.CandidateBuilt {
			continue
		}
		h, err := e.sim.StatusHistory(e.repo, c.Candidate, "ci")
		if err == nil && len(h) > 0 && h[len(h)-1].State == "success" {
			out[c.Tree] = true
		}
	}
	return out
}

// TestSpeculative_MainNeverSitsOnAnUntestedTree: the candidate of PR 1
// (base + a) is slow and PR 2's (base + a + b) fast. Merging a before its
// own candidate passed would leave main, until b's merge, on a tree CI
// has not finished; if b's merge were then refused, main would stay
// there. So a merges only once its own candidate is green, and every
// commit main moves to, the one between the two merges included, has a
// tree CI passed before the merge call that made it.
func TestSpeculative_MainNeverSitsOnAnUntestedTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "b.txt")
	start := e.git("rev-parse", "main")
	w := &mergeWatch{GitHub: e.Client(t), passed: e.passedTrees, reads: map[string]int{}}

	var mu sync.Mutex
	var second string // b's candidate, once green
	var readsThen int // the merger's reads of its status by then
	e.candidateCI(func(c *events.MergeCandidate, _ []string) string {
		mu.Lock()
		defer mu.Unlock()
		if c.PR.Number == prs[1].Number {
			second, readsThen = c.Candidate, w.statusReads(c.Candidate)
			return "success"
		}
		// a's candidate finishes only after the merger has read b's green
		// candidate three times: it had every chance to act on it.
		if second != "" && w.statusReads(second)-readsThen >= 3 {
			return "success"
		}
		return ""
	})
	e.start(config(speculative), "replica-1", w)
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.mergedTree(pr)
	}

	w.mu.Lock()
	merges := append([]watchedMerge(nil), w.merges...)
	w.mu.Unlock()
	made := map[string]bool{}
	for _, m := range merges {
		made[m.sha] = true
		tree := e.git("rev-parse", m.sha+"^{tree}")
		assert.True(t, m.passed[tree], "merging %s moved main to %s, whose tree %s CI had not passed when the merge call began", m.pr, ghref.ShortSHA(m.sha), ghref.ShortSHA(tree))
	}
	moves := strings.Fields(e.git("rev-list", "--first-parent", start+"..main"))
	require.Len(t, moves, 2, "main moved once per PR")
	for _, sha := range moves {
		assert.True(t, made[sha], "main moved to %s, which no watched merge made", ghref.ShortSHA(sha))
	}
	e.waitQueueEmpty()
}
