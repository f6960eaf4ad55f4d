package simci_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simci"
)

// TestCI_TestsEveryNewCommitOnce: commits pushed after Start get a pending
// status, then the verdict on their files; a skipped branch and the
// commits that were there before are left alone; each commit runs once.
func TestCI_TestsEveryNewCommitOnce(t *testing.T) {
	t.Parallel()
	sim, err := ghsim.New(ghsim.Options{Dir: t.TempDir(), RealClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	repo, err := sim.CreateRepo("acme", "widgets", map[string]string{"README.md": "hi\n"})
	require.NoError(t, err)
	before, err := sim.PushCommit(repo, "old", "acme", map[string]string{"old.txt": "x\n"}, "Before the CI")
	require.NoError(t, err)

	ci := &simci.CI{Sim: sim, Repo: repo, Context: "ci/test", Duration: 50 * time.Millisecond, Every: time.Millisecond,
		Skip: func(b string) bool { return b == "main" },
		Verdict: func(files []string) string {
			if slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, "BROKEN-") }) {
				return simci.Failure
			}
			return simci.Success
		}}
	require.NoError(t, ci.Start(t.Context()))

	good, err := sim.PushCommit(repo, "feature", "acme", map[string]string{"a.txt": "a\n"}, "Good")
	require.NoError(t, err)
	bad, err := sim.PushCommit(repo, "prloop/queue/main/1", "acme", map[string]string{"BROKEN-1": "x\n"}, "Broken")
	require.NoError(t, err)
	_, err = sim.PushCommit(repo, "main", "acme", map[string]string{"m.txt": "m\n"}, "On main")
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(ci.Runs()) == 2 }, 10*time.Second, 5*time.Millisecond)
	runs := map[string]simci.Run{}
	for _, r := range ci.Runs() {
		runs[r.SHA] = r
	}
	assert.Equal(t, simci.Success, runs[good].State)
	assert.Equal(t, "feature", runs[good].Branch)
	assert.Equal(t, simci.Failure, runs[bad].State)
	assert.Equal(t, "prloop/queue/main/1", runs[bad].Branch)
	tree, _, err := sim.Tree(repo, bad)
	require.NoError(t, err)
	assert.Equal(t, tree, runs[bad].Tree)
	assert.GreaterOrEqual(t, runs[bad].Finished.Sub(runs[bad].Started), 50*time.Millisecond, "a run takes Duration")
	hist, err := sim.StatusHistory(repo, bad, "ci/test")
	require.NoError(t, err)
	require.Len(t, hist, 2)
	assert.Equal(t, []string{"pending", "failure"}, []string{hist[0].State, hist[1].State})
	none, err := sim.StatusHistory(repo, before, "")
	require.NoError(t, err)
	assert.Empty(t, none, "a commit from before the CI is not tested")
	assert.Empty(t, ci.Errors())
	assert.Len(t, ci.Runs(), 2, "main is skipped and nothing runs twice")
}

// TestReportNew_EachHeadOnceRetryingFailures: a head is reported once,
// a failed report is tried again, and the loop ends when ended says so.
func TestReportNew_EachHeadOnceRetryingFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	heads, reported, failOnce := []string{"h1"}, []string{}, true
	var stop bool
	get := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(reported) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		simci.ReportNew(t.Context(), time.Millisecond, func() bool { mu.Lock(); defer mu.Unlock(); return stop },
			func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(heads) },
			func(sha string) error {
				mu.Lock()
				defer mu.Unlock()
				if sha == "h2" && failOnce {
					failOnce = false
					return assert.AnError
				}
				reported = append(reported, sha)
				return nil
			})
	}()
	require.Eventually(t, func() bool { return slices.Equal(get(), []string{"h1"}) }, 10*time.Second, time.Millisecond)
	mu.Lock()
	heads = []string{"h1", "h2"}
	mu.Unlock()
	require.Eventually(t, func() bool { return slices.Equal(get(), []string{"h1", "h2"}) }, 10*time.Second, time.Millisecond, "a failed report is retried")
	mu.Lock()
	stop = true
	mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReportNew kept running after ended")
	}
	assert.Equal(t, []string{"h1", "h2"}, get(), "each head once")
}

// TestCI_ActionsJobsAndTheirRerunsTakeDuration: with Actions a run is a
// workflow job whose check run, named after the context, is in progress
// for Duration before its conclusion. A commit adding a flaky file
// (Flaky, of the files none of its parents has) fails its first attempt; a commit on
// top of it, which adds another file, does not, nor does a merge of a
// base holding one into a PR (update-branch). Re-running the failed job through the simulator's
// REST API, as the merger does, runs it again: in progress for Duration,
// then Verdict's success, recorded as attempt 2.
func TestCI_ActionsJobsAndTheirRerunsTakeDuration(t *testing.T) {
	t.Parallel()
	sim, err := ghsim.New(ghsim.Options{Dir: t.TempDir(), RealClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.AddToken("tok", "acme")
	repo, err := sim.CreateRepo("acme", "widgets", map[string]string{"README.md": "hi\n"})
	require.NoError(t, err)
	require.NoError(t, sim.SetPermission(repo, "acme", "write"))
	_, err = sim.PushCommit(repo, "feature", "acme", map[string]string{"f.txt": "f\n"}, "A change, before the CI")
	require.NoError(t, err)
	pr, err := sim.OpenPR(repo, ghsim.PRInput{Title: "Feature", Head: "feature", Author: "acme"})
	require.NoError(t, err)
	_, err = sim.PushCommit(repo, "main", "acme", map[string]string{"FLAKY-2": "x\n"}, "A flaky change merged before the CI")
	require.NoError(t, err)
	const took = time.Second
	ci := &simci.CI{Sim: sim, Repo: repo, Context: "test", Duration: took, Every: time.Millisecond, Actions: true,
		Flaky: func(added []string) bool {
			return slices.ContainsFunc(added, func(f string) bool { return strings.HasPrefix(f, "FLAKY-") })
		}}
	require.NoError(t, ci.Start(t.Context()))

	flaky, err := sim.PushCommit(repo, "queue/1", "acme", map[string]string{"FLAKY-1": "x\n"}, "Flaky")
	require.NoError(t, err)
	history := func(sha string) []string {
		hist, err := sim.CheckRunHistory(repo, sha, "test")
		require.NoError(t, err)
		var out []string
		for _, h := range hist {
			out = append(out, strings.TrimSpace(h.Status+" "+h.Conclusion))
		}
		return out
	}
	require.Eventually(t, func() bool { return len(history(flaky)) > 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"in_progress"}, history(flaky), "the job runs before it ends")
	require.Eventually(t, func() bool { return len(ci.Runs()) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"in_progress", "completed failure"}, history(flaky), "a flaky commit fails its first attempt")
	on, err := sim.PushCommit(repo, "queue/1", "acme", map[string]string{"b.txt": "b\n"}, "On top")
	require.NoError(t, err)
	api(t, srv, "PUT", fmt.Sprintf("/repos/acme/widgets/pulls/%d/update-branch", pr.Number), 202, nil)
	branches, err := sim.Branches(repo)
	require.NoError(t, err)
	updated := branches["feature"]

	hist, err := sim.CheckRunHistory(repo, flaky, "test")
	require.NoError(t, err)
	job := hist[0].ID
	var j struct {
		RunID int64 `json:"run_id"`
	}
	api(t, srv, "GET", fmt.Sprintf("/repos/acme/widgets/actions/jobs/%d", job), 200, &j)
	asked := time.Now()
	api(t, srv, "POST", fmt.Sprintf("/repos/acme/widgets/actions/runs/%d/rerun-failed-jobs", j.RunID), 201, nil)
	require.Eventually(t, func() bool { return len(history(flaky)) == 3 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "in_progress", history(flaky)[2], "the re-run runs before it ends")
	require.Eventually(t, func() bool { return len(history(flaky)) == 4 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "completed success", history(flaky)[3], "the re-run passes")
	assert.GreaterOrEqual(t, time.Since(asked), took, "the re-run took Duration")

	require.Eventually(t, func() bool { return len(ci.Runs()) == 4 }, 10*time.Second, time.Millisecond)
	byAttempt := map[string]simci.Run{}
	for _, r := range ci.Runs() {
		byAttempt[fmt.Sprintf("%s/%d", r.SHA, r.Attempt)] = r
	}
	assert.Equal(t, simci.Failure, byAttempt[flaky+"/1"].State)
	rerun := byAttempt[flaky+"/2"]
	assert.Equal(t, simci.Success, rerun.State)
	assert.Equal(t, "queue/1", rerun.Branch)
	assert.Equal(t, byAttempt[flaky+"/1"].Tree, rerun.Tree)
	assert.GreaterOrEqual(t, rerun.Finished.Sub(rerun.Started), took)
	assert.Equal(t, simci.Success, byAttempt[on+"/1"].State, "a commit whose parent has the flaky file passes")
	assert.Equal(t, []string{"in_progress", "completed success"}, history(on))
	assert.Equal(t, simci.Success, byAttempt[updated+"/1"].State, "a merge adds no file both its parents lack: the updated head is not flaky")
	none, err := sim.StatusHistory(repo, flaky, "")
	require.NoError(t, err)
	assert.Empty(t, none, "no commit status with Actions")
	assert.Empty(t, ci.Errors())
}

// api makes a request of the simulator's REST API as user acme and
// decodes the answer into out, when given.
func api(t *testing.T, srv *httptest.Server, method, path string, status int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, status, res.StatusCode, "%s %s: %s", method, path, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out))
	}
}
