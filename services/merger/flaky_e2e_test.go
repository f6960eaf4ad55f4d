package merger_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/services/merger"
)

// candidateWorkflows is GitHub Actions CI for the merger's candidates: on
// each candidate built, once pushed and after delay, it records a
// completed workflow run "ci" with the job job gives from the candidate's
// event and the files of its tree (its Reruns script the re-runs).
func (e *env) candidateWorkflows(delay time.Duration, job func(c *events.MergeCandidate, files []string) ghsim.JobInput) {
	e.onCandidates(delay, func(c *events.MergeCandidate, files []string) bool {
		_, _, err := e.sim.RunWorkflow(e.repo, c.Candidate, "ci", job(c, files))
		return err == nil
	})
}

// flakyOn is a job "test" that passes, except on a candidate holding
// file, where it fails and its re-runs end as reruns say.
func flakyOn(file string, reruns ...string) func(*events.MergeCandidate, []string) ghsim.JobInput {
	return func(_ *events.MergeCandidate, files []string) ghsim.JobInput {
		if slices.Contains(files, file) {
			return ghsim.JobInput{Name: "test", Conclusion: "failure", Title: "1 test failed", Reruns: reruns}
		}
		return ghsim.JobInput{Name: "test", Conclusion: "success"}
	}
}

func retryFailed(c *merger.Config) { c.RetryFailed = true }

// mergeFlaky queues a and b, b's candidate failing once and passing on
// the re-run of its failed job, with the re-run on; it returns the two
// PRs once both merged, b never removed.
func (e *env) mergeFlaky() []ghref.PR {
	e.t.Helper()
	prs, heads := e.openPRs("a.txt", "FLAKY.txt")
	e.candidateWorkflows(0, flakyOn("FLAKY.txt", "success"))
	e.start(config(speculative, retryFailed), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.rec.Wait(e.t, pr, events.TypeMerged, waitFor)
	}
	assert.Zero(e.t, e.rec.Count(prs[1], events.TypeMergeFailed), "the flaky PR is not removed")
	return prs
}

// TestSpeculative_AFlakyCandidateIsRerunAndMerges: b's candidate fails
// once and passes on the re-run of its failed job (ghsim's script: fail,
// then pass). Its failed jobs are re-run once instead of removing b,
// PRMergeCandidate says so, b merges on the same candidate, and the pass
// is counted as flaky.
func TestSpeculative_AFlakyCandidateIsRerunAndMerges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs := e.mergeFlaky()
	rerun := e.candidates(prs[1], events.CandidateRerun)
	require.Len(t, rerun, 1, "one re-run, said once")
	assert.Contains(t, rerun[0].Detail, "test")
	assert.Equal(t, 1, e.sim.Reruns(), "GitHub was asked to re-run the failed jobs once")
	built := e.candidates(prs[1], events.CandidateBuilt)
	require.NotEmpty(t, built)
	assert.Equal(t, built[len(built)-1].Tree, e.mergedTree(prs[1]), "merged on the candidate that was re-run")
	assert.Equal(t, rerun[0].Candidate, built[len(built)-1].Candidate)
	require.Eventually(t, func() bool { return e.metric("prloop_merge_candidate_reruns_total", "result", "flaky") == 1 }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 1.0, e.metric("prloop_merge_candidate_reruns_total", "result", "rerun"))
	e.waitQueueEmpty()
}

// TestSpeculative_AFlakyCandidateMergingAtOnceIsCounted: a lone flaky PR's
// re-run passes and it merges in the pass that saw it pass: its mark is
// stored before the merge, and it is counted once, not again as it merges.
func TestSpeculative_AFlakyCandidateMergingAtOnceIsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("FLAKY.txt")
	e.candidateWorkflows(0, flakyOn("FLAKY.txt", "success"))
	e.start(config(speculative, retryFailed), "replica-1")
	e.approve(prs[0], heads[0], "1")

	e.rec.Wait(t, prs[0], events.TypeMerged, waitFor)
	assert.Equal(t, 1, e.sim.Reruns())
	require.Eventually(t, func() bool { return e.metric("prloop_merge_candidate_reruns_total", "result", "flaky") == 1 }, waitFor, 10*time.Millisecond,
		"the flaky pass counted")
	e.waitQueueEmpty()
	assert.Equal(t, 1.0, e.metric("prloop_merge_candidate_reruns_total", "result", "flaky"), "once")
}

// TestSpeculative_EveryFlakyCandidateIsCountedOnce: of four PRs tested
// two at a time, the first and the third fail once and pass on their
// re-runs: each is counted as flaky once, whether its mark was stored
// before it merged or it merged in the pass that saw its re-run pass,
// with the PRs behind it stacked on it (a chain built before the mark).
func TestSpeculative_EveryFlakyCandidateIsCountedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("FLAKY-1.txt", "b.txt", "FLAKY-3.txt", "d.txt")
	e.candidateWorkflows(0, func(_ *events.MergeCandidate, files []string) ghsim.JobInput {
		// The candidates that add a flaky file fail once: FLAKY-1's
		// (without b), and FLAKY-3's (both flaky files, without d).
		n := 0
		for _, f := range files {
			if strings.HasPrefix(f, "FLAKY-") {
				n++
			}
		}
		if n > 0 && !slices.Contains(files, "b.txt") || n == 2 && !slices.Contains(files, "d.txt") {
			return ghsim.JobInput{Name: "test", Conclusion: "failure", Title: "1 test failed", Reruns: []string{"success"}}
		}
		return ghsim.JobInput{Name: "test", Conclusion: "success"}
	})
	e.start(config(speculative, retryFailed, func(c *merger.Config) { c.QueueDepth = 2 }), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	}
	e.waitQueueEmpty()
	rerun := 0
	for _, pr := range prs {
		rerun += len(e.candidates(pr, events.CandidateRerun))
	}
	require.Equal(t, 2, rerun, "the two flaky candidates were re-run")
	require.Eventually(t, func() bool { return e.metric("prloop_merge_candidate_reruns_total", "result", "flaky") >= 2 }, waitFor, 10*time.Millisecond,
		"each flaky pass counted: %v", e.metric("prloop_merge_candidate_reruns_total", "result", "flaky"))
	assert.Equal(t, 2.0, e.metric("prloop_merge_candidate_reruns_total", "result", "flaky"), "each once")
}

// TestSpeculative_AnUnansweredRerunRequestIsMadeAgain: GitHub answers the
// first request to re-run b's failed jobs with a 502 (a POST is never
// retried by the client: it may have acted). The next pass asks again, the
// re-run passes and b merges, instead of waiting PRLOOP_CHECKS_TIMEOUT for
// a re-run that never started and then leaving.
func TestSpeculative_AnUnansweredRerunRequestIsMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/actions/runs/\d+/rerun-failed-jobs$`, Kind: ghsim.FaultStatus502})
	prs := e.mergeFlaky()
	assert.Equal(t, 1, e.sim.Reruns(), "GitHub re-ran the failed jobs once: the request it did not answer did nothing")
	assert.Len(t, e.candidates(prs[1], events.CandidateRerun), 1, "said once, when GitHub took it")
	e.waitQueueEmpty()
}

// TestSpeculative_ACandidateFailingItsRerunLeaves: the re-run fails too:
// b is removed as its failed candidate would have been, after exactly one
// re-run, and nothing is counted as flaky.
func TestSpeculative_ACandidateFailingItsRerunLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "BROKEN.txt")
	e.candidateWorkflows(0, flakyOn("BROKEN.txt", "failure"))
	e.start(config(speculative, retryFailed), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}

	failed := e.rec.Wait(t, prs[1], events.TypeMergeFailed, waitFor).Data.(*events.MergeFailed)
	assert.Equal(t, events.ReasonChecksFailed, failed.Reason)
	e.rec.Wait(t, prs[0], events.TypeMerged, waitFor)
	assert.Equal(t, 1, e.sim.Reruns(), "re-run once, never twice")
	assert.Len(t, e.candidates(prs[1], events.CandidateRerun), 1)
	assert.Zero(t, e.metric("prloop_merge_candidate_reruns_total", "result", "flaky"))
	e.waitQueueEmpty()
}

// TestSpeculative_WithoutRetryTheCulpritLeavesAtOnce: with
// PRLOOP_QUEUE_RETRY_FAILED off, a failed candidate's PR leaves without
// a re-run, as before.
func TestSpeculative_WithoutRetryTheCulpritLeavesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prs, heads := e.openPRs("a.txt", "FLAKY.txt")
	e.candidateWorkflows(0, flakyOn("FLAKY.txt", "success"))
	e.start(config(speculative), "replica-1")
	for i, pr := range prs {
		e.approve(pr, heads[i], "1")
	}
	e.rec.Wait(t, prs[1], events.TypeMergeFailed, waitFor)
	assert.Zero(t, e.sim.Reruns())
	assert.Empty(t, e.candidates(prs[1], events.CandidateRerun))
}

// TestSpeculative_QueuedPRsCarryAnETAOnceCIIsMeasured: the first PRs are
// queued with the ETA unknown; once three candidates' CI times are
// measured (from the push to the verdict, at least the CI's delay each),
// a PR queued later carries a known estimate, and the base's record holds
// the measurements.
func TestSpeculative_QueuedPRsCarryAnETAOnceCIIsMeasured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const ci = 300 * time.Millisecond
	prs, heads := e.openPRs("a.txt", "b.txt", "c.txt", "d.txt")
	e.candidateWorkflows(ci, flakyOn("none"))
	e.start(config(speculative), "replica-1")
	for i, pr := range prs[:3] {
		e.approve(pr, heads[i], "1")
	}
	for _, pr := range prs[:3] {
		q := e.rec.Wait(t, pr, events.TypeMergeQueued, waitFor).Data.(*events.MergeQueued)
		require.NotNil(t, q.ETA, "the merger estimates")
		assert.False(t, q.ETA.Known, "nothing measured yet")
		assert.Equal(t, 4, q.ETA.Depth)
		e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	}
	var ciTimes merger.CITimes
	require.Eventually(t, func() bool {
		v, err := e.kv.Get(t.Context(), "ci."+strings.Join([]string{e.repo.Owner, e.repo.Name, "main"}, "."))
		return err == nil && json.Unmarshal(v.Value(), &ciTimes) == nil && len(ciTimes.Candidates) >= 3
	}, waitFor, 10*time.Millisecond, "three candidates measured")
	for _, s := range ciTimes.Candidates {
		assert.GreaterOrEqual(t, s.Took, ci, "from the push to the verdict")
	}

	e.approve(prs[3], heads[3], "1")
	q := e.rec.Wait(t, prs[3], events.TypeMergeQueued, waitFor).Data.(*events.MergeQueued)
	require.NotNil(t, q.ETA)
	assert.True(t, q.ETA.Known, "three measurements make an estimate: %+v", q.ETA)
	assert.GreaterOrEqual(t, q.ETA.Measurements, 3)
	assert.GreaterOrEqual(t, q.ETA.Seconds, ci.Seconds(), "one CI run at least")
	assert.Equal(t, q.ETA.CIMedianSeconds, q.ETA.Seconds, "first in line: one batch")
	e.rec.Wait(t, prs[3], events.TypeMerged, waitFor)
}
