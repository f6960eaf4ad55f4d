package feedback_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app/apptest"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/feedback"
)

// tokPrloop is prloop's token on the simulator: a leak anywhere is found
// by a plain search for it.
// waitFor bounds each wait for the loop to get somewhere: it catches a
// hang, it does not time anything (BENCHMARKS.md does). An attempt runs a
// dozen sandboxed git commands and an agent; a failed one, its retry and
// its resume took 10 s with one suite running beside it, and over 20 s
// with two (TestFeedback_PublishFailsAfterPush_OneFixCycle).
const (
	tokPrloop = simtest.Token
	waitFor   = time.Minute
)

// basicHeader is the form the token takes in git's auth header.
var basicHeader = base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tokPrloop))

// env is a feedback test world: embedded NATS, the GitHub simulator with
// one repository and an open PR, what the poller knows of it (which goes
// into its change requests), a recorder of every event, and a git wrapper
// that logs prloop's git calls.
type env struct {
	t      *testing.T
	conn   *natsx.Conn
	sim    *ghsim.Sim
	client *github.Client
	// anchor is the poller's anchor of the head, and worktree and
	// contextPath the watch request's, as the poller's change requests
	// carry them.
	anchor                time.Time
	worktree, contextPath string
	rec                   *eventstest.Recorder
	emit                  *events.Emitter
	repo                  ghref.Repo
	pr                    ghref.PR
	head                  string
	// records is $RECORD_DIR of the scripted agents; gitLog is what the
	// git wrapper logged; logs is every instance's log output.
	records string
	gitBin  string
	gitLog  string
	logs    *proctest.Buffer
	// reg holds the metrics of every instance, as one process's would.
	reg *prometheus.Registry
	// environ is added to every instance's environment.
	environ []string
	// wrapJS, when set, stands between every instance and JetStream (to
	// inject faults).
	wrapJS func(events.JetStreamConsumer) events.JetStreamConsumer
}

// newEnv builds the world with the simulator's page size capped at
// maxPerPage (default simtest.TinyPages, so that the few comments a test
// makes cross page boundaries).
func newEnv(t *testing.T, maxPerPage ...int) *env {
	t.Helper()
	per := simtest.TinyPages
	if len(maxPerPage) > 0 {
		per = maxPerPage[0]
	}
	w := simtest.Start(t, nil, simtest.MaxPerPage(per), simtest.GitHTTP())
	sim, repo := w.Sim, w.Repo
	for login, perm := range map[string]string{"alice": "write", "bob": "maintain", "mallory": "read"} {
		require.NoError(t, sim.SetPermission(repo, login, perm))
	}
	head, err := sim.PushCommit(repo, "feature/x", "agent", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "Add main")
	require.NoError(t, err)
	sim.Advance(time.Minute)
	pr, err := sim.OpenPR(repo, ghsim.PRInput{Title: "Add main", Head: "feature/x", Author: "agent"})
	require.NoError(t, err)
	sim.Advance(time.Minute)

	conn := natstest.Start(t)
	e := &env{
		t: t, conn: conn, sim: sim, client: w.Client(t), rec: eventstest.Record(t, conn.JS),
		emit: events.NewEmitter(conn.JS, "test"), repo: repo, pr: pr, head: head,
		records: t.TempDir(), logs: &proctest.Buffer{}, reg: metrics.NewRegistry(),
	}
	e.gitBin, e.gitLog = gitWrapper(t)
	e.seedState()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the instances' logs:\n%s", e.logs.String())
		}
	})
	return e
}

// seedState sets what the poller knows of a head it just saw, and
// sends in its change requests: the head's anchor is now, so later
// comments count.
func (e *env) seedState() { e.anchor = e.sim.Now() }

// gitWrapper writes a git that logs, one line per call, its arguments and
// the configuration it got from GIT_CONFIG_* variables, then runs git.
func gitWrapper(t *testing.T) (bin, log string) {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "git"), filepath.Join(dir, "calls.log")
	script := `#!/bin/sh
line="args:$(printf ' %s' "$@")"
i=0
while [ "$i" -lt "${GIT_CONFIG_COUNT:-0}" ]; do
	eval "k=\${GIT_CONFIG_KEY_$i} v=\${GIT_CONFIG_VALUE_$i}"
	line="$line | env:$k=$v"
	i=$((i + 1))
done
printf '%s\n' "$line" >>'` + log + `'
exec '` + real + `' "$@"
`
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, log
}

// config is a fast feedback configuration running the named test agent.
func (e *env) config(agent string, mut ...func(*feedback.Config)) feedback.Config {
	script, err := filepath.Abs(filepath.Join("testdata", agent))
	require.NoError(e.t, err)
	cfg := feedback.Config{
		Common: config.Common{ShutdownGrace: 2 * time.Second, StreamReplicas: 1, DataDir: e.t.TempDir()},
		PolicyConfig: review.PolicyConfig{
			ReviewProtocols: []string{"emoji", "reviews"}, ReviewFailurePatterns: review.DefaultFailurePatterns,
			PermissionCacheTTL: time.Hour,
		},
		Concurrency:  2,
		WorkspaceDir: e.t.TempDir(),
		AgentCmd:     fmt.Sprintf("RECORD_DIR=%s sh %s", e.records, script),
		AgentTimeout: 20 * time.Second,
		AgentSandbox: "auto",
		// The scripted agents and their records are outside the worktree.
		AgentReadOnlyPaths: []string{filepath.Dir(script)},
		AgentWritablePaths: []string{e.records},
		AgentMaxCommits:    50,
		AgentMaxBytes:      50 << 20,
		AgentAttempts:      3,
		AgentBackoff:       10 * time.Millisecond,
		AgentKillGrace:     300 * time.Millisecond,
		AgentLogMaxBytes:   64 << 10,
		PromptMaxBytes:     64 << 10,
		ContextMaxBytes:    16 << 10,
		MaxFixCycles:       2,
		EscalationLabel:    "human-review-required",
		GitAuthorName:      "prloop",
		GitAuthorEmail:     "prloop@users.noreply.github.com",
		LeaseTTL:           3 * time.Second,
		AckWait:            2 * time.Second,
		MaxDeliver:         30,
		RetryBackoff:       []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// instance is one running feedback service with its own NATS connection,
// as a separate replica would have.
type instance struct {
	name string
	cfg  feedback.Config
	conn *natsx.Conn
	svc  *feedback.Service
	stop func()
}

// secretEnv is what the environment of prloop's process holds besides the
// test's own: credentials the agent must never see.
func secretEnv() []string {
	return []string{
		"GITHUB_TOKEN=" + tokPrloop, "GH_TOKEN=" + tokPrloop, "MY_COPY_OF_THE_TOKEN=" + tokPrloop,
		"PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH=/secrets/app.pem", "PRLOOP_WEBHOOK_SECRET=whsec-do-not-leak",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: token " + tokPrloop,
	}
}

// start runs a feedback instance until its stop is called or the test
// ends. Each instance has a workspace of its own, as on its own machine.
func (e *env) start(name string, cfg feedback.Config) *instance {
	e.t.Helper()
	ctx := e.t.Context()
	cfg.WorkspaceDir = filepath.Join(cfg.WorkspaceDir, name)
	conn := natstest.Connect(e.t, e.conn)
	kv, err := feedback.OpenBucket(ctx, conn.JS, 1)
	require.NoError(e.t, err)
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", name)
	var js events.JetStreamConsumer = conn.JS
	if e.wrapJS != nil {
		js = e.wrapJS(js)
	}
	svc, err := feedback.New(cfg, feedback.Deps{
		GitHub: e.client, JS: js, KV: kv, Log: log, Holder: name,
		Self: "prloop-bot", Now: e.sim.Now, GitBin: e.gitBin, Metrics: metrics.NewFeedback(e.reg),
		Environ: func() []string {
			return append(append(append(os.Environ(), secretEnv()...), e.environ...), "INSTANCE="+name)
		},
	})
	require.NoError(e.t, err)
	return &instance{name: name, cfg: cfg, conn: conn, svc: svc, stop: apptest.Run(e.t, svc)}
}

// request publishes a change request on the PR's current head, as the
// poller does, with what the poller knows of the PR; parts make the event
// id (the poller's transition number).
func (e *env) request(pr ghref.PR, head string, cycle int, parts ...string) {
	e.t.Helper()
	if len(parts) == 0 {
		parts = []string{"1"}
	}
	_, _, err := e.emit.Emit(e.t.Context(), &events.FeedbackReceived{
		Base: events.Base{PR: pr, HeadSHA: head}, Status: events.StatusChangesRequested, FixCycle: cycle,
		Anchor: e.anchor, Worktree: e.worktree, ContextPath: e.contextPath,
	}, parts...)
	require.NoError(e.t, err)
}

// comment adds an authorized reviewer's inline comment, a second later.
func (e *env) comment(pr ghref.PR, body string) int64 {
	e.t.Helper()
	e.sim.Advance(time.Second)
	id, err := e.sim.AddReviewComment(pr, ghsim.ReviewCommentInput{Login: "alice", Path: "main.go", Line: 3, Body: body})
	require.NoError(e.t, err)
	return id
}

// run is one scripted agent run from $RECORD_DIR/runs.
type run struct {
	pr, instance string
	id           string
	start, end   time.Time // end is zero if it never recorded one
}

// runs parses the scripted agents' records; overlaps are the lines where
// an agent found another one for the same PR alive.
func (e *env) runs() (runs []run, overlaps []string) {
	e.t.Helper()
	f, err := os.Open(filepath.Join(e.records, "runs"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	require.NoError(e.t, err)
	defer f.Close()
	byID := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "overlap" {
			overlaps = append(overlaps, sc.Text())
			continue
		}
		require.Len(e.t, fields, 5, "record line %q", sc.Text())
		id := fields[3]
		ns, _ := strconv.ParseInt(fields[4], 10, 64)
		at := time.Unix(0, ns)
		switch fields[0] {
		case "start":
			byID[id] = len(runs)
			runs = append(runs, run{pr: fields[1], instance: fields[2], id: id, start: at})
		case "end":
			if i, ok := byID[id]; ok {
				runs[i].end = at
			}
		}
	}
	require.NoError(e.t, sc.Err())
	return runs, overlaps
}

// agentFile reads one of the files a scripted agent saved (stdin, env …)
// for the run r.
func (e *env) agentFile(kind string, r run) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.records, kind+"."+r.id))
	require.NoError(e.t, err)
	return string(b)
}

// waitRuns waits until at least n agent runs started.
func (e *env) waitRuns(n int) []run {
	e.t.Helper()
	require.Eventually(e.t, func() bool { rs, _ := e.runs(); return len(rs) >= n }, waitFor, 10*time.Millisecond,
		"waiting for %d agent runs", n)
	rs, _ := e.runs()
	return rs
}

// bareLog lists the commits on the PR branch of the simulator's repository
// since from, newest first, as "sha author subject".
func (e *env) bareLog(branch, from string) []string {
	e.t.Helper()
	out, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "--format=%H %an %s", from+".."+branch).Output()
	require.NoError(e.t, err)
	s := strings.TrimSpace(string(out))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// agentAlive reports whether a process of an agent run on pr is alive: it
// holds the PR's lock (testdata/record.sh), which the kernel frees when the
// run's last process dies, whether or not its TERM trap ran.
func (e *env) agentAlive(pr ghref.PR) bool {
	e.t.Helper()
	key := []byte(pr.String())
	for i, c := range key {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			key[i] = '_'
		}
	}
	f, err := os.OpenFile(filepath.Join(e.records, "lock-"+string(key)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(e.t, err)
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// assertNoOverlap checks that no two agent runs on one PR were alive at
// the same time: by the agents' own check (a lock the kernel frees when a
// run's last process dies), and by the recorded intervals of the runs that
// ended by themselves or on SIGTERM (a run SIGKILLed before its trap ran
// records no end; its lock still tells).
func (e *env) assertNoOverlap() {
	e.t.Helper()
	runs, overlaps := e.runs()
	require.Empty(e.t, overlaps, "an agent started while another one for the same PR was alive")
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.pr != b.pr {
				continue
			}
			if a.end.IsZero() {
				continue
			}
			require.True(e.t, !b.start.Before(a.end), "run %s on %s (%s) started before run %s ended", b.id, b.pr, b.instance, a.id)
		}
	}
}

// metric reads a metric of the instances (see metricstest.Value).
func (e *env) metric(name string, labels ...string) float64 {
	return metricstest.Value(e.reg, name, labels...)
}

// consumerSettled waits until the feedback consumer has nothing pending or
// unacknowledged.
func (e *env) consumerSettled() {
	e.t.Helper()
	cons := natstest.Consumer(e.t, e.conn.JS, feedback.Name)
	require.Eventually(e.t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	}, waitFor, 20*time.Millisecond, "feedback consumer never settled")
}
