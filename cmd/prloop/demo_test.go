package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// TestDemo_PlaysTheWholeLoop runs `prloop demo` as a user would and checks
// that it exits 0 having printed each PR's expected event sequence.
func TestDemo_PlaysTheWholeLoop(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/prloop")
	p := proctest.Start(t, bin, []string{"GITHUB_TOKEN=", "PRLOOP_LOG_LEVEL=debug"}, "demo")
	exited, err := p.Wait(90 * time.Second)
	require.True(t, exited, "prloop demo still running after 90s:\n%s", p.Stdout.String())
	require.NoError(t, err, "prloop demo failed:\n%s\n%s", p.Stdout.String(), p.Stderr.String())

	out := p.Stdout.String()
	seq := func(pr string) []string {
		var types []string
		re := regexp.MustCompile(`^\S+\s+` + regexp.QuoteMeta(pr) + `\s+(\S+)`)
		for _, line := range strings.Split(out, "\n") {
			if m := re.FindStringSubmatch(line); m != nil {
				types = append(types, m[1])
			}
		}
		return types
	}
	assert.Equal(t, []string{
		"PRWatchRequested", "PRReviewPending", "PRReviewInProgress", "PRFeedbackReceived",
		"PRFeedbackAddressed", "PRReviewPending", "PRReviewApproved", "PRMergeQueued", "PRMerged",
	}, seq("demo/widgets#1"), out)
	assert.Equal(t, []string{"PRWatchRequested", "PRReviewPending", "ReviewTimeout", "PREscalated"}, seq("demo/widgets#2"), out)
	assert.Contains(t, out, "Both PRs reached their end.")
	assert.Regexp(t, `squash-merged as [0-9a-f]{7}; main now ends in [0-9a-f]{7}`, out)

	// prloop's commit status moves with the PR (a burst may skip a line).
	for _, want := range []string{
		`(?m)^demo/widgets#2  status  pending  waiting for review$`, // #1: alice's 👀 follows within the coalescing window
		`(?m)^demo/widgets#1  status  pending  changes requested by alice — agent fixing \(cycle 1 of 2\)$`,
		`(?m)^demo/widgets#1  status  success  merged as [0-9a-f]{7}$`,
		`(?m)^demo/widgets#2  status  error  needs a human: review timeout \(label human-review-required\)$`,
	} {
		assert.Regexp(t, want, out)
	}
	assert.Less(t, strings.Index(out, "demo/widgets#1  status  success  merged as"), strings.Index(out, "Summary"), "the final status before the summary")
}

// TestDemo_KeepShowsNothingAfterTheSummary runs `prloop demo -keep`, which
// keeps printing events after its summary, and checks that the stream stays
// quiet for several poll intervals (the demo polls every second): no
// phantom change request, no second approval, nothing the summary does not
// explain. The simulator once returned other PRs' inline comments, and the
// neglected PR then received alice's comment from the reviewed one.
func TestDemo_KeepShowsNothingAfterTheSummary(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/prloop")
	p := proctest.Start(t, bin, []string{"GITHUB_TOKEN="}, "demo", "-keep")
	require.Eventually(t, func() bool { return strings.Contains(p.Stdout.String(), "prloop keeps running") }, 90*time.Second, 50*time.Millisecond,
		"no summary:\n%s", p.Stdout.String())
	after := func() string {
		out := p.Stdout.String()
		return out[strings.Index(out, "prloop keeps running"):]
	}
	eventLine := regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3}\s+demo/widgets#`)
	require.Never(t, func() bool { return eventLine.MatchString(after()) }, 5*time.Second, 100*time.Millisecond,
		"events after the summary:\n%s", p.Stdout.String())

	// The explain command the kept demo prints says why #2 is not merged
	// and how to clear it.
	m := regexp.MustCompile(`explain:\s+(.*) prloop explain (\S+)\n`).FindStringSubmatch(after())
	require.NotNil(t, m, "no explain command:\n%s", after())
	ex := proctest.Start(t, bin, strings.Fields(m[1]), "explain", m[2])
	exited, err := ex.Wait(60 * time.Second)
	require.True(t, exited, "prloop explain still running after 60s")
	require.NoError(t, err, "prloop explain failed:\n%s", ex.Stderr.String())
	assert.Contains(t, ex.Stdout.String(), "demo/widgets#2: needs a human: review timeout (label human-review-required)")
	assert.Regexp(t, "label\\s+human-review-required: present", ex.Stdout.String())
	assert.Contains(t, ex.Stdout.String(), "next: Review the PR and react 👍 to it")
	require.NoError(t, p.Signal(os.Interrupt))
	exited, _ = p.Wait(30 * time.Second)
	require.True(t, exited, "prloop demo -keep did not stop on an interrupt")
}
