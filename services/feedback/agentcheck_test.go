package feedback_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// noGitHub stands in for GitHub where nothing calls it.
type noGitHub struct{ feedback.GitHub }

// TestCheckAgent_ProgramMustResolveInTheSandbox: at start, the agent
// command's program is looked up inside the sandbox, with the paths the
// agent gets. A program in a directory the sandbox does not show (as
// ~/.local/bin or /root/bin would be) fails the start with a message that
// names the program, the sandbox and PRLOOP_AGENT_READONLY_PATHS; the same
// program under PRLOOP_AGENT_READONLY_PATHS passes, in both sandboxes.
func TestCheckAgent_ProgramMustResolveInTheSandbox(t *testing.T) {
	t.Parallel()
	hidden := t.TempDir() // not a system directory: the sandbox hides it
	agent := filepath.Join(hidden, "my-agent")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	tests := []struct {
		name     string
		cmd      string
		path     string // PATH of prloop's environment
		readOnly []string
		// want are parts of the error; none: the check passes.
		want []string
	}{
		{name: "absolute path hidden", cmd: agent + " -p", path: "/usr/bin:/bin", want: []string{"my-agent", "PRLOOP_AGENT_READONLY_PATHS", hidden}},
		{name: "on PATH after assignments", cmd: `FOO='a b' BAR=1 my-agent -p --permission-mode acceptEdits`, path: hidden + ":/usr/bin:/bin",
			want: []string{"the agent command my-agent is not found inside the", "PRLOOP_AGENT_READONLY_PATHS", hidden}},
		{name: "not installed at all", cmd: "no-such-agent-xyz -p", path: "/usr/bin:/bin",
			want: []string{"no-such-agent-xyz", "PRLOOP_AGENT_READONLY_PATHS", "install it under /usr"}},
		{name: "absolute path shown", cmd: agent + " -p", path: "/usr/bin:/bin", readOnly: []string{hidden}},
		{name: "on PATH and shown", cmd: "FOO=1 my-agent -p", path: hidden + ":/usr/bin:/bin", readOnly: []string{hidden}},
		{name: "a script run by sh", cmd: "sh " + agent, path: "/usr/bin:/bin"},
		// Not the agent's fault: said so, not blamed on the agent.
		{name: "no sh on PATH", cmd: agent, path: hidden, readOnly: []string{hidden}, want: []string{"check the agent command"}},
		{name: "program known only to the shell", cmd: "$AGENT -p", path: "/usr/bin:/bin"},
	}
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		for _, tt := range tests {
			t.Run(string(mode)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				requireSandbox(t, mode)
				svc, err := feedback.New(feedback.Config{
					Common:       config.Common{DataDir: t.TempDir()},
					WorkspaceDir: t.TempDir(), AgentCmd: tt.cmd, AgentSandbox: string(mode), AgentReadOnlyPaths: tt.readOnly,
				}, feedback.Deps{
					GitHub: noGitHub{}, Log: slog.New(slog.DiscardHandler),
					Environ: func() []string { return []string{"PATH=" + tt.path, "AGENT=" + agent} },
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

// TestFeedback_AgentNotRunnable_EscalatesAtOnce: an agent command the
// shell cannot run (exit 127: not found; 126: not executable) fails the
// same way every time. It is run once, not PRLOOP_AGENT_ATTEMPTS times,
// and the escalation quotes the end of its stderr. Nothing in the
// escalation, which the comment and the webhook quote, names a path of the
// server: not the workspace, not the worktree the agent printed.
func TestFeedback_AgentNotRunnable_EscalatesAtOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, missing, stderr string
	}{
		{name: "not found", missing: "127", stderr: "no-such-agent-xyz: not found"},
		{name: "not executable", missing: "126", stderr: "Permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.comment(e.pr, "please fix")
			cfg := e.config("missing.sh", func(c *feedback.Config) {
				c.AgentCmd = "MISSING=" + tt.missing + " " + c.AgentCmd
				c.AgentBackoff = time.Hour // a retry would never come in time
			})
			e.start("a", cfg)
			e.request(e.pr, e.head, 0)

			esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
			assert.Equal(t, events.ReasonFeedbackFailed, esc.Reason)
			assert.Contains(t, esc.LastError, "exit status "+tt.missing)
			assert.Contains(t, esc.LastError, "its stderr ends with:")
			assert.Contains(t, esc.LastError, tt.stderr)
			assert.Contains(t, esc.LastError, "working in <worktree> with the prompt in <prompt dir>/prompt.md", "the paths the agent printed, replaced")
			assert.Contains(t, esc.Detail, "PRLOOP_AGENT_READONLY_PATHS")
			runs, _ := e.runs()
			assert.Len(t, runs, 1, "no retry")
			all, err := json.Marshal(esc)
			require.NoError(t, err)
			assert.NotContains(t, string(all), cfg.WorkspaceDir, "a path of the server in what GitHub is shown")
		})
	}
}
