package merger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/merger"
)

// TestSpeculative_ThePolicyIsReadBeforeTheLastReadOfTheTip: the base's
// .github/prloop.yml (at the tip the candidate was built on, and the
// comparison that says whether the PR changes the file) is read before
// the base tip is read for the last time before the merge call, as the
// serial queue does (commit 067129e). Someone pushes to the base right
// after that comparison: the last read of the tip sees the push, the
// merge waits for a candidate built on the new tip, and main gets the
// tree CI passed. Before, the policy's requests stood between the last
// read of the tip and the merge call (GitHub's merge call guards the head
// only), and GitHub merged the PR onto a tip no candidate was built on:
// an untested tree, reported afterwards (untested_merge).
func TestSpeculative_ThePolicyIsReadBeforeTheLastReadOfTheTip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	e.candidateCI(func(*events.MergeCandidate, []string) string { return "success" })
	client := &pushAfterCompare{Client: e.Client(t), push: e.latePush()}
	e.start(config(speculative, func(c *merger.Config) { c.RepoPolicy = true }), "replica-1", client)
	e.approve(pr, head, "1")

	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.Zero(t, e.rec.Count(pr, events.TypeEscalationRequested), "an untested tree landed: %v", e.rec.Types(pr))
	built := e.candidates(pr, events.CandidateBuilt)
	require.NotEmpty(t, built)
	assert.Equal(t, built[len(built)-1].Tree, e.git("rev-parse", m.MergeSHA+"^{tree}"), "main holds the tree CI passed")
	assert.Contains(t, e.git("ls-tree", "-r", "--name-only", "main"), "late.txt", "the push happened")
	assert.Equal(t, 1, e.routeCount(routeMerge))
	e.waitQueueEmpty()
}
