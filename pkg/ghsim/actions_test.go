package ghsim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_Actions drives a failed GitHub Actions run as prloop reads
// it, each answer checked against GitHub's OpenAPI description:
//   - the job's check run with its output and annotations: "List check run
//     annotations" (https://docs.github.com/en/rest/checks/runs#list-check-run-annotations),
//     paginated;
//   - the job and its steps: "Get a job for a workflow run"
//     (https://docs.github.com/en/rest/actions/workflow-jobs#get-a-job-for-a-workflow-run);
//   - its log: "Download job logs for a workflow run"
//     (https://docs.github.com/en/rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run),
//     302 to a URL that expires, on another host, which takes no token;
//   - a re-run: "Re-run failed jobs from a workflow run"
//     (https://docs.github.com/en/rest/actions/workflow-runs#re-run-failed-jobs-from-a-workflow-run),
//     201 with an empty object, and a new attempt of the failed job.
func TestContract_Actions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{MaxPerPage: 2})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	anns := []ghsim.Annotation{
		{Path: "main.go", StartLine: 3, Level: "failure", Message: "undefined: printlnx"},
		{Path: "main.go", StartLine: 4, Level: "warning", Message: "unused"},
		{Path: "x.go", StartLine: 1, Level: "notice", Message: "third"},
	}
	runID, jobs, err := e.sim.RunWorkflow(e.repo, info.HeadSHA, "CI",
		ghsim.JobInput{Name: "test", Conclusion: "failure", Title: "1 test failed", Summary: "TestX failed", Text: "--- FAIL: TestX",
			Annotations: anns, Steps: []ghsim.Step{{Name: "checkout", Conclusion: "success"}, {Name: "go test", Conclusion: "failure"}},
			Log: "line 1\nFAIL TestX\n", Reruns: []string{"success"}},
		ghsim.JobInput{Name: "lint", Conclusion: "success"})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	const rp = "/repos/octo/socket.io"
	job := jobs[0]

	t.Run("check run output", func(t *testing.T) {
		r := call(t, e.srv, "GET", rp+"/commits/"+info.HeadSHA+"/check-runs?check_name=test", tokBot, nil)
		require.Equal(t, 200, r.StatusCode)
		checkContract(t, "GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", 200, r.body)
		cr := r.obj(t)["check_runs"].([]any)[0].(map[string]any)
		assert.EqualValues(t, job, cr["id"], "a job's check run has the job's id")
		out := cr["output"].(map[string]any)
		assert.Equal(t, "1 test failed", out["title"])
		assert.Equal(t, "--- FAIL: TestX", out["text"])
		assert.EqualValues(t, 3, out["annotations_count"])
		assert.Equal(t, "github-actions", cr["app"].(map[string]any)["slug"])
	})
	t.Run("annotations, paginated", func(t *testing.T) {
		tmpl := "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"
		r := call(t, e.srv, "GET", fmt.Sprintf("%s/check-runs/%d/annotations", rp, job), tokBot, nil)
		require.Equal(t, 200, r.StatusCode)
		checkContract(t, "GET", tmpl, 200, r.body)
		require.Len(t, r.list(t), 2)
		assert.Contains(t, r.Header.Get("Link"), `rel="next"`)
		first := r.list(t)[0]
		assert.Equal(t, "main.go", first["path"])
		assert.EqualValues(t, 3, first["start_line"])
		assert.Equal(t, "failure", first["annotation_level"])
		assert.Equal(t, "undefined: printlnx", first["message"])
		r = call(t, e.srv, "GET", fmt.Sprintf("%s/check-runs/%d/annotations?page=2", rp, job), tokBot, nil)
		checkContract(t, "GET", tmpl, 200, r.body)
		assert.Len(t, r.list(t), 1)
	})
	t.Run("job", func(t *testing.T) {
		r := call(t, e.srv, "GET", fmt.Sprintf("%s/actions/jobs/%d", rp, job), tokBot, nil)
		require.Equal(t, 200, r.StatusCode)
		checkContract(t, "GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}", 200, r.body)
		m := r.obj(t)
		assert.EqualValues(t, runID, m["run_id"])
		assert.EqualValues(t, 1, m["run_attempt"])
		assert.Equal(t, "failure", m["conclusion"])
		steps := m["steps"].([]any)
		require.Len(t, steps, 2)
		assert.Equal(t, "go test", steps[1].(map[string]any)["name"])
		assert.Equal(t, "failure", steps[1].(map[string]any)["conclusion"])
	})
	t.Run("log through a redirect to another host", func(t *testing.T) {
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, err := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s%s/actions/jobs/%d/logs", e.srv.URL, rp, job), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tokBot)
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusFound, res.StatusCode)
		checkContract(t, "GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs", 302, nil)
		loc, err := url.Parse(res.Header.Get("Location"))
		require.NoError(t, err)
		api, _ := url.Parse(e.srv.URL)
		assert.NotEqual(t, api.Host, loc.Host, "the log is on another host")

		withToken, err := http.NewRequestWithContext(t.Context(), "GET", loc.String(), nil)
		require.NoError(t, err)
		withToken.Header.Set("Authorization", "Bearer "+tokBot)
		res, err = noFollow.Do(withToken)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "the log store refuses a token")

		res, err = http.Get(loc.String()) //nolint:noctx // a test
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, 200, res.StatusCode)
		assert.Equal(t, "line 1\nFAIL TestX\n", string(b))
		reqs := e.sim.LogRequests()
		require.Len(t, reqs, 2)
		assert.NotEmpty(t, reqs[0].Authorization)
		assert.Empty(t, reqs[1].Authorization)
	})
	t.Run("re-run failed jobs", func(t *testing.T) {
		r := call(t, e.srv, "POST", fmt.Sprintf("%s/actions/runs/%d/rerun-failed-jobs", rp, runID), tokBot, map[string]any{})
		require.Equal(t, 201, r.StatusCode, "body: %s", r.body)
		checkContract(t, "POST", "/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", 201, r.body)
		assert.Equal(t, 1, e.sim.Reruns())
		r = call(t, e.srv, "GET", rp+"/commits/"+info.HeadSHA+"/check-runs", tokBot, nil)
		byName := map[string]string{}
		for _, cr := range r.obj(t)["check_runs"].([]any) {
			m := cr.(map[string]any)
			byName[fmt.Sprint(m["name"])] = fmt.Sprint(m["conclusion"])
		}
		assert.Equal(t, map[string]string{"test": "success", "lint": "success"}, byName, "the flaky job passed on its re-run")
		r = call(t, e.srv, "POST", rp+"/actions/runs/999999/rerun-failed-jobs", tokBot, map[string]any{})
		assert.Equal(t, 404, r.StatusCode)
	})
}

// TestContract_ARunnersJobIsInProgressUntilItEnds: a workflow run a runner
// runs (StartWorkflow) as GitHub shows it while it runs and after: the
// job's check run and the job are in_progress with no conclusion until the
// runner reports one (FinishJob). "Re-run failed jobs from a workflow run"
// (https://docs.github.com/en/rest/actions/workflow-runs#re-run-failed-jobs-from-a-workflow-run;
// "Re-running workflows and jobs",
// https://docs.github.com/en/actions/managing-workflow-runs/re-running-workflows-and-jobs)
// makes a new attempt of the failed job, with a new job and check run of
// the same name, which runs again: in progress, the latest of its name,
// until the runner ends it. Each answer is checked against GitHub's
// OpenAPI description.
func TestContract_ARunnersJobIsInProgressUntilItEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	const rp = "/repos/octo/socket.io"
	runID, jobs, err := e.sim.StartWorkflow(e.repo, info.HeadSHA, "CI", "test")
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	// latest is the check run "test" GitHub lists for the head (its
	// newest, filter=latest), and job the job of its id.
	latest := func(t *testing.T) (cr, job map[string]any) {
		t.Helper()
		r := call(t, e.srv, "GET", rp+"/commits/"+info.HeadSHA+"/check-runs?check_name=test", tokBot, nil)
		require.Equal(t, 200, r.StatusCode)
		checkContract(t, "GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", 200, r.body)
		runs := r.obj(t)["check_runs"].([]any)
		require.Len(t, runs, 1, "filter=latest: one per name")
		cr = runs[0].(map[string]any)
		r = call(t, e.srv, "GET", fmt.Sprintf("%s/actions/jobs/%v", rp, cr["id"]), tokBot, nil)
		require.Equal(t, 200, r.StatusCode)
		checkContract(t, "GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}", 200, r.body)
		return cr, r.obj(t)
	}

	cr, job := latest(t)
	assert.EqualValues(t, jobs[0], cr["id"])
	for _, m := range []map[string]any{cr, job} {
		assert.Equal(t, "in_progress", m["status"])
		assert.Nil(t, m["conclusion"], "no conclusion while it runs")
		assert.Nil(t, m["completed_at"])
	}
	r := call(t, e.srv, "POST", fmt.Sprintf("%s/actions/runs/%d/rerun-failed-jobs", rp, runID), tokBot, map[string]any{})
	require.Equal(t, 201, r.StatusCode)
	snap, err := e.sim.WorkflowJobs(e.repo, runID)
	require.NoError(t, err)
	assert.Equal(t, []ghsim.JobSnapshot{{ID: jobs[0], Name: "test", Attempt: 1, Status: "in_progress"}}, snap, "a job still running is not re-run")

	require.NoError(t, e.sim.FinishJob(e.repo, jobs[0], "failure"))
	cr, job = latest(t)
	assert.Equal(t, "completed", cr["status"])
	assert.Equal(t, "failure", cr["conclusion"])
	assert.Equal(t, "failure", job["conclusion"])
	assert.NotNil(t, job["completed_at"])
	require.Error(t, e.sim.FinishJob(e.repo, jobs[0], "success"), "an attempt ends once")

	r = call(t, e.srv, "POST", fmt.Sprintf("%s/actions/runs/%d/rerun-failed-jobs", rp, runID), tokBot, map[string]any{})
	require.Equal(t, 201, r.StatusCode, "body: %s", r.body)
	checkContract(t, "POST", "/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", 201, r.body)
	snap, err = e.sim.WorkflowJobs(e.repo, runID)
	require.NoError(t, err)
	require.Len(t, snap, 1)
	again := snap[0]
	assert.NotEqual(t, jobs[0], again.ID, "a re-run is a new job")
	assert.Equal(t, ghsim.JobSnapshot{ID: again.ID, Name: "test", Attempt: 2, Status: "in_progress"}, again)
	cr, job = latest(t)
	assert.EqualValues(t, again.ID, cr["id"], "the re-run's check run is the latest of its name")
	assert.Equal(t, "in_progress", cr["status"], "the re-run runs before it ends")
	assert.Nil(t, cr["conclusion"])
	assert.EqualValues(t, 2, job["run_attempt"])
	assert.Equal(t, "in_progress", job["status"])

	require.NoError(t, e.sim.FinishJob(e.repo, again.ID, "success"))
	cr, job = latest(t)
	assert.Equal(t, "success", cr["conclusion"])
	assert.Equal(t, "success", job["conclusion"])
	r = call(t, e.srv, "GET", rp+"/commits/"+info.HeadSHA+"/check-runs?check_name=test&filter=all", tokBot, nil)
	assert.Len(t, r.obj(t)["check_runs"].([]any), 2, "both attempts' check runs stay on the commit")
	hist, err := e.sim.CheckRunHistory(e.repo, info.HeadSHA, "test")
	require.NoError(t, err)
	var states []string
	for _, h := range hist {
		states = append(states, h.Status+" "+h.Conclusion)
	}
	assert.Equal(t, []string{"in_progress ", "completed failure", "in_progress ", "completed success"}, states)
	assert.Error(t, e.sim.FinishJob(e.repo, again.ID, "bogus"))
}
