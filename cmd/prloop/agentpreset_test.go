package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// TestRun_MissingPresetAgentExitsAtStart: `prloop run -sim` with a coding
// agent preset whose binary is not installed exits at start, for each
// preset, with a message naming the binary, the sandbox and
// PRLOOP_AGENT_READONLY_PATHS, instead of finding out after the first
// change request's runs.
func TestRun_MissingPresetAgentExitsAtStart(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/prloop")
	for _, tt := range []struct{ preset, binary string }{{"claude-code", "claude"}, {"codex", "codex"}} {
		t.Run(tt.preset, func(t *testing.T) {
			t.Parallel()
			p := proctest.Start(t, bin, []string{
				"PATH=/usr/bin:/bin", "PRLOOP_AGENT=" + tt.preset, "PRLOOP_AGENT_CMD=",
				"PRLOOP_NATS_PORT=-1", "PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_NATS_URL=", "PRLOOP_REPOS=",
				"PRLOOP_DATA_DIR=" + t.TempDir(),
			}, "run", "-sim")
			exited, err := p.Wait(time.Minute)
			require.True(t, exited, "prloop run kept running without its agent")
			require.Error(t, err, "a missing agent is a failed start")
			for _, want := range []string{"the agent command " + tt.binary + " is not found inside the", "sandbox", "PRLOOP_AGENT_READONLY_PATHS"} {
				assert.Contains(t, p.Stderr.String(), want)
			}
		})
	}
}
