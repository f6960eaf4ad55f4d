package main

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// sampleOf returns a payload of type t about pr.
func sampleOf(t events.Type, pr ghref.PR) events.Data {
	b := events.Base{PR: pr, HeadSHA: "abc"}
	switch t {
	case events.TypeCreateRequested:
		b.PR.Number = events.CreateRequestedNumber
		return &events.CreateRequested{Base: b, Worktree: "/nonexistent", Branch: "feature/x"}
	case events.TypeCreated:
		return &events.Created{Base: b, Branch: "feature/x", BaseBranch: "main"}
	case events.TypeWatchRequested:
		return &events.WatchRequested{Base: b}
	case events.TypeFeedbackReceived:
		return &events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested}
	case events.TypeReviewApproved:
		return &events.ReviewApproved{Base: b, Status: events.StatusApproved}
	case events.TypeReviewTimeout:
		return &events.ReviewTimeout{Base: b, Reason: events.ReasonReviewTimeout}
	case events.TypeEscalationRequested:
		return &events.EscalationRequested{Base: b, Reason: events.ReasonFeedbackFailed, Severity: events.SeverityBlocking}
	case events.TypeFeedbackAddressed:
		return &events.FeedbackAddressed{Base: b, FixCycle: 1}
	case events.TypeFeedbackSkipped:
		return &events.FeedbackSkipped{Base: b}
	case events.TypeEscalated:
		return &events.Escalated{Base: b, Reason: events.ReasonFeedbackFailed}
	case events.TypeMerged:
		return &events.Merged{Base: b, MergeSHA: "m"}
	case events.TypeMergeFailed:
		return &events.MergeFailed{Base: b, Reason: events.ReasonApprovalWithdrawn}
	case events.TypeBranchUpdated:
		return &events.BranchUpdated{Base: b, PreviousHeadSHA: "def", Method: "update-branch"}
	case events.TypeEscalationResolved:
		return &events.EscalationResolved{Base: b, Epoch: 1}
	case events.TypeClosed:
		return &events.Closed{Base: b}
	case events.TypeReviewPending:
		return &events.ReviewPending{Base: b, Status: events.StatusPending}
	case events.TypeReviewInProgress:
		return &events.ReviewInProgress{Base: b, Status: events.StatusInProgress}
	case events.TypeMergeQueued:
		return &events.MergeQueued{Base: b, Position: 1, BaseBranch: "main"}
	case events.TypeMergeWaiting:
		return &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci"}}
	case events.TypeMergeCandidate:
		return &events.MergeCandidate{Base: b, BaseBranch: "main", State: events.CandidateBuilt, Candidate: "c0ffee", Branch: "prloop/queue/main/1", BaseSHA: "ba5e", Position: 1}
	case events.TypeConflictResolveRequested:
		return &events.ConflictResolveRequested{Base: b, BaseBranch: "main", BaseSHA: "ba5e"}
	case events.TypeChecksFailed:
		return &events.ChecksFailed{Base: b, Round: 1, Checks: []events.FailedCheck{{Name: "test", Kind: events.CheckKindRun, Conclusion: "failure", ID: 1}}}
	case events.TypeAgentWaiting:
		return &events.AgentWaiting{Base: b, State: events.AgentWaitStarted, Reason: events.AgentWaitDailyBudget, SpentUSD: 10, BudgetUSD: 10,
			ResumeAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	case events.TypeQueueFreezeRequested:
		b.PR.Number = events.RepoNumber
		return &events.QueueFreezeRequested{Base: b, BaseBranch: "main", Reason: "release"}
	case events.TypeQueueFrozen:
		b.PR.Number = events.RepoNumber
		return &events.QueueFrozen{Base: b, BaseBranch: "main", Reason: "release"}
	case events.TypeQueueUnfrozen:
		b.PR.Number = events.RepoNumber
		return &events.QueueUnfrozen{Base: b, BaseBranch: "main"}
	case events.TypeCommandReceived:
		return &events.CommandReceived{Base: b, Command: events.CommandExplain, CommentID: 7, Author: "alice"}
	}
	panic("no sample for " + string(t))
}

// TestServiceBinaries_ShutDownOnSIGTERM runs each service binary as its own
// process against a separate NATS server, lets it consume, and checks that
// SIGTERM stops it within 5 s, exit code 0, with its consumer drained.
func TestServiceBinaries_ShutDownOnSIGTERM(t *testing.T) {
	t.Parallel()
	services := []struct {
		name  string
		types []events.Type
	}{
		{name: poller.Name, types: poller.Types},
		{name: feedback.Name, types: feedback.Types},
		{name: merger.Name, types: merger.Types},
		{name: escalator.Name, types: escalator.Types},
	}
	gh := startTestSim(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			t.Parallel()
			bin := proctest.Build(t, "./services/"+svc.name+"/cmd/"+svc.name)
			conn := natstest.Start(t)
			ctx := t.Context()

			em := events.NewEmitter(conn.JS, "test")
			for i, typ := range svc.types {
				_, _, err := em.Emit(ctx, sampleOf(typ, ghref.PR{Owner: "acme", Repo: "widgets", Number: i + 1}), "1")
				require.NoError(t, err)
			}

			// The default agent (claude) is not installed here, and the
			// feedback service would not start without it.
			p := proctest.Start(t, bin, append(gh.env(),
				"PRLOOP_NATS_URL="+conn.URL, "PRLOOP_NATS_CREDS_FILE="+conn.CredsFile, "PRLOOP_LOG_FORMAT=json", "PRLOOP_HTTP_ADDR=127.0.0.1:0",
				"PRLOOP_AGENT_CMD=true",
			))
			cons := natstest.Consumer(t, conn.JS, svc.name)
			require.Eventually(t, func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.Delivered.Consumer >= uint64(len(svc.types)) && info.NumAckPending == 0 && info.NumPending == 0
			}, 20*time.Second, 20*time.Millisecond, "service consumes and acks what was published")
			require.Eventually(t, func() bool { return strings.Contains(p.Stderr.String(), `"msg":"ready"`) }, 10*time.Second, 10*time.Millisecond)

			start := time.Now()
			require.NoError(t, p.Signal(syscall.SIGTERM))
			exited, err := p.Wait(5 * time.Second)
			require.True(t, exited, "still running 5s after SIGTERM")
			require.NoError(t, err, "exit status after SIGTERM")
			t.Logf("%s stopped %s after SIGTERM", svc.name, time.Since(start).Round(time.Millisecond))

			info, err := cons.Info(ctx)
			require.NoError(t, err)
			assert.Zero(t, info.NumAckPending, "nothing left unacknowledged")
			assert.Equal(t, info.Delivered.Consumer, info.AckFloor.Consumer, "every delivery acked")
			assert.Contains(t, p.Stderr.String(), `"msg":"stopped"`)
		})
	}
}

// TestServiceBinaries_NeedNATSURL: a service binary started without
// PRLOOP_NATS_URL exits non-zero saying so, instead of embedding a private
// NATS server whose stream nobody else publishes to and that still passes
// /readyz.
func TestServiceBinaries_NeedNATSURL(t *testing.T) {
	t.Parallel()
	gh := startTestSim(t)
	for _, name := range []string{poller.Name, feedback.Name, merger.Name, escalator.Name} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := proctest.Build(t, "./services/"+name+"/cmd/"+name)
			p := proctest.Start(t, bin, append(gh.env(),
				"PRLOOP_NATS_URL=", "PRLOOP_DATA_DIR="+t.TempDir(), "PRLOOP_NATS_PORT=-1", "PRLOOP_HTTP_ADDR=127.0.0.1:0",
			))
			exited, err := p.Wait(20 * time.Second)
			require.True(t, exited, "still running without PRLOOP_NATS_URL; stderr:\n%s", p.Stderr.String())
			require.Error(t, err, "exit status")
			assert.Contains(t, p.Stderr.String(), "PRLOOP_NATS_URL is not set")
			assert.NotContains(t, p.Stderr.String(), "embedded nats ready")
		})
	}
}

// TestServiceBinaries_RefuseAMisspeltVariable: a service binary, like
// prloop run, exits non-zero at start on a PRLOOP_* variable prloop does
// not read, naming the one it is a slip of, instead of ignoring it; the
// other services' variables (a deployment's shared configuration) pass.
func TestServiceBinaries_RefuseAMisspeltVariable(t *testing.T) {
	t.Parallel()
	gh := startTestSim(t)
	for _, name := range []string{poller.Name, feedback.Name, merger.Name, escalator.Name} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := proctest.Build(t, "./services/"+name+"/cmd/"+name)
			p := proctest.Start(t, bin, append(gh.env(),
				"PRLOOP_NATS_URL=nats://127.0.0.1:1", "PRLOOP_DATA_DIR="+t.TempDir(), "PRLOOP_HTTP_ADDR=127.0.0.1:0",
				"PRLOOP_MERGE_METHOD=squash", "PRLOOP_AGENT_TIMEOUT=5m", "PRLOOP_POLL_INTERVL=5s",
			))
			exited, err := p.Wait(20 * time.Second)
			require.True(t, exited, "still running with a misspelt variable; stderr:\n%s", p.Stderr.String())
			require.Error(t, err, "exit status")
			assert.Contains(t, p.Stderr.String(), "unknown variable PRLOOP_POLL_INTERVL (did you mean PRLOOP_POLL_INTERVAL?)")
			assert.NotContains(t, p.Stderr.String(), "PRLOOP_MERGE_METHOD", "another service's variable is known")
		})
	}
}

// TestPrloopRun_EmbeddedNATSAndEmitTest runs the all-in-one binary with its
// embedded NATS, publishes a test event with 'prloop emit-test' as a user
// would, and sees it as a structured CloudEvent on pr.>.
func TestPrloopRun_EmbeddedNATSAndEmitTest(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/prloop")
	dataDir := t.TempDir()
	p := proctest.Start(t, bin, []string{
		"PRLOOP_DATA_DIR=" + dataDir, "PRLOOP_NATS_PORT=-1", "PRLOOP_LOG_FORMAT=json",
		"PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_NATS_URL=", "PRLOOP_REPOS=", "PRLOOP_AGENT_CMD=true",
	}, "run", "-sim")
	urlRE := regexp.MustCompile(`"msg":"embedded nats ready".*?"url":"(nats://[^"]+)"`)
	var url string
	require.Eventually(t, func() bool {
		m := urlRE.FindStringSubmatch(p.Stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil && strings.Contains(p.Stderr.String(), `"msg":"ready"`)
	}, 20*time.Second, 10*time.Millisecond)
	// "ready" means each service's durable consumer exists on the server
	// (the readiness checks); the service logs "consumer ready" a moment
	// later, once its fetch loop runs, so that line may come after it.
	for _, name := range []string{poller.Name, feedback.Name, merger.Name, escalator.Name} {
		re := regexp.MustCompile(`"msg":"consumer ready"[^\n]*"consumer":"` + name + `"`)
		require.Eventually(t, func() bool { return re.MatchString(p.Stderr.String()) }, 20*time.Second, 10*time.Millisecond,
			"the %s consumer never said it was ready", name)
	}

	// Watch pr.> with a plain NATS subscription without credentials, as
	// `nats sub 'pr.>'` would.
	watcher := natstest.Dial(t, url)
	// (Only acme's: the poller publishes about the simulator's demo/widgets#1
	// meanwhile.)
	sub, err := watcher.SubscribeSync("pr.acme.>")
	require.NoError(t, err)
	require.NoError(t, watcher.Flush())

	// Publishing takes the key in the data directory, named by the
	// credentials variable here and found through PRLOOP_DATA_DIR below.
	emit := proctest.Start(t, bin, []string{"PRLOOP_NATS_URL=" + url, "PRLOOP_NATS_CREDS_FILE=" + natsx.KeyFile(dataDir)}, "emit-test", "-pr", "Acme/socket.io#7")
	exited, err := emit.Wait(20 * time.Second)
	require.True(t, exited)
	require.NoError(t, err, emit.Stderr.String())
	assert.Contains(t, emit.Stdout.String(), "published PRReviewPending")

	msg, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, "pr.acme.socket=2eio.7.PRReviewPending", msg.Subject)
	assert.Equal(t, events.ContentType, msg.Header.Get("Content-Type"))
	e, d, err := events.Decode(msg.Data)
	require.NoError(t, err)
	assert.Equal(t, "/prloop/cli", e.Source())
	assert.Equal(t, msg.Header.Get("Nats-Msg-Id"), e.ID())
	assert.Equal(t, "Acme/socket.io#7", d.Ref().String())

	// The operator commands against the running prloop, and its simulator
	// (which prloop watch asks whether the PR is open).
	simRE := regexp.MustCompile(`GitHub simulator at (\S+) with .*reviewer token for alice: (\S+)`)
	sim := simRE.FindStringSubmatch(p.Stderr.String())
	require.NotNil(t, sim, "the simulator's URL and tokens are printed")
	cli := func(args ...string) *proctest.Process {
		t.Helper()
		c := proctest.Start(t, bin, []string{"PRLOOP_NATS_URL=" + url, "PRLOOP_DATA_DIR=" + dataDir,
			"PRLOOP_GITHUB_API_URL=" + sim[1], "GITHUB_TOKEN=" + sim[2], "GH_TOKEN="}, args...)
		exited, err := c.Wait(30 * time.Second)
		require.True(t, exited, "prloop %v did not finish", args)
		require.NoError(t, err, "prloop %v: %s", args, c.Stderr.String())
		return c
	}
	watched := cli("watch", "https://github.com/demo/widgets/pull/1")
	assert.Contains(t, watched.Stdout.String(), "watching demo/widgets#1")
	require.Eventually(t, func() bool {
		return strings.Contains(cli("events", "-follow=false", "-pr", "demo/widgets#1").Stdout.String(), "PRReviewPending")
	}, 20*time.Second, 200*time.Millisecond)
	evs := cli("events", "-follow=false", "-pr", "demo/widgets#1").Stdout.String()
	assert.Regexp(t, `demo/widgets#1\s+PRWatchRequested`, evs)
	assert.NotContains(t, evs, "Acme/socket.io#7", "filtered to one PR")

	table := cli("status").Stdout.String()
	assert.Regexp(t, `(?m)^PR\s+STATE\s+HEAD\s+FIX CYCLE\s+LAST EVENT\s+REASON`, table)
	assert.Regexp(t, `(?m)^demo/widgets#1\s+pending\s+[0-9a-f]{7}\s+0\s+`, table)
	var doc struct {
		Schema string           `json:"schema"`
		PRs    []map[string]any `json:"prs"`
	}
	require.NoError(t, json.Unmarshal([]byte(cli("status", "-json").Stdout.String()), &doc))
	assert.Equal(t, StatusSchema, doc.Schema)
	require.NotEmpty(t, doc.PRs)
	assert.Equal(t, "pending", doc.PRs[0]["state"])
	assert.NotContains(t, table, "Acme/socket.io#7", "emit-test's event is not a PR")

	bad := proctest.Start(t, bin, []string{"PRLOOP_NATS_URL=" + url}, "watch", "not-a-pr")
	exited, err = bad.Wait(10 * time.Second)
	require.True(t, exited)
	require.Error(t, err, "a bad PR reference exits non-zero")
	assert.Contains(t, bad.Stderr.String(), "want owner/repo")

	require.NoError(t, p.Signal(syscall.SIGINT))
	exited, err = p.Wait(10 * time.Second)
	require.True(t, exited, "prloop run still running 10s after Ctrl-C")
	require.NoError(t, err)
}

// simEnv is a GitHub simulator served to the binaries under test.
type simEnv struct {
	url, token string
}

func (s simEnv) env() []string {
	return []string{"PRLOOP_GITHUB_API_URL=" + s.url, "GITHUB_TOKEN=" + s.token, "GH_TOKEN=", "PRLOOP_GITHUB_LOGIN=" + ghsim.DemoPrloop}
}

func startTestSim(t *testing.T, setup ...func(*ghsim.Sim)) simEnv {
	t.Helper()
	sim, err := ghsim.New(ghsim.Options{Dir: t.TempDir(), RealClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	demo, err := ghsim.SeedDemo(sim)
	require.NoError(t, err)
	for _, f := range setup {
		f(sim)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return simEnv{url: srv.URL, token: demo.Tokens[ghsim.DemoPrloop]}
}
