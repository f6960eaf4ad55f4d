package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// TestRuntime_SharedBudgetJoinsTheInstallations: with
// PRLOOP_GITHUB_SHARED_BUDGET, two processes on one NATS each have an
// entry in the installation's budget record before their first request,
// kept alive from then on (a start-up longer than the entry's TTL must
// not let it lapse before Serve), and a process that stops marks its
// entry gone.
func TestRuntime_SharedBudgetJoinsTheInstallations(t *testing.T) {
	t.Parallel()
	w := simtest.Start(t, nil)
	conn := natstest.Start(t)
	common := config.Common{
		NATSURL: conn.URL, NATSCredsFile: conn.CredsFile, HTTPAddr: "127.0.0.1:0", ShutdownGrace: 2 * time.Second, StreamReplicas: 1,
		LogLevel: "info", LogFormat: "text",
	}
	cfg := github.Config{APIURL: w.Server.URL, Token: simtest.Token, Concurrency: 20, SharedBudget: true}
	var rts []*app.Runtime
	for range 2 {
		rt, err := app.Start(t.Context(), "test", common, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		_, err = rt.NewGitHub(t.Context(), cfg)
		require.NoError(t, err)
		rts = append(rts, rt)
	}
	kv, err := conn.JS.KeyValue(t.Context(), github.BudgetBucket)
	require.NoError(t, err)
	entries := func() map[string]struct {
		Expires time.Time `json:"expires"`
	} {
		e, err := kv.Get(t.Context(), github.BudgetShareKey)
		require.NoError(t, err)
		var m map[string]struct {
			Expires time.Time `json:"expires"`
		}
		require.NoError(t, json.Unmarshal(e.Value(), &m))
		return m
	}
	joined := entries()
	assert.Len(t, joined, 2, "each process joined before its first request")
	require.Eventually(t, func() bool {
		for id, e := range entries() {
			if !e.Expires.After(joined[id].Expires) {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "each entry renewed before Serve (every TTL/3)")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rts[0].Serve(ctx, idle{}) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	gone := 0
	for _, e := range entries() {
		if !e.Expires.After(time.Now()) {
			gone++
		}
	}
	assert.Equal(t, 1, gone, "the stopped process marked its entry gone")
	_ = rts[1].Close(context.Background())
}
