package main

// A new user's first contact with the operator commands (issue 30): they
// wait for their result, fail at once with one line saying why, and
// `prloop run` refuses settings it would ignore. Each runs the real binary.

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/prstatus"
)

// cliRun runs the prloop binary with args and env until it exits (within
// limit) and returns it and how long it took.
func cliRun(t *testing.T, env []string, limit time.Duration, args ...string) (*proctest.Process, error, time.Duration) {
	t.Helper()
	bin := proctest.Build(t, "./cmd/prloop") // built once per test binary: not part of the time
	start := time.Now()
	p := proctest.Start(t, bin, env, args...)
	exited, err := p.Wait(limit)
	took := time.Since(start)
	require.True(t, exited, "prloop %v still running after %s; stderr:\n%s", args, limit, p.Stderr.String())
	return p, err, took
}

// TestWatch_ChecksThePRWithGitHub: `prloop watch` asks GitHub first. A PR
// that does not exist, or is closed, is an error and publishes nothing,
// instead of a watch that shows it "waiting for review" for ever.
func TestWatch_ChecksThePRWithGitHub(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	sim, err := ghsim.New(ghsim.Options{Dir: t.TempDir(), RealClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	demo, err := ghsim.SeedDemo(sim)
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	env := []string{"PRLOOP_NATS_URL=" + conn.URL, "PRLOOP_NATS_CREDS_FILE=" + conn.CredsFile,
		"PRLOOP_GITHUB_API_URL=" + srv.URL, "GITHUB_TOKEN=" + demo.Tokens[ghsim.DemoReviewer], "GH_TOKEN="}
	published := func(pr ghref.PR) bool {
		s, err := conn.JS.Stream(t.Context(), events.StreamName)
		require.NoError(t, err)
		_, err = s.GetLastMsgForSubject(t.Context(), events.Subject(pr, events.TypeWatchRequested))
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		}
		return err == nil
	}
	missing := demo.Repo.PR(99)

	// Sequential: the last case closes the PR the second watches.
	for _, tc := range []struct {
		name   string
		pr     ghref.PR
		before func(t *testing.T)
		args   []string
		errIn  string // empty: success
	}{
		{name: "no such PR", pr: missing, errIn: "demo/widgets#99: no such pull request on GitHub"},
		{name: "an open PR", pr: demo.PR},
		{name: "a closed PR", pr: demo.PR, before: func(t *testing.T) { require.NoError(t, sim.ClosePR(demo.PR)) },
			errIn: "demo/widgets#1 is closed: prloop watches open pull requests"},
		{name: "unchecked on request", pr: missing, args: []string{"-check=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			p, err, _ := cliRun(t, env, 30*time.Second, append([]string{"watch", tc.pr.String()}, tc.args...)...)
			if tc.errIn == "" {
				require.NoError(t, err, p.Stderr.String())
				assert.Contains(t, p.Stdout.String(), "watching "+tc.pr.String())
				assert.True(t, published(tc.pr), "PRWatchRequested published")
				return
			}
			require.Error(t, err, "exits non-zero; stdout: %s", p.Stdout.String())
			assert.Contains(t, p.Stderr.String(), tc.errIn)
			assert.NotContains(t, p.Stdout.String(), "watching")
		})
	}
	assert.True(t, published(missing), "-check=false published the last one")
}

// TestCLI_FailsFastWithoutPrloop: status, explain and events fail within
// 2 s with one line naming the cause (nothing at the URL; no key, and
// where it was looked for; a key the server refuses), instead of retrying
// for 10 s or printing a raw "nats: permissions violation".
func TestCLI_FailsFastWithoutPrloop(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	closed := "nats://" + refusingAddr(t)
	emptyDir := t.TempDir()
	strange := filepath.Join(t.TempDir(), "other.nk")
	_, err := natsx.UserKey(strange, 0o600)
	require.NoError(t, err)

	for _, c := range []struct {
		name string
		env  []string
		want []string
	}{
		{name: "nothing listening", env: []string{"PRLOOP_NATS_URL=" + closed},
			want: []string{"no prloop at " + closed, "is prloop running? start it with 'prloop run', or point PRLOOP_NATS_URL at its NATS"}},
		{name: "no key", env: []string{"PRLOOP_NATS_URL=" + conn.URL, "PRLOOP_NATS_CREDS_FILE=", "PRLOOP_DATA_DIR=" + emptyDir},
			want: []string{"no NATS key: PRLOOP_NATS_CREDS_FILE is not set and there is no " + natsx.KeyFile(emptyDir), "PRLOOP_DATA_DIR"}},
		{name: "a key the server refuses", env: []string{"PRLOOP_NATS_URL=" + conn.URL, "PRLOOP_NATS_CREDS_FILE=" + strange},
			want: []string{"refused the NATS key " + strange + " (PRLOOP_NATS_CREDS_FILE)"}},
	} {
		for _, args := range [][]string{{"status"}, {"explain", "acme/widgets#1"}, {"events", "-follow=false"}} {
			t.Run(c.name+"/"+args[0], func(t *testing.T) {
				t.Parallel()
				p, err, took := cliRun(t, append(c.env, "GITHUB_TOKEN=", "GH_TOKEN="), 30*time.Second, args...)
				require.Error(t, err, "exits non-zero")
				// How fast is a figure, not an assertion (a busy machine
				// starts a process slowly); that it did not retry is the
				// one line below: each retry logged one.
				t.Logf("prloop %s failed after %s", args[0], took)
				stderr := strings.TrimSpace(p.Stderr.String())
				assert.NotContains(t, stderr, "\n", "one line")
				assert.NotContains(t, stderr, "nats: permissions violation")
				for _, w := range c.want {
					assert.Contains(t, stderr, w)
				}
			})
		}
	}
}

// TestEvents_Since: `prloop events -since D` prints only the events of the
// last D; without it, every event recorded, as before.
func TestEvents_Since(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	env := []string{"PRLOOP_NATS_URL=" + conn.URL, "PRLOOP_NATS_CREDS_FILE=" + conn.CredsFile}
	p, err, _ := cliRun(t, env, time.Minute, "events", "-since", "-1h") // (and the binary is built)
	require.Error(t, err)
	assert.Contains(t, p.Stderr.String(), "-since -1h0m0s is negative")

	em := events.NewEmitter(conn.JS, "test")
	old, recent := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}, ghref.PR{Owner: "acme", Repo: "widgets", Number: 2}
	_, _, err = em.Emit(t.Context(), sampleOf(events.TypeReviewPending, old), "1")
	require.NoError(t, err)
	published := time.Now()
	// JetStream stamps a message when it stores it. The window begins half
	// a second after the first event whenever the command starts, so it
	// never holds it; events published while the command follows do fall
	// in it.
	require.Eventually(t, func() bool { return time.Since(published) > time.Second }, 10*time.Second, 50*time.Millisecond)
	window := (time.Since(published) - 500*time.Millisecond).Round(time.Millisecond).String()
	f := proctest.Start(t, proctest.Build(t, "./cmd/prloop"), env, "events", "-since", window)
	n := 0
	require.Eventually(t, func() bool {
		n++
		_, _, err := em.Emit(t.Context(), sampleOf(events.TypeReviewPending, recent), strconv.Itoa(n))
		require.NoError(t, err)
		return strings.Contains(f.Stdout.String(), recent.String())
	}, 30*time.Second, 100*time.Millisecond, "the events of the window never shown; stderr: %s", f.Stderr.String())
	require.NoError(t, f.Signal(syscall.SIGINT))
	exited, err := f.Wait(10 * time.Second)
	require.True(t, exited)
	require.NoError(t, err, f.Stderr.String())
	assert.NotContains(t, f.Stdout.String(), old.String(), "-since %s shows an older event", window)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "all by default"},
		{name: "the last hour", args: []string{"-since", "1h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err, _ := cliRun(t, env, 30*time.Second, append([]string{"events", "-follow=false"}, tc.args...)...)
			require.NoError(t, err, p.Stderr.String())
			assert.Contains(t, p.Stdout.String(), old.String())
			assert.Contains(t, p.Stdout.String(), recent.String())
		})
	}
}

// TestStatus_AgesNeverNegative: a record stamped after now (the clock was
// moved back, or another host's runs ahead) shows an age of 0s, not
// -59m50s.
func TestStatus_AgesNeverNegative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Time
		ago  string
	}{
		{name: "in the past", at: now.Add(-90 * time.Second), ago: "(1m30s ago)"},
		{name: "in the future", at: now.Add(59*time.Minute + 50*time.Second), ago: "(0s ago)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := prstatus.NewBoard()
			b.Apply(&events.ReviewPending{Base: events.Base{PR: ghref.PR{Owner: "acme", Repo: "widgets", Number: 42}, HeadSHA: "0123456789abcdef"}, Status: events.StatusPending}, tc.at)
			var out bytes.Buffer
			require.NoError(t, printStatus(&out, b.Rows(prstatus.Options{}), now))
			assert.Regexp(t, `acme/widgets#42\s+pending\s+0123456\s+0\s+PRReviewPending `+regexp.QuoteMeta(tc.ago), out.String())
			assert.NotContains(t, out.String(), "-")
		})
	}
}

// TestCheckEnv: unknown PRLOOP_* variables are named, with the known one
// they are a slip of; the test harness's own (PRLOOP_TEST_…) and other
// programs' variables pass.
func TestCheckEnv(t *testing.T) {
	t.Parallel()
	known := knownVars()
	require.Contains(t, known, "PRLOOP_POLL_INTERVAL", "the poller's")
	require.Contains(t, known, "PRLOOP_GITHUB_API_URL", "the GitHub client's")
	require.Contains(t, known, "PRLOOP_AGENT_CMD", "the feedback service's")
	require.Contains(t, known, "PRLOOP_REVIEWERS", "the review policy's")
	for _, tc := range []struct {
		name    string
		environ []string
		err     string // empty: accepted
	}{
		{name: "known and foreign", environ: []string{"PRLOOP_POLL_INTERVAL=5s", "HOME=/root", "GITHUB_TOKEN=x", "PRLOOP_TEST_REQUIRE_SANDBOX=1"}},
		{name: "a slip", environ: []string{"PRLOOP_POLL_INTERVL=5s"}, err: "unknown variable PRLOOP_POLL_INTERVL (did you mean PRLOOP_POLL_INTERVAL?)"},
		{name: "a transposition", environ: []string{"PRLOOP_REPSO=acme/widgets"}, err: "PRLOOP_REPSO (did you mean PRLOOP_REPOS?)"},
		{name: "nothing close", environ: []string{"PRLOOP_ENABLE_EVERYTHING=1"}, err: "unknown variable PRLOOP_ENABLE_EVERYTHING: prloop reads no such setting"},
		{name: "several", environ: []string{"PRLOOP_LOG_LEVLE=debug", "PRLOOP_NATS_UR=nats://x"}, err: "unknown variables PRLOOP_LOG_LEVLE (did you mean PRLOOP_LOG_LEVEL?), PRLOOP_NATS_UR (did you mean PRLOOP_NATS_URL?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := config.CheckEnv(tc.environ, known)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// TestRun_StartupChecks: `prloop run` refuses a misspelt variable before
// starting anything, and says at start what an empty PRLOOP_REPOS means.
func TestRun_StartupChecks(t *testing.T) {
	t.Parallel()
	gh := startTestSim(t)
	base := append(gh.env(), "PRLOOP_NATS_PORT=-1", "PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_NATS_URL=", "PRLOOP_LOG_FORMAT=json", "PRLOOP_AGENT_CMD=true")

	t.Run("a misspelt variable", func(t *testing.T) {
		t.Parallel()
		p, err, _ := cliRun(t, append(base, "PRLOOP_DATA_DIR="+t.TempDir(), "PRLOOP_POLL_INTERVL=5s"), 20*time.Second, "run")
		require.Error(t, err, "exits non-zero")
		assert.Contains(t, p.Stderr.String(), "unknown variable PRLOOP_POLL_INTERVL (did you mean PRLOOP_POLL_INTERVAL?)")
		assert.NotContains(t, p.Stderr.String(), "embedded nats ready", "refused before starting")
	})
	t.Run("no repositories", func(t *testing.T) {
		t.Parallel()
		p := proctest.Start(t, proctest.Build(t, "./cmd/prloop"), append(base, "PRLOOP_DATA_DIR="+t.TempDir(), "PRLOOP_REPOS="), "run")
		require.Eventually(t, func() bool { return strings.Contains(p.Stderr.String(), `"msg":"ready"`) }, 30*time.Second, 20*time.Millisecond,
			"never ready; stderr:\n%s", p.Stderr.String())
		assert.Contains(t, p.Stderr.String(), "PRLOOP_REPOS is empty: prloop discovers no PRs and watches only those named by 'prloop watch'")
		assert.Contains(t, p.Stderr.String(), "set PRLOOP_REPOS=owner/repo")
		require.NoError(t, p.Signal(syscall.SIGTERM))
		exited, err := p.Wait(20 * time.Second)
		require.True(t, exited)
		require.NoError(t, err)
	})
	t.Run("repositories named", func(t *testing.T) {
		t.Parallel()
		p := proctest.Start(t, proctest.Build(t, "./cmd/prloop"), append(base, "PRLOOP_DATA_DIR="+t.TempDir(), "PRLOOP_REPOS=demo/widgets"), "run")
		require.Eventually(t, func() bool { return strings.Contains(p.Stderr.String(), `"msg":"ready"`) }, 30*time.Second, 20*time.Millisecond,
			"never ready; stderr:\n%s", p.Stderr.String())
		assert.NotContains(t, p.Stderr.String(), "PRLOOP_REPOS is empty")
		require.NoError(t, p.Signal(syscall.SIGTERM))
		exited, err := p.Wait(20 * time.Second)
		require.True(t, exited)
		require.NoError(t, err)
	})
}

// TestOpen_WaitsForTheOutcome runs the four services in this process and
// `prloop open` as the user would: it waits for the PR and prints its
// number and URL, or for the refusal (opening the base branch, a
// repository GitHub does not know) and prints the reason with a non-zero
// exit. -wait 0 keeps the fire-and-forget of before.
func TestOpen_WaitsForTheOutcome(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	w := simtest.Start(t, map[string]string{"main.go": "package main\n"}, simtest.GitHTTP())
	dir := t.TempDir()
	for k, v := range map[string]string{
		"PRLOOP_GITHUB_API_URL": w.Server.URL, "GITHUB_TOKEN": simtest.Token, "GH_TOKEN": "",
		"PRLOOP_GITHUB_LOGIN": simtest.Login, "PRLOOP_REPOS": "", "PRLOOP_REVIEWERS": "alice",
		"PRLOOP_POLL_INTERVAL": "1s", "PRLOOP_REVIEW_TIMEOUT": "10m",
		"PRLOOP_DATA_DIR": filepath.Join(dir, "nats"), "PRLOOP_NATS_URL": "", "PRLOOP_NATS_PORT": "-1", "PRLOOP_NATS_CREDS_FILE": "",
		"PRLOOP_HTTP_ADDR": "127.0.0.1:0", "PRLOOP_WORKSPACE_DIR": filepath.Join(dir, "work"), "PRLOOP_MERGE_POLL_INTERVAL": "1s",
		"PRLOOP_AGENT_CMD": "true", "PRLOOP_LOG_LEVEL": "error",
	} {
		t.Setenv(k, v)
	}
	_, rt, _ := startLoop(t, "open-wait")
	env := []string{"PRLOOP_NATS_URL=" + rt.Conn.URL, "PRLOOP_NATS_CREDS_FILE=" + rt.Conn.CredsFile}

	onMain := filepath.Join(dir, "on-main")
	gitIn(t, dir, "clone", "--quiet", w.Sim.GitDir(w.Repo), onMain)
	commitFile(t, onMain, "x.go", "package main\n", "Straight onto main")
	feature := filepath.Join(dir, "feature")
	gitIn(t, dir, "clone", "--quiet", w.Sim.GitDir(w.Repo), feature)
	gitIn(t, feature, "checkout", "--quiet", "-b", "feature/greet")
	commitFile(t, feature, "greet.go", "package main\n", "Add greet")
	later := filepath.Join(dir, "later")
	gitIn(t, dir, "clone", "--quiet", w.Sim.GitDir(w.Repo), later)
	gitIn(t, later, "checkout", "--quiet", "-b", "feature/later")
	commitFile(t, later, "later.go", "package main\n", "Add later")

	for _, tc := range []struct {
		name        string
		args        []string
		out, errOut string // want in stdout on success, in stderr on failure
	}{
		{name: "a new branch", args: []string{w.Repo.String(), "-worktree", feature},
			out: `^opened acme/widgets#\d+ \S+/acme/widgets/pull/\d+ \(feature/greet into main\)$`},
		{name: "the base branch", args: []string{w.Repo.String(), "-worktree", onMain},
			errOut: `prloop refused to open acme/widgets main at [0-9a-f]{7} → the default branch: .*branch "main" is the base branch`},
		{name: "an unknown repository", args: []string{"nosuch/repo", "-worktree", feature},
			errOut: `prloop refused to open nosuch/repo feature/greet .*repository nosuch/repo`},
		{name: "fire and forget", args: []string{w.Repo.String(), "-worktree", later, "-wait", "0"},
			out: `^open requested: acme/widgets feature/later at [0-9a-f]{7} → the default branch \(event [^)]+\); `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err, _ := cliRun(t, env, 90*time.Second, append([]string{"open"}, tc.args...)...)
			if tc.errOut == "" {
				require.NoError(t, err, p.Stderr.String())
				assert.Regexp(t, tc.out, strings.TrimSpace(p.Stdout.String()))
				return
			}
			require.Error(t, err, "exits non-zero; stdout: %s", p.Stdout.String())
			assert.Regexp(t, tc.errOut, p.Stderr.String())
		})
	}
}

// refusingAddr is a loopback address where nothing listens, for the test's
// lifetime: a socket bound to it and never listening, so that connecting
// is refused and no other test's server can take the port meanwhile (a
// closed listener's port could be handed out again at once).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
