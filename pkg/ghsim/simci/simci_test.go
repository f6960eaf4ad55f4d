package simci_test

import (
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
