package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/benchrun"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim/simci"
)

// bin is the merger binary the tests run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := benchrun.ScratchDir("prloop-merger-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "merger")
	if err := benchrun.Build(context.Background(), mergerPkg, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// tiny is a configuration small and compressed enough for a test: 4 PRs,
// one of them broken, CI of 1 s; the checks timeout is long (12 s) so that
// a loaded machine does not time out a check the CI is about to report.
func tiny() options {
	return options{
		prs: 4, ci: 10 * time.Minute, fail: 0.25, compress: 600, seed: 1, depth: 4, warmup: 3,
		approveWithin: time.Minute, poll: 10 * time.Second, checksTimeout: 2 * time.Hour,
		limit: time.Minute, modes: []string{"serial"},
	}
}

// runOne runs the benchmark with o, of one contender, and returns its
// result, which must be complete.
func runOne(t *testing.T, o options) result {
	t.Helper()
	require.NoError(t, o.validate())
	rs, err := run(t.Context(), o, t.TempDir(), bin, io.Discard)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Empty(t, rs[0].unavailable)
	require.Empty(t, rs[0].incomplete)
	return rs[0]
}

// TestBench_SerialTiny runs the benchmark end to end with the real merger
// in serial mode, so that it cannot rot silently: every good PR merges
// after one CI run on its updated head, the broken one is removed as
// failing, and main's tree after every merge is one CI passed.
func TestBench_SerialTiny(t *testing.T) {
	t.Parallel()
	o := tiny()
	r := runOne(t, o)
	assert.Equal(t, []int{r.broken[0]}, r.broken, "a quarter of 4 PRs is one")
	assert.Equal(t, 3, r.merged)
	assert.Equal(t, r.broken, r.failedChecks, "exactly the broken PR is removed as failing")
	assert.Empty(t, r.brokenMerged)
	assert.Empty(t, r.others)
	assert.Zero(t, r.untested, "every merge lands a tree CI passed")
	assert.Zero(t, r.early, "serial merges only after CI passed the tree")
	assert.Zero(t, r.foreign)
	assert.Equal(t, 4, r.ciRuns, "serial tests each updated head once")
	assert.Zero(t, r.candidateRuns)
	assert.Zero(t, r.candidateEvents)
	assert.Len(t, r.latencies, 3)
	assert.Empty(t, r.notes)
	assert.Len(t, r.etaErrors, 3, "after the warm-up every merged PR was queued with a known ETA")
	assert.Zero(t, r.reruns, "commit statuses are never re-run")
	f := o.figures(r)
	assert.Greater(t, f.perHour, 0.0)
	assert.Equal(t, 3, f.etaKnown)
	assert.GreaterOrEqual(t, f.etaP90, f.etaP50)
	assert.GreaterOrEqual(t, f.p50, 10.0, "a merge waits at least one CI run (10 modelled minutes)")
	assert.GreaterOrEqual(t, f.p99, f.p50)
}

// TestBench_SpeculativeTiny runs the benchmark end to end with the real
// merger in speculative mode: every good PR merges, the broken one is
// removed as failing, and every merge lands a tree CI passed before the
// merge (none early: each PR merges on its own green candidate).
func TestBench_SpeculativeTiny(t *testing.T) {
	t.Parallel()
	o := tiny()
	o.modes = []string{"speculative"}
	r := runOne(t, o)
	assert.Equal(t, 3, r.merged)
	assert.Equal(t, r.broken, r.failedChecks, "exactly the broken PR is removed as failing")
	assert.Empty(t, r.brokenMerged)
	assert.Zero(t, r.untested, "every merge lands a tree CI passed")
	assert.Zero(t, r.early, "each PR merges only after CI passed its own candidate's tree")
	assert.Zero(t, r.foreign)
	assert.Positive(t, r.candidateRuns)
	assert.Len(t, r.etaErrors, 3, "after the warm-up every merged PR was queued with a known ETA")
}

// TestBench_SpeculativeFlakyCandidateIsRerunAndMerges runs the benchmark
// end to end with the real merger in speculative mode and one flaky PR of
// four: the CI reports a GitHub Actions job, the flaky PR's candidate fails
// its first attempt, the merger re-runs the failed job through the
// simulator's REST API, the re-run passes a CI time later, and the PR
// merges on it: counted as re-run and flaky, every PR merged, and every
// merge a tree whose latest attempt CI passed before the merge.
func TestBench_SpeculativeFlakyCandidateIsRerunAndMerges(t *testing.T) {
	t.Parallel()
	o := tiny()
	o.modes, o.fail, o.flaky = []string{"speculative"}, 0, 0.25
	r := runOne(t, o)
	require.Len(t, r.flakyPRs, 1, "a quarter of 4 PRs is one")
	assert.Empty(t, r.broken)
	assert.Equal(t, 4, r.merged, "the flaky PR merges too")
	assert.Empty(t, r.failedChecks, "nothing is removed as failing")
	assert.Empty(t, r.others)
	assert.Equal(t, 1, r.reruns, "the flaky PR's candidate is re-run once")
	assert.Equal(t, 1, r.flaky, "and merges after the re-run")
	assert.Zero(t, r.untested, "every merge lands a tree CI passed")
	assert.Zero(t, r.early, "the flaky PR merges only after its re-run passed")
	assert.Zero(t, r.foreign)
	assert.Empty(t, r.notes)
}

// TestPassedTrees: a commit's latest attempt is its verdict; a tree
// passed when the first commit of it whose latest attempt passed
// reported.
func TestPassedTrees(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	run := func(sha, tree string, attempt int, state string, finished int) simci.Run {
		return simci.Run{SHA: sha, Tree: tree, Attempt: attempt, State: state, Finished: at(finished)}
	}
	tests := []struct {
		name string
		runs []simci.Run
		want map[string]time.Time
	}{
		{name: "passed at once", runs: []simci.Run{run("c1", "t1", 1, simci.Success, 3)}, want: map[string]time.Time{"t1": at(3)}},
		{name: "failed", runs: []simci.Run{run("c1", "t1", 1, simci.Failure, 3)}, want: map[string]time.Time{}},
		{name: "flaky: failed, then passed on the re-run", runs: []simci.Run{
			run("c1", "t1", 1, simci.Failure, 3), run("c1", "t1", 2, simci.Success, 7),
		}, want: map[string]time.Time{"t1": at(7)}},
		{name: "the re-run failed too", runs: []simci.Run{
			run("c1", "t1", 2, simci.Failure, 7), run("c1", "t1", 1, simci.Failure, 3),
		}, want: map[string]time.Time{}},
		{name: "a passed attempt before a later failed one does not count", runs: []simci.Run{
			run("c1", "t1", 1, simci.Success, 3), run("c1", "t1", 2, simci.Failure, 7),
		}, want: map[string]time.Time{}},
		{name: "two commits of one tree: the first pass", runs: []simci.Run{
			run("c2", "t1", 1, simci.Success, 9), run("c1", "t1", 1, simci.Failure, 3), run("c1", "t1", 2, simci.Success, 5),
		}, want: map[string]time.Time{"t1": at(5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, passedTrees(tt.runs))
		})
	}
}

// TestFlakySet: the flaky share of PRs, rounded, none of them broken; a
// share of 0 draws nothing from the seed's generator.
func TestFlakySet(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	broken := brokenSet(10, 0.3, rng)
	flaky := flakySet(10, 0.5, broken, rng)
	assert.Len(t, flaky, 5)
	for n := range flaky {
		assert.False(t, broken[n], "PR %d is broken, not flaky", n)
		assert.True(t, n >= 1 && n <= 10)
	}
	a, b := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
	assert.Empty(t, flakySet(10, 0, nil, a))
	assert.Equal(t, b.Uint64(), a.Uint64(), "nothing drawn")
}

// TestFlakyCommit: a commit is flaky when it adds a FLAKY- file.
func TestFlakyCommit(t *testing.T) {
	t.Parallel()
	assert.True(t, flakyCommit([]string{"FLAKY-3", "changes/3.txt"}), "the candidate that adds it")
	assert.False(t, flakyCommit([]string{"changes/4.txt"}), "a candidate on top of it")
	assert.False(t, flakyCommit(nil), "an updated head: a merge adds nothing both its parents lack")
	assert.False(t, flakyCommit([]string{"BROKEN-2"}))
}

// TestETAError: |estimate − actual| of a merged PR queued with a known
// estimate, from its PRMergeQueued to its PRMerged; nothing for a PR
// queued with the ETA unknown, by a merger that made none, or not merged.
func TestETAError(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	known := &events.QueueETA{Known: true, Seconds: 90, Measurements: 3, Depth: 1}
	tests := []struct {
		name string
		o    outcome
		want time.Duration
		ok   bool
	}{
		{name: "merged later than estimated", o: outcome{queuedAt: t0, eta: known, merged: t0.Add(2 * time.Minute)}, want: 30 * time.Second, ok: true},
		{name: "merged sooner than estimated", o: outcome{queuedAt: t0, eta: known, merged: t0.Add(time.Minute)}, want: 30 * time.Second, ok: true},
		{name: "ETA unknown at queue time", o: outcome{queuedAt: t0, eta: &events.QueueETA{Measurements: 2}, merged: t0.Add(time.Minute)}},
		{name: "no estimate made", o: outcome{queuedAt: t0, merged: t0.Add(time.Minute)}},
		{name: "not merged", o: outcome{queuedAt: t0, eta: known}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := etaError(tt.o)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestPrintTable_ReportsTheETAError: the table has the ETA error's
// median and p90, in modelled minutes, and the flaky candidates.
func TestPrintTable_ReportsTheETAError(t *testing.T) {
	t.Parallel()
	o := tiny()
	o.modes = []string{"serial", "speculative"}
	var errs []time.Duration
	for i := 1; i <= 10; i++ {
		errs = append(errs, time.Duration(i)*time.Second)
	}
	r := result{name: "serial", merged: 10, etaErrors: errs, reruns: 1, flaky: 1}
	var out strings.Builder
	printTable(&out, o, []result{r, {name: "speculative", unavailable: "not run"}})
	table := out.String()
	assert.Regexp(t, `ETA error \|estimate − actual\| p50 \(minutes\)\s+\|\s+50\.0 \|`, table, "5 s at 600x is 50 modelled minutes")
	assert.Regexp(t, `ETA error \|estimate − actual\| p90 \(minutes\)\s+\|\s+90\.0 \|`, table)
	assert.Regexp(t, `merged PRs queued with a known ETA\s+\|\s+10 \|`, table)
	assert.Regexp(t, `… flaky: merged after the re-run\s+\|\s+1 \|`, table)
}

// TestBench_RefusedConfigurationIsNotAvailable: a contender whose
// configuration the merger refuses (as it refuses a queue mode it does not
// know) is reported as not available, with the merger's error, instead of
// failing the run.
func TestBench_RefusedConfigurationIsNotAvailable(t *testing.T) {
	t.Parallel()
	o := tiny()
	o.prs, o.fail = 1, 0
	r, err := measure(t.Context(), o, t.TempDir(), bin,
		contender{name: "bogus", mode: "serial", env: []string{"PRLOOP_MERGE_METHOD=bogus"}}, io.Discard)
	require.NoError(t, err)
	assert.Contains(t, r.unavailable, "PRLOOP_MERGE_METHOD")
	assert.Zero(t, r.merged)
}

// TestBusy: the time at least one CI run was in flight, overlaps merged
// and runs clipped to the window.
func TestBusy(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	run := func(a, b int) simci.Run { return simci.Run{Started: at(a), Finished: at(b)} }
	tests := []struct {
		name string
		runs []simci.Run
		want time.Duration
	}{
		{name: "none", want: 0},
		{name: "one", runs: []simci.Run{run(1, 3)}, want: 2 * time.Second},
		{name: "overlapping and nested", runs: []simci.Run{run(4, 6), run(1, 3), run(2, 5), run(2, 3)}, want: 5 * time.Second},
		{name: "apart", runs: []simci.Run{run(1, 2), run(5, 7)}, want: 3 * time.Second},
		{name: "clipped to the window", runs: []simci.Run{run(-5, 1), run(9, 20)}, want: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, busy(tt.runs, at(0), at(10)))
		})
	}
}
