package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/proctest"
)

// chromium returns the headless browser the page test drives, or skips the
// test without one (unless PRLOOP_TEST_REQUIRE_BROWSER=1, as in CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PRLOOP_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH and PRLOOP_TEST_REQUIRE_BROWSER=1 (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium, or set PRLOOP_TEST_REQUIRE_BROWSER=1 to fail instead)")
	return ""
}

// browser starts a headless chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1200, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on (it needs
		// an unprivileged user for its namespaces); CI runs tests as root
		// in a throwaway container, and the page it loads is our own.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")), "start chromium")
	return bctx
}

// screenshotDir is where the page test saves what the browser showed:
// PRLOOP_TEST_SCREENSHOT_DIR, else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PRLOOP_TEST_SCREENSHOT_DIR"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// TestPage_InABrowser runs `prloop demo -keep`, opens the web page it
// prints in headless Chromium and checks what a person sees: the merged
// PR, the escalated one with its reason, and, after hostile events (a
// script as a login, an attribute break-out as a base branch and as a PR
// title), a queue
// entry and those values shown as text, with neither script run; then,
// by the board's link, a PR's own page with an agent run whose last
// message and tools are hostile, shown as text too.
func TestPage_InABrowser(t *testing.T) {
	t.Parallel()
	bctx := browser(t)
	bin := proctest.Build(t, "./cmd/prloop")
	p := proctest.Start(t, bin, []string{"GITHUB_TOKEN="}, "demo", "-keep")
	require.Eventually(t, func() bool { return strings.Contains(p.Stdout.String(), "prloop keeps running") }, 150*time.Second, 50*time.Millisecond,
		"the demo did not finish:\n%s", p.Stdout.String())
	out := p.Stdout.String()
	field := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		require.NotNil(t, m, "%s in the demo's output:\n%s", re, out)
		return m[1]
	}
	pageURL := field(`(?m)^web page: (http://\S+)`)
	assert.Equal(t, pageURL, field(`(?m)^  web page:  (http://\S+)`), "the -keep summary repeats the page's URL")
	dir := screenshotDir(t)

	// see loads the page afresh, then takes the steps (following a link),
	// and returns the visible text, the title and whether an injected
	// script set window.pwned.
	see := func(shot string, steps ...chromedp.Action[chromedp.Void]) (text, title string, pwned bool) {
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(pageURL), chromedp.WaitReady(chromedp.CSS("body"))))
		require.NoError(t, chromedp.Do(ctx, steps...))
		var err error
		text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		require.NoError(t, err)
		title, err = chromedp.Run(ctx, chromedp.Title())
		require.NoError(t, err)
		pwned, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.pwned !== undefined`))
		require.NoError(t, err)
		if shot != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			path := filepath.Join(dir, shot)
			require.NoError(t, os.WriteFile(path, png, 0o644))
			t.Logf("screenshot: %s", path)
		}
		return text, title, pwned
	}

	var text string
	require.Eventually(t, func() bool {
		text, _, _ = see("")
		return strings.Contains(text, "merged as") && strings.Contains(text, "review timeout")
	}, 30*time.Second, 200*time.Millisecond, "the page never showed both PRs' ends:\n%s", text)
	text, title, _ := see("page.png")
	assert.Equal(t, "prloop", title)
	assert.NotContains(t, text, "Loading", "caught up")
	assert.Regexp(t, `demo/widgets#1\s+Add a greeting helper\s+success\s+merged as [0-9a-f]{7}`, text, "the merged PR, with its title")
	assert.Regexp(t, `demo/widgets#2\s+Add a farewell helper\s+error\s+needs a human: review timeout \(label human-review-required\)`, text, "the escalated PR")
	assert.Regexp(t, `(?s)Recent escalations.*demo/widgets#2\s+review timeout`, text, "the escalation")

	// Hostile values, published with the key the demo printed, as a
	// compromised publisher could.
	conn, err := natsx.Connect(t.Context(), natsx.Options{URL: field(`NATS:\s+(nats://\S+)`), CredsFile: field(`NATS key:\s+(\S+)`), Name: "page-test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	const (
		script = `<script>window.pwned=1;document.title="pwned"</script>`
		attr   = `"><img src=x onerror="window.pwned=2;document.title='pwned'">`
	)
	emit := events.NewEmitter(conn.JS, "page-test")
	for _, d := range []events.Data{
		&events.ReviewInProgress{Base: events.Base{PR: ghref.PR{Owner: "demo", Repo: "widgets", Number: 9}, HeadSHA: "abc", Title: attr}, Status: events.StatusInProgress, Actor: script},
		&events.MergeQueued{Base: events.Base{PR: ghref.PR{Owner: "demo", Repo: "widgets", Number: 8}, HeadSHA: "abc"}, BaseBranch: attr},
		// An agent's run whose last message and tools are hostile, for
		// the PR's own page.
		&events.FeedbackAddressed{Base: events.Base{PR: ghref.PR{Owner: "demo", Repo: "widgets", Number: 7}, HeadSHA: "def"}, PreviousHeadSHA: "abc", FixCycle: 1,
			Agent: &events.AgentRunSummary{Preset: "claude-code", Turns: 3, CostUSD: 0.25, Tools: []string{attr + "×1"}, Final: "done " + script}},
	} {
		_, _, err := emit.Emit(t.Context(), d, "page-test")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		text, _, _ = see("")
		return strings.Contains(text, "demo/widgets#9") && strings.Contains(text, "demo/widgets#8") && strings.Contains(text, "demo/widgets#7")
	}, 30*time.Second, 200*time.Millisecond, "the page never showed the hostile events:\n%s", text)
	text, title, pwned := see("page-hostile.png")
	assert.Equal(t, "prloop", title, "an injected script set the title")
	assert.False(t, pwned, "an injected script ran")
	assert.Contains(t, text, "👀 "+script+" is reviewing", "the script is shown as text")
	assert.Contains(t, text, "demo/widgets into "+attr, "the base branch is shown as text")
	assert.Regexp(t, `demo/widgets#9\s+`+regexp.QuoteMeta(attr), text, "the title is shown as text")
	assert.Regexp(t, `demo/widgets#8 — waiting \d+s`, text, "the queue entry, with how long it has waited")

	// The PR's own page, by the board's link, lists the run as text.
	text, title, pwned = see("pr-runs.png", chromedp.Click(chromedp.CSS(`a.runs[href="pr/demo/widgets/7"]`)), chromedp.WaitReady(chromedp.CSS("#runs")))
	assert.Equal(t, "prloop: demo/widgets#7", title, "an injected script set the title")
	assert.False(t, pwned, "an injected script ran")
	assert.Contains(t, text, "fix pushed as def", "the run's outcome")
	assert.Contains(t, text, "done "+script, "the agent's last message is shown as text")
	assert.Contains(t, text, attr+"×1", "the tools are shown as text")
}
