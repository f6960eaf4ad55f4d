package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/state"
)

// TestLoop_FailingChecksGoToTheAgent runs the four services as `prloop
// run` does, on the simulator with real git and GitHub Actions, with a
// scripted agent (a real process, in its sandbox), on two PRs whose
// required check "test" fails on their first head:
//
//   - "red": the failure repeats on its re-run, so the agent gets it, with
//     the annotation and the tail of the job's log in its prompt; its fix
//     is pushed, CI passes on it, the reviewer approves it and it merges;
//   - "flaky": the failure passes on its re-run; the agent never runs and
//     the poller counts a flaky pass.
func TestLoop_FailingChecksGoToTheAgent(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	require.NoError(t, sim.SetRuleset(demo.Repo, "main", ghsim.RequiredChecks{Contexts: []string{"test"}}))
	job := func(reruns ...string) ghsim.JobInput {
		return ghsim.JobInput{
			Name: "test", Conclusion: "failure", Title: "1 test failed", Summary: "TestGreeting failed",
			Annotations: []ghsim.Annotation{{Path: "greet.go", StartLine: 3, Level: "failure", Message: "greet_test.go:7: want hello, got nothing"}},
			Steps:       []ghsim.Step{{Name: "go test ./...", Conclusion: "failure"}},
			Log:         "\x1b[36mrun\x1b[0m go test ./...\n--- FAIL: TestGreeting (0.00s)\n    greet_test.go:7: want hello, got nothing\nFAIL\n",
			Reruns:      reruns,
		}
	}
	open := func(branch string, in ghsim.JobInput) (ghref.PR, string) {
		head, err := sim.PushCommit(demo.Repo, branch, ghsim.DemoAgent, map[string]string{branch + ".go": "package main\n"}, "Add "+branch)
		require.NoError(t, err)
		pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Add " + branch, Head: branch, Author: ghsim.DemoAgent})
		require.NoError(t, err)
		_, _, err = sim.RunWorkflow(demo.Repo, head, "CI", in)
		require.NoError(t, err)
		return pr, head
	}
	red, redHead := open("red", job("failure"))
	flaky, flakyHead := open("flaky", job("success"))

	prompts := filepath.Join(dir, "prompts")
	require.NoError(t, os.Mkdir(prompts, 0o755))
	agent := writeAgent(t, dir, `#!/bin/sh
set -e
cat > "`+prompts+`/$PRLOOP_BRANCH.md"
printf 'package main\n\nfunc greet() string { return "hello" }\n' > greet.go
git add -A
git -c user.name=agent -c user.email=agent@example.com commit -q -m "Make TestGreeting pass"
echo "fixed the failing test"
`)
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{
		"PRLOOP_REVIEW_PROTOCOLS": "reviews", "PRLOOP_REQUIRE_CHECKS": "true", "PRLOOP_AGENT_WRITABLE_PATHS": prompts,
	})
	ctx, rt, _ := startLoop(t, "cifix")

	// CI passes on every head the agent pushes; the reviewer approves
	// every head but the first, whose checks fail.
	log := followLoop(t, ctx, rt, func(d events.Data, first string) error {
		switch d := d.(type) {
		case *events.FeedbackAddressed:
			_, _, err := sim.RunWorkflow(d.PR.RepoRef(), d.HeadSHA, "CI", ghsim.JobInput{Name: "test", Conclusion: "success"})
			return err
		case *events.ReviewPending:
			if d.HeadSHA != first {
				_, err := sim.AddReview(d.PR, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "APPROVED", CommitID: d.HeadSHA})
				return err
			}
		}
		return nil
	})
	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range []ghref.PR{red, flaky} {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "cifix")
		require.NoError(t, err)
	}
	kv, err := rt.JS.KeyValue(ctx, state.Bucket)
	require.NoError(t, err)
	store := state.NewStore(kv)
	flakyPasses := func() int {
		st, _, err := store.Get(ctx, flaky)
		if err != nil {
			return -1
		}
		return st.Checks.FlakyPasses
	}
	require.Eventually(t, func() bool {
		return len(ofType[*events.Merged](log, red)) == 1 && flakyPasses() == 1
	}, 3*time.Minute, 100*time.Millisecond, "red not merged, or flaky's pass not counted:\n%s\n%s", log.lines(red), log.lines(flaky))

	// red: one failure re-run, the repeat handed to the agent, fixed, merged.
	failed := ofType[*events.ChecksFailed](log, red)
	require.Len(t, failed, 2, log.lines(red))
	assert.Equal(t, []int{1, 2}, []int{failed[0].Round, failed[1].Round})
	assert.Equal(t, []string{"test"}, events.CheckNames(failed[1].Checks))
	addressed := ofType[*events.FeedbackAddressed](log, red)
	require.Len(t, addressed, 1, log.lines(red))
	assert.Equal(t, redHead, addressed[0].PreviousHeadSHA)
	merged := ofType[*events.Merged](log, red)[0]
	assert.Equal(t, addressed[0].HeadSHA, merged.HeadSHA, "the fix is what merged")
	assert.Equal(t, "package main\n\nfunc greet() string { return \"hello\" }", gitIn(t, sim.GitDir(demo.Repo), "show", "main:greet.go"))
	prompt, err := os.ReadFile(filepath.Join(prompts, "red.md"))
	require.NoError(t, err)
	assert.Contains(t, string(prompt), "greet_test.go:7: want hello, got nothing", "the annotation")
	assert.Contains(t, string(prompt), "--- FAIL: TestGreeting (0.00s)", "the log's tail")
	assert.NotContains(t, string(prompt), "\x1b")
	assert.Empty(t, ofType[*events.EscalationRequested](log, red), log.lines(red))

	// flaky: re-run, passed, never the agent's.
	_, err = os.Stat(filepath.Join(prompts, "flaky.md"))
	assert.True(t, os.IsNotExist(err), "the agent never ran on the flaky PR")
	require.Len(t, ofType[*events.ChecksFailed](log, flaky), 1, log.lines(flaky))
	assert.Empty(t, ofType[*events.FeedbackAddressed](log, flaky))
	info, err := sim.PRInfo(flaky)
	require.NoError(t, err)
	assert.Equal(t, flakyHead, info.HeadSHA)
	assert.Equal(t, 2, sim.Reruns(), "each PR's first failure was re-run once")
	for _, r := range sim.LogRequests() {
		assert.Empty(t, r.Authorization, "the log store never saw a token")
	}
	assert.False(t, strings.Contains(log.lines(red), "PRConflictResolveRequested"))
}
