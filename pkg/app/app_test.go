package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// idle is a service that does nothing until it is stopped.
type idle struct{}

func (idle) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// start starts a runtime on its own NATS server; serve then runs it.
func start(t *testing.T) *app.Runtime {
	t.Helper()
	conn := natstest.Start(t)
	common := config.Common{
		NATSURL: conn.URL, NATSCredsFile: conn.CredsFile, HTTPAddr: "127.0.0.1:0", ShutdownGrace: 2 * time.Second, StreamReplicas: 1,
		LogLevel: "info", LogFormat: "text",
	}
	rt, err := app.Start(t.Context(), "test", common, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return rt
}

// serve runs rt's HTTP server (and no service) until the test ends, and
// returns the server's base URL.
func serve(t *testing.T, rt *app.Runtime) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, idle{}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	require.Eventually(t, func() bool { return rt.HTTPAddr() != "" }, 5*time.Second, 5*time.Millisecond)
	return "http://" + rt.HTTPAddr()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestRuntime_ServesHealthReadinessAndMetrics starts the HTTP server of a
// runtime watching a GitHub client and scrapes it: /healthz, /readyz (the
// GitHub check asks once, then trusts its answer; NewGitHub asked once
// before, checking the credentials) and /metrics with the Go,
// process and GitHub families.
func TestRuntime_ServesHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	w := simtest.Start(t, nil)
	rt := start(t)
	client, err := rt.NewGitHub(t.Context(), github.Config{APIURL: w.Server.URL, Token: simtest.Token})
	require.NoError(t, err)
	_, err = client.GetRepo(t.Context(), w.Repo)
	require.NoError(t, err)
	base := serve(t, rt)

	code, body := get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	for range 3 {
		code, body = get(t, base+"/readyz")
		assert.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "ready\n", body)
	}
	assert.Equal(t, 2.0, metricstest.Value(rt.Registry, "prloop_github_requests_total", "route", "GET /rate_limit"),
		"NewGitHub's check of the credentials asked once, readiness once and cached the answer")

	code, body = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, family := range []string{
		"go_goroutines", "process_cpu_seconds_total", "prloop_github_requests_total",
		"prloop_github_rate_limit_remaining", "prloop_github_rate_limit_limit", "prloop_github_cache_entries",
	} {
		assert.Contains(t, body, "\n# TYPE "+family+" ", "family %s", family)
	}
	assert.Contains(t, body, `prloop_github_requests_total{outcome="ok",route="GET /repos/{owner}/{repo}",status="200"} 1`)
	assert.Contains(t, body, `prloop_github_rate_limit_remaining{resource="core"} `)
	assert.NotContains(t, body, simtest.Token)
}

// TestRuntime_ReadyzFailsWhileGitHubUnreachable points the GitHub client at
// a closed port: /readyz answers 503 and says why, once however many clients
// of that API the services made, and without the token.
func TestRuntime_ReadyzFailsWhileGitHubUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	rt := start(t)
	const token = "tok-do-not-show"
	for range 2 { // as the services of the all-in-one binary do
		_, err = rt.NewGitHub(t.Context(), github.Config{APIURL: "http://" + addr, Token: token})
		require.NoError(t, err)
	}
	base := serve(t, rt)

	began := time.Now()
	code, body := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Less(t, time.Since(began), 3*time.Second, "the check does not retry")
	assert.Equal(t, 1, strings.Count(body, "github: "), body)
	assert.Contains(t, body, "GET /rate_limit")
	assert.Contains(t, body, "connection refused")
	assert.NotContains(t, body, token)
	assert.NotContains(t, body, "nats", "only GitHub fails")

	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "alive, if not ready")
}

func TestCachedCheck_TrustsSuccessLongerThanFailure(t *testing.T) {
	t.Parallel()
	calls := 0
	fail := true
	check := app.CachedCheck(time.Hour, 0, func(context.Context) error {
		calls++
		if fail {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	require.Error(t, check(t.Context()))
	fail = false
	require.NoError(t, check(t.Context()), "a failure is not trusted for long (here: not at all)")
	fail = true
	require.NoError(t, check(t.Context()), "a success is trusted for its TTL")
	assert.Equal(t, 2, calls)

	n := 0
	gaveUp := app.CachedCheck(time.Hour, time.Hour, func(ctx context.Context) error { n++; return ctx.Err() })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.Error(t, gaveUp(ctx))
	require.NoError(t, gaveUp(t.Context()), "a caller that gave up leaves no failure cached")
	assert.Equal(t, 2, n)
}
