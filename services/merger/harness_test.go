package merger_test

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app/apptest"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/merger"
)

// waitFor bounds each wait for the merger to get somewhere: it catches a
// hang, it does not time anything (BENCHMARKS.md does). A rebase, its push
// and the merge after it took over 15 s with a chaos run and a second
// suite on the machine (TestMerger_RebaseWithAppCredentials).
const waitFor = time.Minute

// env is a merger test world: embedded NATS, the GitHub simulator with one
// repository, the queue bucket and a recorder of every event.
type env struct {
	t *testing.T
	*simtest.World
	sim  *ghsim.Sim
	conn *natsx.Conn
	kv   jetstream.KeyValue
	rec  *eventstest.Recorder
	repo ghref.Repo
	emit *events.Emitter
	// reg holds the metrics of every replica.
	reg *prometheus.Registry
	// deps, when set, adjusts the dependencies of every replica started.
	deps func(*merger.Deps)

	mu sync.Mutex
	// thumbs holds alice's 👍 per PR, so that approving again reuses it.
	thumbs map[int]int64
	// anchors holds when the poller first saw each head (watch), which its
	// PRReviewApproved says; epochs each PR's escalation epoch.
	anchors map[string]time.Time
	epochs  map[int]int
}

// newEnv builds the world with the simulator's page size capped at
// maxPerPage (default simtest.TinyPages, so that statuses and check runs
// cross page boundaries).
func newEnv(t *testing.T, maxPerPage ...int) *env {
	t.Helper()
	per := simtest.TinyPages
	if len(maxPerPage) > 0 {
		per = maxPerPage[0]
	}
	return newEnvWith(t, simtest.MaxPerPage(per))
}

// newEnvWith builds the world with the simulator started with opts.
func newEnvWith(t *testing.T, opts ...simtest.Option) *env {
	t.Helper()
	w := simtest.Start(t, map[string]string{"main.go": "package main\n", "README.md": "# widgets\n"}, opts...)
	conn := natstest.Start(t)
	kv, err := merger.EnsureQueue(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	for _, reviewer := range []string{"alice", "bob"} {
		require.NoError(t, w.Sim.SetPermission(w.Repo, reviewer, "write"))
	}
	return &env{
		t: t, World: w, sim: w.Sim, conn: conn, kv: kv,
		rec: eventstest.Record(t, conn.JS), repo: w.Repo, emit: events.NewEmitter(conn.JS, "test"),
		reg: metrics.NewRegistry(), thumbs: map[int]int64{}, anchors: map[string]time.Time{}, epochs: map[int]int{},
	}
}

// config is a fast merger configuration for tests.
func config(mut ...func(*merger.Config)) merger.Config {
	cfg := merger.Config{
		MergeMethod: "squash", RequireChecks: true, ChecksTimeout: time.Minute, UpdateMethod: merger.UpdateMerge,
		MergeRetries: 3, PollInterval: 20 * time.Millisecond, LockTTL: 3 * time.Second, UpdateTimeout: 5 * time.Second,
		PolicyConfig: review.PolicyConfig{ReviewProtocols: []string{"emoji", "reviews"}, PermissionCacheTTL: time.Hour},
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// start runs a merger replica with its own NATS connection and GitHub
// client, as a separate process would, until stop or the end of the test.
func (e *env) start(cfg merger.Config, holder string, gh ...merger.GitHub) (stop func()) {
	e.t.Helper()
	conn := natstest.Connect(e.t, e.conn)
	kv, err := kvlease.OpenBucket(e.t.Context(), conn.JS, merger.Bucket)
	require.NoError(e.t, err)
	var client merger.GitHub = e.Client(e.t)
	if len(gh) > 0 {
		client = gh[0]
	}
	d := merger.Deps{
		GitHub: client, JS: conn.JS, Queue: kv, Log: slog.New(slog.DiscardHandler), Holder: holder,
		Self: simtest.Login, Metrics: metrics.NewMerger(e.reg),
	}
	if e.deps != nil {
		e.deps(&d)
	}
	// MERGER_TEST_LOG=1 shows the replicas' logs, to debug a failing test;
	// it changes nothing else.
	if os.Getenv("MERGER_TEST_LOG") != "" {
		d.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return apptest.Run(e.t, merger.New(cfg, d))
}

// openPR pushes files to a new branch off main and opens a PR from it.
func (e *env) openPR(branch, title string, files map[string]string) (ghref.PR, string) {
	e.t.Helper()
	head, err := e.sim.PushCommit(e.repo, branch, "agent", files, title)
	require.NoError(e.t, err)
	pr, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: title, Body: "Body of " + title + ".", Head: branch, Author: "agent"})
	require.NoError(e.t, err)
	e.sim.Advance(time.Second)
	return pr, head
}

// queuedPending opens a PR whose check is pending, starts a merger replica
// (on gh, when given) and approves the PR; it returns once the PR is queued,
// where it waits for the check.
func (e *env) queuedPending(gh ...merger.GitHub) (ghref.PR, string) {
	e.t.Helper()
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(e.t, e.sim.SetStatus(e.repo, head, "ci", "pending"))
	e.start(config(), "replica-1", gh...)
	e.approve(pr, head, "1")
	e.rec.Wait(e.t, pr, events.TypeMergeQueued, waitFor)
	return pr, head
}

// approve approves head as alice and the poller do: the poller sees the
// head (watch), alice's 👍 on GitHub (once per PR), and PRReviewApproved
// on the bus; id tells apart publishes of the same approval.
func (e *env) approve(pr ghref.PR, head, id string) {
	e.t.Helper()
	e.watch(pr, head)
	e.mu.Lock()
	_, ok := e.thumbs[pr.Number]
	e.mu.Unlock()
	if !ok {
		e.thumbsUp(pr)
	}
	e.announce(pr, head, id)
}

// watch is the poller seeing head for the first time: it anchors it at the
// simulator's present, and its PRReviewApproved of head says so.
func (e *env) watch(_ ghref.PR, head string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.anchors[head]; !ok {
		e.anchors[head] = e.sim.Now()
	}
}

// resume is a human removing the escalation label of pr: the poller's
// approvals carry the next escalation epoch from now on.
func (e *env) resume(pr ghref.PR) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.epochs[pr.Number]++
}

// thumbsUp gives alice's 👍 on the PR and returns its id.
func (e *env) thumbsUp(pr ghref.PR) int64 {
	e.t.Helper()
	id, err := e.sim.AddReaction(pr, "alice", "+1")
	require.NoError(e.t, err)
	e.mu.Lock()
	e.thumbs[pr.Number] = id
	e.mu.Unlock()
	return id
}

// announce publishes PRReviewApproved for head and nothing else: what the
// poller does after it saw an approval, or a forger without one. It
// carries the head's anchor (none for a head never watched) and the PR's
// escalation epoch.
func (e *env) announce(pr ghref.PR, head, id string) {
	e.t.Helper()
	e.mu.Lock()
	anchor, epoch := e.anchors[head], e.epochs[pr.Number]
	e.mu.Unlock()
	_, _, err := e.emit.Emit(e.t.Context(), &events.ReviewApproved{
		Base: events.Base{PR: pr, HeadSHA: head}, Status: events.StatusApproved, Approvers: []string{"alice"},
		Anchor: anchor, Epoch: epoch,
	}, head, id)
	require.NoError(e.t, err)
}

// queued returns the keys of the PRs in any merge queue.
func (e *env) queued() []string {
	e.t.Helper()
	return e.keys("q.>")
}

// keys returns the queue bucket's keys that match filter.
func (e *env) keys(filter string) []string {
	e.t.Helper()
	keys, err := e.kv.ListKeysFiltered(e.t.Context(), filter)
	require.NoError(e.t, err)
	var out []string
	for k := range keys.Keys() {
		// A listing may still name a key deleted while its deleter was
		// being stopped; the key's own read is the truth.
		if _, err := e.kv.Get(e.t.Context(), k); errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// waitQueueEmpty waits until the merger has settled every approval: the
// consumer acked all it received and no PR is queued.
func (e *env) waitQueueEmpty() {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		c, err := e.conn.JS.Consumer(e.t.Context(), events.StreamName, merger.Name)
		if err != nil {
			return false
		}
		info, err := c.Info(e.t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && len(e.keys("pending.>")) == 0 && len(e.queued()) == 0
	}, waitFor, 10*time.Millisecond, "merge queue never emptied")
}

// metric reads a metric of the replicas (see metricstest.Value).
func (e *env) metric(name string, labels ...string) float64 {
	return metricstest.Value(e.reg, name, labels...)
}

// git runs git against the sim's bare repository.
func (e *env) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir", e.sim.GitDir(e.repo)}, args...)...)
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + e.t.TempDir(), "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	require.NoError(e.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// routeCount is how often the sim answered route.
func (e *env) routeCount(route string) int { return e.sim.Stats().ByRoute[route] }

const (
	routeMerge        = "PUT /repos/{owner}/{repo}/pulls/{number}/merge"
	routeUpdateBranch = "PUT /repos/{owner}/{repo}/pulls/{number}/update-branch"
	routeStatus       = "GET /repos/{owner}/{repo}/commits/{ref}/status"
)
