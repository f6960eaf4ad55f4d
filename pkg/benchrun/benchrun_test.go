package benchrun_test

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/benchrun"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{name: "none", in: nil, p: 0.5, want: 0},
		{name: "median takes the rank below", in: ds, p: 0.5, want: 5},
		{name: "p99 of ten is the ninth", in: ds, p: 0.99, want: 9},
		{name: "max", in: ds, p: 1, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, benchrun.Percentile(tt.in, tt.p))
		})
	}
}

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	n := 0
	require.NoError(t, benchrun.WaitUntil(t.Context(), 10*time.Second, func() bool { n++; return n == 3 }))
	assert.ErrorIs(t, benchrun.WaitUntil(t.Context(), 30*time.Millisecond, func() bool { return false }), benchrun.ErrTimedOut)
}

// TestChild_StopTerminatesThenKills: a process that ends on SIGTERM ends
// with it; one that ignores it is killed after the grace period.
func TestChild_StopTerminatesThenKills(t *testing.T) {
	t.Parallel()
	dir, err := benchrun.ScratchDir("benchrun-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	polite, err := benchrun.Start(exec.Command("sleep", "60"))
	require.NoError(t, err)
	polite.Stop(10 * time.Second)
	assert.ErrorContains(t, polite.Err(), "terminated")

	cmd := exec.Command("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stubborn, err := benchrun.Start(cmd)
	require.NoError(t, err)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "the shell ignores SIGTERM from here on")
	start := time.Now()
	stubborn.Stop(200 * time.Millisecond)
	assert.ErrorContains(t, stubborn.Err(), "killed")
	assert.Less(t, time.Since(start), 10*time.Second)
}
