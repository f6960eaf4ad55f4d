package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
)

// TestRerunFailed_EachRunOnce: the failed Actions jobs of one run are
// re-run with one request for the run ("Re-run failed jobs from a
// workflow run",
// https://docs.github.com/en/rest/actions/workflow-runs#re-run-failed-jobs-from-a-workflow-run);
// a failed commit status is no job and is left alone; with nothing to
// re-run, ErrNoRerun.
func TestRerunFailed_EachRunOnce(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	ctx := t.Context()
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	_, jobs, err := e.sim.RunWorkflow(e.repo, info.HeadSHA, "CI",
		ghsim.JobInput{Name: "test", Conclusion: "failure"}, ghsim.JobInput{Name: "lint", Conclusion: "failure"}, ghsim.JobInput{Name: "build", Conclusion: "success"})
	require.NoError(t, err)
	failed := []events.FailedCheck{
		{Name: "test", Kind: events.CheckKindRun, ID: jobs[0], Actions: true},
		{Name: "lint", Kind: events.CheckKindRun, ID: jobs[1], Actions: true},
		{Name: "ci/legacy", Kind: events.CheckKindStatus, ID: 77},
	}
	assert.True(t, Rerunnable(failed))

	r, err := RerunFailed(ctx, e.client, e.repo, failed)
	require.NoError(t, err)
	assert.Len(t, r.Runs, 1, "one request for the run of both jobs")
	assert.Equal(t, []string{"test", "lint"}, r.Names)
	assert.Equal(t, 1, e.sim.Reruns())

	_, err = RerunFailed(ctx, e.client, e.repo, failed[2:])
	require.ErrorIs(t, err, ErrNoRerun, "a commit status is not re-run")
	assert.False(t, Rerunnable(failed[2:]))
	assert.Equal(t, 1, e.sim.Reruns())
}
