package poller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_ChecksFailed_OncePerFailureAndFlakyPass: the poller publishes
// a head's failing required check once, holds the head until the feedback
// service answers, publishes nothing more while the failure stands, and
// counts a flaky pass when the re-run passes. It logs the requests
// detection costs (BENCHMARKS.md).
func TestPoller_ChecksFailed_OncePerFailureAndFlakyPass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	require.NoError(t, e.sim.SetRuleset(e.repo, "main", ghsim.RequiredChecks{Contexts: []string{"test"}}))
	require.NoError(t, e.sim.SetStatus(e.repo, info.HeadSHA, "prloop", "failure")) // prloop's own: never a check
	runID, jobs, err := e.sim.RunWorkflow(e.repo, info.HeadSHA, "CI",
		ghsim.JobInput{Name: "test", Conclusion: "failure", Log: "FAIL\n", Reruns: []string{"success"}},
		ghsim.JobInput{Name: "lint", Conclusion: "failure"}) // not required
	require.NoError(t, err)
	e.start(e.config(func(c *poller.Config) { c.StatusContext = "prloop" }))
	e.sim.ResetStats()
	e.watch(e.pr)

	cf := e.rec.Wait(t, e.pr, events.TypeChecksFailed, waitFor).Data.(*events.ChecksFailed)
	assert.Equal(t, 1, cf.Round)
	require.Len(t, cf.Checks, 1, "only the required check, never prloop's own")
	assert.Equal(t, "test", cf.Checks[0].Name)
	assert.Equal(t, jobs[0], cf.Checks[0].ID)
	assert.True(t, cf.Checks[0].Actions)
	e.waitProbes(5)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeChecksFailed), "a failure is news once")
	st := e.sim.Stats()
	for _, route := range []string{"GET /repos/{owner}/{repo}/rules/branches/{branch}", "GET /repos/{owner}/{repo}/commits/{ref}/status", "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"} {
		t.Logf("%-60s %d (counted %d)", route, st.ByRoute[route], st.ByRouteStatus[route][200])
	}

	// The feedback service re-runs the failed jobs and says so.
	require.NoError(t, e.client.RerunFailedJobs(t.Context(), e.repo, runID))
	_, _, err = e.emit.Emit(t.Context(), &events.FeedbackSkipped{Base: events.Base{PR: e.pr, HeadSHA: info.HeadSHA}, Detail: "re-running"}, "rerun")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rec, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && rec.Checks.FlakyPasses == 1
	}, waitFor, 10*time.Millisecond, "the flaky pass was not counted")
	rec, _, err := e.store.Get(t.Context(), e.pr)
	require.NoError(t, err)
	assert.Equal(t, state.ChecksRecord{HeadSHA: info.HeadSHA, Round: 1, Key: rec.Checks.Key, Passed: true, FlakyPasses: 1}, rec.Checks)
	require.Eventually(t, func() bool { return metricstest.Value(e.reg, "prloop_poller_flaky_check_passes_total") == 1 }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeChecksFailed))
	assert.False(t, strings.Contains(strings.Join(typesOf(e), ","), "PRFeedbackReceived"))
}

func typesOf(e *env) []string {
	var out []string
	for _, t := range e.rec.Types(e.pr) {
		out = append(out, string(t))
	}
	return out
}
