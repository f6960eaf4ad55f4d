package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
)

// fakeClient is a GitHub client as the rate-limit collector sees it.
type fakeClient struct {
	rates map[string]github.RateLimit
	stats github.Stats
}

func (f fakeClient) RateLimits() map[string]github.RateLimit { return f.rates }
func (f fakeClient) Stats() github.Stats                     { return f.stats }

// TestRegistry_EveryFamilyOnOneRegistry builds every service's metrics on
// one registry, as the all-in-one binary does, uses each once, and checks
// that every family is gathered, passes Prometheus' lint, and that a second
// service constructor shares the first one's collectors.
func TestRegistry_EveryFamilyOnOneRegistry(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	gh := metrics.NewGitHub(reg)
	p := metrics.NewPoller(reg)
	f := metrics.NewFeedback(reg)
	m := metrics.NewMerger(reg)
	e := metrics.NewEscalator(reg)
	require.NotPanics(t, func() { metrics.NewGitHub(reg); metrics.NewConsumer(reg) }, "constructors may run twice on a registry")

	gh.OnRequest("GET /repos/{owner}/{repo}/pulls", 200, github.OutcomeOK)
	gh.OnRetry("GET /repos/{owner}/{repo}/pulls", github.OutcomeServerError)
	reset := time.Unix(1_900_000_000, 0)
	gh.Watch(fakeClient{rates: map[string]github.RateLimit{"core": {Resource: "core", Limit: 5000, Remaining: 4990, Reset: reset}}})
	p.Probe(metrics.ProbeUnchanged)
	p.Evaluation(metrics.TriggerProbe, nil)
	p.Transition(events.TypeReviewApproved)
	p.Consumer.Delivered("poller", events.TypeWatchRequested, 2)
	p.Consumer.Handled("poller", events.TypeWatchRequested, events.HandledAck, time.Millisecond)
	p.Consumer.Panicked("poller", events.TypeWatchRequested)
	p.Consumer.DeadLetters("poller", 1)
	f.Attempt(metrics.FeedbackAddressed, time.Minute)
	f.AgentRun(metrics.AgentFixed)
	m.QueueDepths(map[metrics.Queue]int{{Repo: "acme/widgets", Base: "main"}: 2})
	m.Result(metrics.MergeMerged)
	e.Escalated(events.ReasonChecksFailed, events.SeverityBlocking)
	e.Webhook(nil)

	names := metricstest.Families(reg)
	for _, want := range []string{
		"go_goroutines", "process_cpu_seconds_total",
		"prloop_github_requests_total", "prloop_github_retries_total",
		"prloop_github_rate_limit_remaining", "prloop_github_rate_limit_limit", "prloop_github_rate_limit_reset_timestamp_seconds",
		"prloop_github_rate_limit_waits_total", "prloop_github_cache_entries", "prloop_github_cache_bytes",
		"prloop_poller_probes_total", "prloop_poller_evaluations_total", "prloop_transitions_total",
		"prloop_consumer_deliveries_total", "prloop_consumer_redeliveries_total", "prloop_consumer_handled_total",
		"prloop_consumer_handle_duration_seconds", "prloop_consumer_panics_total", "prloop_dlq_messages",
		"prloop_feedback_attempts_total", "prloop_feedback_attempt_duration_seconds", "prloop_feedback_agent_runs_total",
		"prloop_merge_queue_depth", "prloop_merge_results_total",
		"prloop_escalations_total", "prloop_escalation_webhook_deliveries_total",
	} {
		assert.Contains(t, names, want)
	}
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	for _, pr := range problems {
		if strings.HasPrefix(pr.Metric, "go_") || strings.HasPrefix(pr.Metric, "process_") {
			continue // client_golang's own
		}
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}

	assert.Equal(t, 4990.0, metricstest.Value(reg, "prloop_github_rate_limit_remaining", "resource", "core"))
	assert.Equal(t, float64(reset.Unix()), metricstest.Value(reg, "prloop_github_rate_limit_reset_timestamp_seconds", "resource", "core"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_consumer_redeliveries_total", "consumer", "poller", "type", "PRWatchRequested"))
	assert.Zero(t, metricstest.Value(reg, "prloop_poller_probes_total", "result", "error"), "known results start at 0")

	metrics.NewPoller(reg).Transition(events.TypeReviewApproved)
	assert.Equal(t, 2.0, metricstest.Value(reg, "prloop_transitions_total", "type", "PRReviewApproved"),
		"a second poller on the registry counts into the same family")
}

// TestGitHub_NotModifiedAndRateLimits runs a real client against the
// simulator: a repeated GET is answered 304 and counted as not_modified, and
// the rate limit the simulator reported is exported per resource.
func TestGitHub_NotModifiedAndRateLimits(t *testing.T) {
	t.Parallel()
	w, pr := simWithPR(t)

	reg := metrics.NewRegistry()
	m := metrics.NewGitHub(reg)
	c, err := github.New(t.Context(), github.Config{APIURL: w.Server.URL, Token: simtest.Token},
		github.Options{Logger: slog.New(slog.DiscardHandler), Observer: m})
	require.NoError(t, err)
	m.Watch(c)

	const route = "GET /repos/{owner}/{repo}/pulls/{pull_number}"
	_, err = c.GetPull(t.Context(), pr)
	require.NoError(t, err)
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "ok", "status", "200"))
	assert.Zero(t, metricstest.Value(reg, "prloop_github_requests_total", "outcome", "not_modified"))

	_, err = c.GetPull(t.Context(), pr)
	require.NoError(t, err)
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "not_modified", "status", "304"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "ok"), "the 304 is not an ok")

	limit := metricstest.Value(reg, "prloop_github_rate_limit_limit", "resource", "core")
	remaining := metricstest.Value(reg, "prloop_github_rate_limit_remaining", "resource", "core")
	assert.Positive(t, limit)
	assert.Equal(t, limit-1, remaining, "one request spent; the 304 was free")
	assert.Positive(t, metricstest.Value(reg, "prloop_github_cache_entries"))
}

// TestGitHub_RetriesCountedByCause: a 502 and a 429 are retried, each
// counted as a request with its outcome and as a retry with its cause.
func TestGitHub_RetriesCountedByCause(t *testing.T) {
	t.Parallel()
	w := simtest.Start(t, nil)
	reg := metrics.NewRegistry()
	m := metrics.NewGitHub(reg)
	c, err := github.New(t.Context(), github.Config{APIURL: w.Server.URL, Token: simtest.Token}, github.Options{
		Logger: slog.New(slog.DiscardHandler), Observer: m,
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	require.NoError(t, err)
	w.Sim.InjectFault(ghsim.Fault{Method: http.MethodGet, Path: "/pulls$", Kind: ghsim.FaultStatus502})
	w.Sim.InjectFault(ghsim.Fault{Method: http.MethodGet, Path: "/pulls$", Kind: ghsim.FaultStatus429})

	_, err = c.ListPulls(t.Context(), w.Repo, "open")
	require.NoError(t, err)
	const route = "GET /repos/{owner}/{repo}/pulls"
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "server_error", "status", "502"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "rate_limited", "status", "429"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_requests_total", "route", route, "outcome", "ok"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_retries_total", "route", route, "cause", "server_error"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_github_retries_total", "route", route, "cause", "rate_limited"))
}

// TestGitHub_RateLimitOfSeveralClients: with one client per service, the
// freshest report of a resource wins and counters are summed.
func TestGitHub_RateLimitOfSeveralClients(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m := metrics.NewGitHub(reg)
	now := time.Now()
	m.Watch(fakeClient{
		rates: map[string]github.RateLimit{"core": {Limit: 5000, Remaining: 100, Observed: now}},
		stats: github.Stats{RateLimitWaits: 2, CacheEntries: 3},
	})
	m.Watch(fakeClient{
		rates: map[string]github.RateLimit{
			"core":   {Limit: 5000, Remaining: 900, Observed: now.Add(-time.Minute)},
			"search": {Limit: 30, Remaining: -1, Observed: now}, // unknown since a wait
		},
		stats: github.Stats{RateLimitWaits: 1, CacheEntries: 4},
	})
	assert.Equal(t, 100.0, metricstest.Value(reg, "prloop_github_rate_limit_remaining", "resource", "core"))
	assert.Equal(t, 0.0, metricstest.Value(reg, "prloop_github_rate_limit_remaining", "resource", "search"), "no sample while unknown")
	assert.Equal(t, 30.0, metricstest.Value(reg, "prloop_github_rate_limit_limit", "resource", "search"))
	assert.Equal(t, 3.0, metricstest.Value(reg, "prloop_github_rate_limit_waits_total"))
	assert.Equal(t, 7.0, metricstest.Value(reg, "prloop_github_cache_entries"))
}

func TestConsumer_CountsDeliveriesRedeliveriesAndOutcomes(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	c := metrics.NewConsumer(reg)
	c.Delivered("merger", events.TypeReviewApproved, 1)
	c.Handled("merger", events.TypeReviewApproved, events.HandledRetry, 10*time.Millisecond)
	c.Delivered("merger", events.TypeReviewApproved, 2)
	c.Handled("merger", events.TypeReviewApproved, events.HandledAck, 10*time.Millisecond)
	c.Delivered("merger", "", 1)
	c.Handled("merger", "", events.HandledDeadLetter, 0)
	c.Delivered("merger", "SomethingElse", 1)
	c.Panicked("merger", events.TypeReviewApproved)
	c.DeadLetters("merger", 3)
	c.DeadLetters("merger", 2)
	c.DeadLetters("poller", 0)

	tests := []struct {
		name   string
		family string
		labels []string
		want   float64
	}{
		{name: "deliveries", family: "prloop_consumer_deliveries_total", labels: []string{"type", "PRReviewApproved"}, want: 2},
		{name: "redeliveries", family: "prloop_consumer_redeliveries_total", labels: []string{"consumer", "merger"}, want: 1},
		{name: "retry", family: "prloop_consumer_handled_total", labels: []string{"outcome", "retry"}, want: 1},
		{name: "ack", family: "prloop_consumer_handled_total", labels: []string{"outcome", "ack"}, want: 1},
		{name: "undecodable", family: "prloop_consumer_handled_total", labels: []string{"type", "unknown", "outcome", "dead_letter"}, want: 1},
		{name: "unknown type", family: "prloop_consumer_deliveries_total", labels: []string{"type", "other"}, want: 1},
		{name: "durations", family: "prloop_consumer_handle_duration_seconds", labels: []string{"consumer", "merger"}, want: 3},
		{name: "panics", family: "prloop_consumer_panics_total", labels: []string{"consumer", "merger", "type", "PRReviewApproved"}, want: 1},
		{name: "dead letters now", family: "prloop_dlq_messages", labels: []string{"consumer", "merger"}, want: 2},
		{name: "no dead letters", family: "prloop_dlq_messages", labels: []string{"consumer", "poller"}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, metricstest.Value(reg, tc.family, tc.labels...))
		})
	}
}

func TestMerger_QueueDepthsDropToZero(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m := metrics.NewMerger(reg)
	a, b := metrics.Queue{Repo: "acme/widgets", Base: "main"}, metrics.Queue{Repo: "acme/widgets", Base: "release"}
	m.QueueDepths(map[metrics.Queue]int{a: 2, b: 1})
	assert.Equal(t, 2.0, metricstest.Value(reg, "prloop_merge_queue_depth", "base", "main"))
	assert.Equal(t, 3.0, metricstest.Value(reg, "prloop_merge_queue_depth", "repo", "acme/widgets"))
	m.QueueDepths(map[metrics.Queue]int{a: 1})
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_merge_queue_depth", "base", "main"))
	assert.Equal(t, 0.0, metricstest.Value(reg, "prloop_merge_queue_depth", "base", "release"))
	n, err := testutil.GatherAndCount(reg, "prloop_merge_queue_depth")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "an emptied queue stays at 0")
}

func TestEscalator_LabelsStayBounded(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	e := metrics.NewEscalator(reg)
	e.Escalated(events.ReasonMaxFixCycles, events.SeverityBlocking)
	e.Escalated("made_up_reason", "dire")
	e.Webhook(errors.New("down"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_escalations_total", "reason", "max_fix_cycles", "severity", "blocking"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_escalations_total", "reason", "other", "severity", "other"))
	assert.Equal(t, 1.0, metricstest.Value(reg, "prloop_escalation_webhook_deliveries_total", "result", "failed"))
	assert.Zero(t, metricstest.Value(reg, "prloop_escalation_webhook_deliveries_total", "result", "ok"))
}

func TestNilRegistry_MetricsWorkUnexported(t *testing.T) {
	t.Parallel()
	assert.NotPanics(t, func() {
		metrics.NewPoller(nil).Probe(metrics.ProbeChanged)
		metrics.NewFeedback(nil).Attempt(metrics.FeedbackSkipped, time.Second)
		metrics.NewMerger(nil).QueueDepths(nil)
		metrics.NewEscalator(nil).Webhook(nil)
		metrics.NewGitHub(nil).OnRequest("GET /", 0, github.OutcomeNetworkError)
	})
}

// TestGitHub_BudgetPointsAndQueueWait: two clients sharing one budget (the
// all-in-one binary's services) are counted once in
// prloop_github_points_per_minute, a 304 included (GitHub's secondary
// limits count it), and each request's wait is observed by priority.
func TestGitHub_BudgetPointsAndQueueWait(t *testing.T) {
	t.Parallel()
	w, pr := simWithPR(t)

	reg := metrics.NewRegistry()
	m := metrics.NewGitHub(reg)
	budget := github.NewBudget(github.BudgetOptions{Concurrency: 4, Observer: m})
	for range 2 {
		c, err := github.New(t.Context(), github.Config{APIURL: w.Server.URL, Token: simtest.Token},
			github.Options{Logger: slog.New(slog.DiscardHandler), Observer: m, Budget: budget})
		require.NoError(t, err)
		m.Watch(c)
		_, err = c.GetPull(t.Context(), pr)
		require.NoError(t, err)
	}
	const route = "GET /repos/{owner}/{repo}/pulls/{pull_number}"
	assert.Equal(t, 2.0, metricstest.Value(reg, "prloop_github_points_per_minute", "endpoint", route), "a 200 and a 304, one budget")
	assert.Equal(t, 2.0, metricstest.Value(reg, "prloop_github_queue_wait_seconds", "priority", "normal"), "the sample count: two waits")
}

// simWithPR starts a simulator with one open PR of the agent's.
func simWithPR(t *testing.T) (*simtest.World, ghref.PR) {
	t.Helper()
	w := simtest.Start(t, nil)
	_, err := w.Sim.PushCommit(w.Repo, "feat", "agent", map[string]string{"f.txt": "f\n"}, "Add f")
	require.NoError(t, err)
	pr, err := w.Sim.OpenPR(w.Repo, ghsim.PRInput{Title: "Add f", Head: "feat", Author: "agent"})
	require.NoError(t, err)
	return w, pr
}
