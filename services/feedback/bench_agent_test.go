package feedback_test

import (
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// BenchmarkAgentRun_ClaudeCode is the overhead prloop adds to one run of
// the real Claude Code CLI (BENCHMARKS.md, "Coding agent: what prloop adds
// to a run"): the same one-turn run against the scripted model server,
// started as a user would outside prloop, and as prloop's agent runner
// starts it (sandbox, stream parsing with the budget check after each
// line, transcript and log) with each sandbox backend.
func BenchmarkAgentRun_ClaudeCode(b *testing.B) {
	bin, readOnly := agentBinDir(b, "claude")
	model := anthropicSim(b, func(int, string) turn { return turn{text: "Nothing to change."} })
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + model.srv.URL, "ANTHROPIC_API_KEY=sk-ant-bench"}
	const prompt = "Say that there is nothing to change."

	b.Run("outside prloop", func(b *testing.B) {
		dir, home := b.TempDir(), b.TempDir()
		for b.Loop() {
			cmd := exec.Command(filepath.Join(bin, "claude"), "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits")
			cmd.Dir, cmd.Stdin, cmd.Stdout = dir, strings.NewReader(prompt), io.Discard
			cmd.Env = append(slices.Clip(env), "HOME="+home, "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1")
			require.NoError(b, cmd.Run())
		}
	})
	for _, mode := range []sandbox.Mode{sandbox.None, sandbox.Bwrap, sandbox.Namespaces} {
		b.Run("prloop, sandbox "+string(mode), func(b *testing.B) {
			sb, err := sandbox.New(sandbox.Options{Mode: mode, ReadOnly: readOnly}, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Skipf("sandbox %s: %v", mode, err)
			}
			agent, err := feedback.NewAgentForTest(feedback.Config{
				Agent: "claude-code", AgentPermissionMode: "acceptEdits",
				AgentTimeout: time.Minute, AgentKillGrace: time.Second, AgentLogMaxBytes: 1 << 20,
			}, sb)
			require.NoError(b, err)
			dir, files := b.TempDir(), b.TempDir()
			for b.Loop() {
				var st feedback.RunStats
				require.NoError(b, agent.Run(b.Context(), feedback.AgentRun{
					Dir: dir, Prompt: prompt, PromptFile: filepath.Join(files, "prompt.md"),
					LogFile: filepath.Join(files, "agent.log"), Transcript: filepath.Join(files, "agent.jsonl"), Env: env, Stats: &st,
				}))
				require.Equal(b, 1, st.Turns)
			}
		})
	}
}
