package main

import (
	"os"
	"path/filepath"
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

	// prloop's commit status moves with the PR. Writes are coalesced per
	// PR, so a line that the next change follows within the window may be
	// skipped (alice's 👀, or the agent's fix right after her change
	// request): the lines written are, in order, some of those the PR went
	// through, ending where it ended.
	statuses := func(pr string) []string {
		var lines []string
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, pr+"  status  "); ok {
				lines = append(lines, regexp.MustCompile(`[0-9a-f]{7}$`).ReplaceAllString(rest, "<sha>"))
			}
		}
		return lines
	}
	assertSubsequence(t, []string{
		`pending  waiting for review`, `pending  👀 alice is reviewing`,
		`pending  changes requested by alice — agent fixing \(cycle 1 of 2\)`, `pending  waiting for review`,
		`pending  👀 alice is reviewing`, `success  approved by alice`, `pending  approved by alice — 1st in the merge queue for main, ETA unknown`,
		`pending  approved by alice — waiting for checks: .+, ETA unknown`, `success  merged as <sha>`,
	}, statuses("demo/widgets#1"), "demo/widgets#1's status lines")
	assert.Equal(t, []string{"pending  waiting for review", "error  needs a human: review timeout (label human-review-required)"},
		statuses("demo/widgets#2"))
	assert.Less(t, strings.Index(out, "demo/widgets#1  status  success  merged as"), strings.Index(out, "Summary"), "the final status before the summary")
	assert.Contains(t, out, demoNext, "what to try next")
	assertREADMESample(t, out)
}

// assertSubsequence checks that got matches some of want's patterns
// (regular expressions, each matching a whole line), in want's order,
// ending with a match of its last.
func assertSubsequence(t *testing.T, want, got []string, what string) {
	t.Helper()
	assertSubsequenceT(t, want, got, what)
}

// assertSubsequenceT is assertSubsequence for any assert.TestingT.
func assertSubsequenceT(t interface {
	assert.TestingT
	Helper()
}, want, got []string, what string) {
	t.Helper()
	match := func(pattern, line string) bool { return regexp.MustCompile(`^(?:` + pattern + `)$`).MatchString(line) }
	i := 0
	for _, g := range got {
		for i < len(want) && !match(want[i], g) {
			i++
		}
		if i == len(want) {
			assert.Fail(t, what+" out of order or unexpected", "want some of %q in order, got %q", want, got)
			return
		}
		i++
	}
	if assert.NotEmpty(t, got, what) {
		assert.True(t, match(want[len(want)-1], got[len(got)-1]), "%s: the last is %q", what, got[len(got)-1])
	}
}

// assertREADMESample checks the README's sample of the demo's output
// against out, the real demo's: each PR's events (type and text) in order,
// the summary and what to try next, with commit ids and timings, which
// differ from run to run, left out.
func assertREADMESample(t *testing.T, out string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(proctest.Root(t), "README.md"))
	require.NoError(t, err)
	const intro = "the real demo's output):\n\n```\n"
	start := strings.Index(string(readme), intro)
	require.GreaterOrEqual(t, start, 0, "README has no sample of the demo's output")
	sample := string(readme)[start+len(intro):]
	sample = sample[:strings.Index(sample, "```")]

	sha := regexp.MustCompile(`\b[0-9a-f]{7}\b`)
	took := regexp.MustCompile(`\(\d+(\.\d+)?s, (\d+) events\)`)
	event := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}\s+(\S+)\s+(\S+)\s+(.*)$`)
	// shape is the text's events by PR, and its other lines but the
	// status lines (a burst may skip one) and the machine's own (the log
	// and the page's address).
	shape := func(text string) (map[string][]string, []string) {
		byPR, rest := map[string][]string{}, []string(nil)
		for _, line := range strings.Split(text, "\n") {
			line = took.ReplaceAllString(sha.ReplaceAllString(line, "<sha>"), "(<time>, $2 events)")
			switch m := event.FindStringSubmatch(line); {
			case m != nil:
				byPR[m[1]] = append(byPR[m[1]], m[2]+" "+m[3])
			case line == "", strings.Contains(line, "  status  "), strings.HasPrefix(line, "services log to "), strings.HasPrefix(line, "web page: "):
			default:
				rest = append(rest, line)
			}
		}
		return byPR, rest
	}
	wantEvents, wantRest := shape(sample)
	gotEvents, gotRest := shape(out)
	assert.Equal(t, wantEvents, gotEvents, "the README's sample of the demo's events has drifted from the demo; paste a fresh run into README.md")
	assert.Equal(t, wantRest, gotRest, "the README's sample of the demo's output has drifted from the demo; paste a fresh run into README.md")
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

// recordingT records whether an assertion failed, to test assertions.
type recordingT struct{ failed bool }

func (r *recordingT) Errorf(string, ...any) { r.failed = true }
func (r *recordingT) Helper()               {}

// TestAssertSubsequence: the demo's status check accepts the lines a PR
// went through, some skipped, and nothing else or out of order.
func TestAssertSubsequence(t *testing.T) {
	t.Parallel()
	want := []string{`a`, `b \d`, `c`}
	tests := []struct {
		name string
		got  []string
		fail bool
	}{
		{name: "all", got: []string{"a", "b 1", "c"}},
		{name: "some skipped", got: []string{"b 2", "c"}},
		{name: "out of order", got: []string{"b 1", "a", "c"}, fail: true},
		{name: "a line not in the list", got: []string{"a", "x", "c"}, fail: true},
		{name: "not ending at the end", got: []string{"a", "b 1"}, fail: true},
		{name: "none", fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recordingT{}
			assertSubsequenceT(r, want, tt.got, "lines")
			assert.Equal(t, tt.fail, r.failed)
		})
	}
}
