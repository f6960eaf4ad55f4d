package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// TestLoop_ARemovedPRWithAGreenHeadGetsTheCandidatesFailure runs the four
// services as `prloop run` does, with the speculative queue, on two PRs
// whose own heads pass the required check "test": "a" and "b" together
// fail it (a candidate holding both files and no fix is red). b's
// candidate fails on top of a's green one, so the queue removes b, without
// a human: the agent gets the candidate's failure (annotation and log
// tail) with the base merged into b first, fixes it on top, CI passes, the
// reviewer approves the fix and b merges after a.
func TestLoop_ARemovedPRWithAGreenHeadGetsTheCandidatesFailure(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	require.NoError(t, sim.SetRuleset(demo.Repo, "main", ghsim.RequiredChecks{Contexts: []string{"test"}}))
	green := ghsim.JobInput{Name: "test", Conclusion: "success"}
	open := func(branch string) (ghref.PR, string) {
		head, err := sim.PushCommit(demo.Repo, branch, ghsim.DemoAgent, map[string]string{branch + ".go": "package main\n"}, "Add "+branch)
		require.NoError(t, err)
		pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Add " + branch, Head: branch, Author: ghsim.DemoAgent})
		require.NoError(t, err)
		_, _, err = sim.RunWorkflow(demo.Repo, head, "CI", green)
		require.NoError(t, err)
		return pr, head
	}
	a, _ := open("a")
	b, bHead := open("b")

	prompts := filepath.Join(dir, "prompts")
	require.NoError(t, os.Mkdir(prompts, 0o755))
	agent := writeAgent(t, dir, `#!/bin/sh
set -e
cat > "`+prompts+`/$PRLOOP_BRANCH.md"
printf 'package main\n\n// a and b together need this\n' > fix.go
git add -A
git -c user.name=agent -c user.email=agent@example.com commit -q -m "Make a and b pass together"
echo "fixed the candidate's failure"
`)
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{
		"PRLOOP_REVIEW_PROTOCOLS": "reviews", "PRLOOP_REQUIRE_CHECKS": "true", "PRLOOP_AGENT_WRITABLE_PATHS": prompts,
		"PRLOOP_QUEUE_MODE": "speculative", "PRLOOP_QUEUE_DEPTH": "2",
	})
	ctx, rt, _ := startLoop(t, "cifixcand")

	// CI: every head the agent pushes passes; a candidate fails when it
	// holds a and b without the fix. The reviewer approves every head, b's
	// first only once a is queued: a is ahead of b whatever the poller's
	// timing, so the candidate that fails is b's (on top of a's, or on a
	// base a merged into), never a's on a base b merged into. (The
	// callback runs for one event at a time.)
	gitDir := sim.GitDir(demo.Repo)
	approve := func(pr ghref.PR, head string) error {
		_, err := sim.AddReview(pr, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "APPROVED", CommitID: head})
		return err
	}
	aQueued, bWaiting := false, ""
	log := followLoop(t, ctx, rt, func(d events.Data, _ string) error {
		switch d := d.(type) {
		case *events.FeedbackAddressed:
			_, _, err := sim.RunWorkflow(d.PR.RepoRef(), d.HeadSHA, "CI", green)
			return err
		case *events.ReviewPending:
			if d.PR.Same(b) && !aQueued {
				bWaiting = d.HeadSHA
				return nil
			}
			return approve(d.PR, d.HeadSHA)
		case *events.MergeQueued:
			if !d.PR.Same(a) || aQueued {
				return nil
			}
			aQueued = true
			if bWaiting == "" {
				return nil
			}
			return approve(b, bWaiting)
		case *events.MergeCandidate:
			if d.State != events.CandidateBuilt {
				return nil
			}
			files := strings.Fields(gitIn(t, gitDir, "ls-tree", "--name-only", d.Candidate))
			in := green
			if slices.Contains(files, "a.go") && slices.Contains(files, "b.go") && !slices.Contains(files, "fix.go") {
				in = ghsim.JobInput{
					Name: "test", Conclusion: "failure", Title: "a and b clash",
					Annotations: []ghsim.Annotation{{Path: "b.go", StartLine: 1, Level: "failure", Message: "b_test.go:4: b breaks with a"}},
					Steps:       []ghsim.Step{{Name: "go test ./...", Conclusion: "failure"}},
					Log:         "--- FAIL: TestBWithA (0.00s)\nFAIL\n",
				}
			}
			_, _, err := sim.RunWorkflow(d.PR.RepoRef(), d.Candidate, "CI", in)
			return err
		}
		return nil
	})
	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range []ghref.PR{a, b} {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "cifixcand")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return len(ofType[*events.Merged](log, a)) == 1 && len(ofType[*events.Merged](log, b)) == 1
	}, 3*time.Minute, 100*time.Millisecond, "a and b not both merged:\n%s\n%s", log.lines(a), log.lines(b))

	// b: removed with the candidate's failure, fixed on the base, merged.
	var removed *events.MergeFailed
	for _, f := range ofType[*events.MergeFailed](log, b) {
		if f.Reason == events.ReasonCandidateFailed {
			removed = f
		}
	}
	require.NotNil(t, removed, log.lines(b))
	assert.Equal(t, bHead, removed.HeadSHA)
	assert.Equal(t, []string{"test"}, events.CheckNames(removed.Checks))
	assert.Empty(t, ofType[*events.EscalationRequested](log, b), "no human: %s", log.lines(b))
	addressed := ofType[*events.FeedbackAddressed](log, b)
	require.Len(t, addressed, 1, log.lines(b))
	assert.Equal(t, bHead, addressed[0].PreviousHeadSHA)
	assert.Equal(t, addressed[0].HeadSHA, ofType[*events.Merged](log, b)[0].HeadSHA, "the fix is what merged")
	parents := strings.Fields(gitIn(t, gitDir, "log", "--merges", "--format=%P", bHead+".."+addressed[0].HeadSHA))
	require.Len(t, parents, 2, "prloop merged the base into b before the agent's fix")
	assert.Equal(t, bHead, parents[0])
	prompt, err := os.ReadFile(filepath.Join(prompts, "b.md"))
	require.NoError(t, err)
	assert.Contains(t, string(prompt), "not on top of the\ncurrent base")
	assert.Contains(t, string(prompt), "1 check fails on "+removed.Candidate, "the candidate's failure")
	assert.Contains(t, string(prompt), "b_test.go:4: b breaks with a", "the candidate's annotation")
	assert.Contains(t, string(prompt), "--- FAIL: TestBWithA (0.00s)", "the candidate's log tail")
	assert.Equal(t, "package main\n\n// a and b together need this", gitIn(t, gitDir, "show", "main:fix.go"))
	_, err = os.Stat(filepath.Join(prompts, "a.md"))
	assert.True(t, os.IsNotExist(err), "the agent never ran on a")
}
