package poller_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

const (
	tokPrloop = "tok-prloop"
	waitFor   = time.Minute // catches a hang, times nothing (BENCHMARKS.md does)
)

// env is a poller test world: embedded NATS, the GitHub simulator with one
// repository and PR, and a recorder of every event.
type env struct {
	t      *testing.T
	conn   *natsx.Conn
	sim    *ghsim.Sim
	srv    *httptest.Server
	client *github.Client
	store  *state.Store
	rec    *eventstest.Recorder
	repo   ghref.Repo
	pr     ghref.PR
	emit   *events.Emitter
	// reg holds the metrics of the pollers the test starts.
	reg *prometheus.Registry

	stop func()
}

// newEnv builds the world with the simulator's page size capped at
// maxPerPage (default simtest.TinyPages, so that the few signals a test
// makes cross page boundaries).
func newEnv(t *testing.T, maxPerPage ...int) *env {
	t.Helper()
	per := simtest.TinyPages
	if len(maxPerPage) > 0 {
		per = maxPerPage[0]
	}
	sim, err := ghsim.New(ghsim.Options{Dir: t.TempDir(), MaxPerPage: per})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.AddUser("prloop-bot", false)
	sim.AddToken(tokPrloop, "prloop-bot")
	sim.AddUser("copilot-pull-request-reviewer", true)
	sim.AddUser("github-actions[bot]", true)
	sim.AddUser("coderabbitai[bot]", true)

	repo, err := sim.CreateRepo("acme", "socket.io", map[string]string{"main.go": "package main\n"})
	require.NoError(t, err)
	for login, perm := range map[string]string{"alice": "write", "bob": "maintain", "reader": "read", "agent": "write", "prloop-bot": "write"} {
		require.NoError(t, sim.SetPermission(repo, login, perm))
	}
	_, err = sim.PushCommit(repo, "feature", "agent", map[string]string{"main.go": "package main\n\nfunc main() {}\n"}, "Add main")
	require.NoError(t, err)
	sim.Advance(time.Minute)
	pr, err := sim.OpenPR(repo, ghsim.PRInput{Title: "Add main", Head: "feature", Author: "agent"})
	require.NoError(t, err)
	sim.Advance(time.Minute)

	client, err := github.New(t.Context(), github.Config{APIURL: srv.URL, Token: tokPrloop}, github.Options{Logger: quiet()})
	require.NoError(t, err)
	conn := natstest.Start(t)
	store, err := state.Ensure(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	return &env{
		t: t, conn: conn, sim: sim, srv: srv, client: client, store: store,
		rec: eventstest.Record(t, conn.JS), repo: repo, pr: pr, emit: events.NewEmitter(conn.JS, "test"),
		reg: metrics.NewRegistry(),
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// config is a fast-polling poller configuration for tests.
func (e *env) config(mut ...func(*poller.Config)) poller.Config {
	cfg := poller.Config{
		PolicyConfig: review.PolicyConfig{
			ReviewProtocols:       []string{"emoji", "reviews"},
			ReviewFailurePatterns: []string{"API Error", "Timeout", "503", "workflow failed"},
			PermissionCacheTTL:    time.Hour,
		},
		ReviewTimeout:   2 * time.Hour,
		PollInterval:    50 * time.Millisecond,
		PollConcurrency: 4,
		EscalationLabel: "human-review-required",
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// start runs a poller until the returned stop is called or the test ends.
func (e *env) start(cfg poller.Config) *poller.Service {
	e.t.Helper()
	s := e.newPoller(cfg)
	e.run(s)
	return s
}

// newPoller builds a poller of the test world.
func (e *env) newPoller(cfg poller.Config) *poller.Service {
	return poller.New(cfg, poller.Deps{
		GitHub: e.client, Store: e.store, JS: e.conn.JS, Log: quiet(), Self: "prloop-bot",
		Merged: poller.MergedByPrloop(e.conn.JS), Now: e.sim.Now, Metrics: metrics.NewPoller(e.reg),
	})
}

// run runs s until e.stop is called or the test ends.
func (e *env) run(s *poller.Service) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(e.t, err)
		case <-time.After(15 * time.Second):
			e.t.Error("poller did not stop")
		}
	}
	e.t.Cleanup(e.stop)
}

// watch publishes a watch request for pr, as `prloop watch` does.
func (e *env) watch(pr ghref.PR) {
	e.t.Helper()
	_, _, err := e.emit.Emit(e.t.Context(), &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "1")
	require.NoError(e.t, err)
}

// watchPending watches the PR and waits for its first PRReviewPending.
func (e *env) watchPending() {
	e.t.Helper()
	e.watch(e.pr)
	e.rec.Wait(e.t, e.pr, events.TypeReviewPending, waitFor)
}

// tick advances the simulated clock so that each step's signals have their
// own second, as they would on GitHub.
func (e *env) tick() { e.sim.Advance(2 * time.Second) }

// Simulator routes the tests count.
const (
	probeRoute     = "GET /repos/{owner}/{repo}/pulls" // every probe of a repository
	reactionsRoute = "GET /repos/{owner}/{repo}/issues/{number}/reactions"
	reviewsRoute   = "GET /repos/{owner}/{repo}/pulls/{number}/reviews"
)

// waitProbes waits until the poller has probed the repository n more
// times: time enough for any event the current signals would cause.
func (e *env) waitProbes(n int) {
	e.t.Helper()
	e.waitRequests(probeRoute, n)
}

// waitRequests waits until the simulator has served route n more times.
func (e *env) waitRequests(route string, n int) {
	e.t.Helper()
	from := e.sim.Stats().ByRoute[route]
	require.Eventually(e.t, func() bool { return e.sim.Stats().ByRoute[route] >= from+n }, waitFor, 10*time.Millisecond,
		"%s served fewer than %d more times", route, n)
}

// askForChanges watches the PR, lets alice comment on its head and returns
// the PRFeedbackReceived that follows.
func (e *env) askForChanges(body string) *events.FeedbackReceived {
	e.t.Helper()
	e.watchPending()
	e.tick()
	_, err := e.sim.AddIssueComment(e.pr, "alice", body)
	require.NoError(e.t, err)
	return e.rec.Wait(e.t, e.pr, events.TypeFeedbackReceived, waitFor).Data.(*events.FeedbackReceived)
}

// signalsChangeNothing waits until the poller has read the PR's new
// signals and had time to act on them, checks that they changed nothing
// since the watch, and that an authorized reviewer's 👍 still approves.
func (e *env) signalsChangeNothing() {
	e.t.Helper()
	e.waitRequests(reactionsRoute, 1) // the poller read the new signals
	// One more full interval after the fetch, to let any event land.
	e.waitProbes(3)
	assert.Equal(e.t, []events.Type{events.TypeWatchRequested, events.TypeReviewPending}, e.rec.Types(e.pr))
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(e.t, err)
	e.rec.Wait(e.t, e.pr, events.TypeReviewApproved, waitFor)
}
