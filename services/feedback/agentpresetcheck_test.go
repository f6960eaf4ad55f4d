package feedback_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// TestCheckAgent_PresetBinaryMustResolveInTheSandbox: for each preset, the
// start-up check looks the preset's own binary (claude, codex) up inside
// the sandbox: not installed, or installed where the sandbox hides it,
// the start fails naming the binary, the sandbox and
// PRLOOP_AGENT_READONLY_PATHS; shown with PRLOOP_AGENT_READONLY_PATHS, it
// passes.
func TestCheckAgent_PresetBinaryMustResolveInTheSandbox(t *testing.T) {
	t.Parallel()
	for _, preset := range []struct{ name, bin string }{{"claude-code", "claude"}, {"codex", "codex"}} {
		hidden := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(hidden, preset.bin), []byte("#!/bin/sh\nexit 0\n"), 0o755))
		tests := []struct {
			name     string
			path     string
			readOnly []string
			want     []string
		}{
			{name: "not installed", path: "/usr/bin:/bin", want: []string{"the agent command " + preset.bin + " is not found inside the", "PRLOOP_AGENT_READONLY_PATHS"}},
			{name: "hidden by the sandbox", path: hidden + ":/usr/bin:/bin", want: []string{preset.bin, "PRLOOP_AGENT_READONLY_PATHS", hidden}},
			{name: "shown", path: hidden + ":/usr/bin:/bin", readOnly: []string{hidden}},
		}
		for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
			for _, tt := range tests {
				t.Run(preset.name+"/"+string(mode)+"/"+tt.name, func(t *testing.T) {
					t.Parallel()
					requireSandbox(t, mode)
					svc, err := feedback.New(feedback.Config{
						Common: config.Common{DataDir: t.TempDir()}, WorkspaceDir: t.TempDir(),
						Agent: preset.name, AgentSandbox: string(mode), AgentReadOnlyPaths: tt.readOnly,
					}, feedback.Deps{
						GitHub: noGitHub{}, Log: slog.New(slog.DiscardHandler),
						Environ: func() []string { return []string{"PATH=" + tt.path} },
					})
					require.NoError(t, err)
					err = svc.CheckAgent(t.Context())
					if len(tt.want) == 0 {
						require.NoError(t, err)
						return
					}
					require.Error(t, err)
					for _, w := range append(tt.want, string(mode)+" sandbox") {
						assert.Contains(t, err.Error(), w)
					}
				})
			}
		}
	}
}
