package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// role is the bench's -role flag: the bench runs the naive baseline by
// re-executing itself, here the test binary.
var role = flag.String("role", "", "internal: run as the naive poller")

func TestMain(m *testing.M) {
	flag.Parse()
	if *role == "naive" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runNaive(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBench_BothContendersOnAFewPRs runs the benchmark end to end, the
// real poller binary and the naive baseline, on a few PRs, so that it
// cannot rot silently: it did once, when the baseline lost its right to
// publish and the bench waited for its warm-up instead of failing. Every
// reviewer action of the activity phase must reach the stream.
func TestBench_BothContendersOnAFewPRs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	o := options{
		prs: 12, repos: 2, interval: 30 * time.Second, compress: 30, idleTicks: 1,
		lifecycles: 2, naiveLifecycles: 2, concurrency: 4, naiveConcurrency: 4,
	}
	rs, err := run(ctx, o)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.Equal(t, 3*2, r.changes, "%s: three state changes per lifecycle", r.name)
		assert.Positive(t, r.rssMB, "%s: its peak RSS was read", r.name)
	}
	assert.Equal(t, []string{"prloop", "naive"}, []string{rs[0].name, rs[1].name})
}
