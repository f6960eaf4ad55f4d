package feedback

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentProgram reads the program a `sh -c PRLOOP_AGENT_CMD` runs
// first, as the shell would, or says it cannot be known without running
// the shell (then the start-up check is skipped, never failed).
func TestAgentProgram(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cmd, want string
		known           bool
	}{
		{name: "the default", cmd: "claude -p --permission-mode acceptEdits", want: "claude", known: true},
		{name: "leading blanks", cmd: "  \tcodex exec", want: "codex", known: true},
		{name: "assignments first", cmd: "FOO=1 BAR='a b' claude -p", want: "claude", known: true},
		{name: "assignment with an expansion", cmd: "RECORD_DIR=$HOME/x sh agent.sh", want: "sh", known: true},
		{name: "a script run by sh", cmd: "sh script.sh", want: "sh", known: true},
		{name: "absolute path", cmd: "/opt/agent/bin/agent --yes", want: "/opt/agent/bin/agent", known: true},
		{name: "quoted path with a space", cmd: `'/opt/my agent/run' -p`, want: "/opt/my agent/run", known: true},
		{name: "double-quoted", cmd: `"claude" -p`, want: "claude", known: true},
		{name: "escaped space", cmd: `/opt/my\ agent -p`, want: "/opt/my agent", known: true},
		{name: "only a program", cmd: "aider", want: "aider", known: true},
		{name: "a shell keyword", cmd: "if true; then claude; fi", want: "if", known: true},
		{name: "PATH assigned", cmd: "PATH=/opt/bin:$PATH claude"},
		{name: "command substitution in an assignment", cmd: "FOO=$(echo a b) claude"},
		{name: "program from a variable", cmd: "$AGENT -p"},
		{name: "expansion in double quotes", cmd: `"$HOME/bin/agent" -p`},
		{name: "home directory", cmd: "~/bin/agent -p"},
		{name: "glob", cmd: "/opt/agent-*/bin/agent"},
		{name: "subshell", cmd: "(cd sub && claude)"},
		{name: "relative path: a file of the worktree", cmd: "./scripts/agent.sh"},
		{name: "unterminated quote", cmd: "'claude -p"},
		{name: "empty", cmd: "   "},
		{name: "only assignments", cmd: "FOO=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, known := agentProgram(tt.cmd)
			require.Equal(t, tt.known, known, "known")
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestQuoteTail: the end of the agent's stderr that an escalation quotes
// is its visible text, at most stderrTailLines lines and about
// stderrTailBytes bytes, the last ones.
func TestQuoteTail(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range 50 {
		many = append(many, "line "+strings.Repeat("x", i%3)+string(rune('a'+i%26)))
	}
	long := strings.Repeat("é", 3000) + "END"
	tests := []struct {
		name, in string
		check    func(t *testing.T, got string)
	}{
		{name: "nothing", in: "", check: func(t *testing.T, got string) { assert.Equal(t, "; it wrote nothing to stderr", got) }},
		{name: "one line", in: "sh: 1: claude: not found\n", check: func(t *testing.T, got string) {
			assert.Equal(t, "; its stderr ends with:\nsh: 1: claude: not found", got)
		}},
		{name: "the last lines", in: strings.Join(many, "\n"), check: func(t *testing.T, got string) {
			body := strings.TrimPrefix(got, "; its stderr ends with:\n")
			assert.Equal(t, strings.Join(many[len(many)-stderrTailLines:], "\n"), body)
		}},
		{name: "the last bytes, on a rune boundary", in: long, check: func(t *testing.T, got string) {
			body := strings.TrimPrefix(got, "; its stderr ends with:\n")
			assert.LessOrEqual(t, len(body), stderrTailBytes+len("[…]"))
			assert.True(t, strings.HasPrefix(body, "[…]é"), "starts with %.10q", body)
			assert.True(t, strings.HasSuffix(body, "END"))
		}},
		{name: "invisible and control characters go", in: "\x1b[31mred\x1b[0m\u202Ecba <!-- hidden -->", check: func(t *testing.T, got string) {
			assert.Equal(t, "; its stderr ends with:\n[31mred[0mcba", got)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, quoteTail(tt.in))
		})
	}
}
