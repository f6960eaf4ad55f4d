package feedback

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentSpec_Presets: PRLOOP_AGENT builds each CLI's command line from
// the settings; unset, it keeps the behaviour from before presets (an
// explicit PRLOOP_AGENT_CMD runs as it did) and defaults to Claude Code.
func TestAgentSpec_Presets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		open    bool // prloop's sandbox is off
		preset  Preset
		argv    []string
		program string
		wantErr string
	}{
		{name: "default: claude-code", cfg: Config{AgentPermissionMode: "acceptEdits"}, preset: PresetClaudeCode,
			argv: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"}, program: "claude"},
		{name: "claude-code with every setting", cfg: Config{
			Agent: "claude-code", AgentPermissionMode: "acceptEdits", AgentModel: "claude-sonnet-4-5", AgentMaxTurns: 30,
			AgentAllowedTools: []string{"Read", "Edit", "Bash(go test:*)"}, AgentArgs: `--append-system-prompt 'be brief'`,
		}, preset: PresetClaudeCode, argv: []string{
			"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits", "--model", "claude-sonnet-4-5",
			"--max-turns", "31", "--allowedTools", "Read,Edit,Bash(go test:*)", "--append-system-prompt", "be brief",
		}, program: "claude"},
		{name: "codex in prloop's sandbox", cfg: Config{Agent: "codex", AgentModel: "gpt-5-codex", AgentArgs: "-c model_reasoning_effort=low"}, preset: PresetCodex,
			argv: []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "gpt-5-codex",
				"-c", "model_reasoning_effort=low", "-"}, program: "codex"},
		{name: "codex without prloop's sandbox keeps its own", cfg: Config{Agent: "codex"}, open: true, preset: PresetCodex,
			argv: []string{"codex", "exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check", "-"}, program: "codex"},
		{name: "PRLOOP_AGENT_CMD alone keeps today's behaviour", cfg: Config{AgentCmd: "my-agent --fix"}, preset: PresetCommand,
			argv: []string{"sh", "-c", "my-agent --fix"}, program: "my-agent"},
		{name: "a preset wins over PRLOOP_AGENT_CMD", cfg: Config{Agent: "codex", AgentCmd: "my-agent"}, preset: PresetCodex,
			argv: []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-"}, program: "codex"},
		{name: "command without a command", cfg: Config{Agent: "command"}, wantErr: "PRLOOP_AGENT=command needs PRLOOP_AGENT_CMD"},
		{name: "command with preset arguments", cfg: Config{Agent: "command", AgentCmd: "x", AgentArgs: "-v"}, wantErr: "PRLOOP_AGENT_ARGS is for the presets"},
		{name: "unknown preset", cfg: Config{Agent: "aider"}, wantErr: "PRLOOP_AGENT=aider: want claude-code, codex or command"},
		{name: "arguments with an expansion", cfg: Config{AgentArgs: "--model $MODEL"}, wantErr: "PRLOOP_AGENT_ARGS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, err := tt.cfg.agentSpec(!tt.open)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.preset, spec.Preset)
			if tt.preset == PresetCommand {
				assert.Equal(t, tt.argv, spec.argv())
			} else {
				assert.Equal(t, tt.argv, spec.Args)
				assert.Equal(t, append([]string{"sh", "-c", `exec "$0" "$@"`}, tt.argv...), spec.argv(), "looked up by sh on the agent's PATH")
			}
			prog, ok := spec.program()
			assert.True(t, ok)
			assert.Equal(t, tt.program, prog)
		})
	}
}

// claudeStream is Claude Code's stream-json as its CLI writes it (the
// shape of a real run against the scripted model server): an init, an
// assistant message streamed as two lines with one id, a tool result, a
// denied Bash, and the result.
const claudeStream = `{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5","tools":["Read","Edit","Bash"]}
{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Reading the file."}],"usage":{"input_tokens":1000,"output_tokens":10,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"a.txt"}}],"usage":{"input_tokens":1000,"output_tokens":50,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"session_id":"s-1"}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"hello"}]},"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_2","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"rm -rf /"}}],"usage":{"input_tokens":2000,"output_tokens":50}},"session_id":"s-1"}
not json at all
{"type":"assistant","message":{"id":"msg_3","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{}}],"usage":{"input_tokens":3000,"output_tokens":100}},"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_4","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done: fixed a.txt."}],"usage":{"input_tokens":4000,"output_tokens":20}},"session_id":"s-1"}
{"type":"result","subtype":"success","is_error":false,"num_turns":4,"result":"Done: fixed a.txt.","total_cost_usd":0.0421,"usage":{"input_tokens":10000,"output_tokens":220,"cache_read_input_tokens":5,"cache_creation_input_tokens":7},"permission_denials":[{"tool_name":"Bash","tool_use_id":"t2","tool_input":{"command":"rm -rf /"}}],"session_id":"s-1"}
`

// codexStream is Codex's exec --json: a thread, a command, a declined
// command, a file change, the last message and the turn's usage.
const codexStream = `{"type":"thread.started","thread_id":"th-1"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"cat a.txt","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"cat a.txt","aggregated_output":"hello","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"curl x","status":"declined"}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"a.txt","kind":"update"}],"status":"completed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Fixed a.txt."}}
{"type":"turn.completed","usage":{"input_tokens":2000000,"cached_input_tokens":1000000,"output_tokens":100000}}
`

// TestStreamParser_ReadsEachPresetsStream: turns, tools, denials, tokens,
// cost and the final message, from each CLI's stream; a repeated message
// id is one turn, the CLI's own cost wins over prloop's estimate once it
// comes, and Codex's tokens are priced by the table.
func TestStreamParser_ReadsEachPresetsStream(t *testing.T) {
	t.Parallel()
	prices, err := parsePrices("claude-*=3/15,gpt-*=1/10")
	require.NoError(t, err)
	tests := []struct {
		name   string
		preset Preset
		stream string
		// upTo parses only the first lines, to see the running counts.
		upTo  int
		model string
		want  RunStats
	}{
		{name: "claude, mid-run: priced from tokens", preset: PresetClaudeCode, stream: claudeStream, upTo: 5, want: RunStats{
			Preset: PresetClaudeCode, Turns: 2, CostUSD: (3000*3 + 100*15) / 1e6, InputTokens: 3000, OutputTokens: 100,
			Model: "claude-sonnet-4-5", Tools: map[string]int{"Read": 1, "Bash": 1}, Final: "Reading the file.", SessionID: "s-1", Lines: 5,
		}},
		{name: "claude, whole run: the CLI's cost", preset: PresetClaudeCode, stream: claudeStream, want: RunStats{
			Preset: PresetClaudeCode, Turns: 4, CostUSD: 0.0421, CostReported: true, InputTokens: 10000, OutputTokens: 220, CacheReadTokens: 5, CacheWriteTokens: 7,
			Model: "claude-sonnet-4-5", Tools: map[string]int{"Read": 1, "Bash": 1, "Edit": 1}, Denials: []string{"Bash"},
			Final: "Done: fixed a.txt.", Subtype: "success", SessionID: "s-1", Lines: 9, Unparsed: 1,
		}},
		{name: "codex", preset: PresetCodex, stream: codexStream, model: "gpt-5", want: RunStats{
			Preset: PresetCodex, Model: "gpt-5", Turns: 4, CostUSD: 1*1 + 1*0.1 + 0.1*10, InputTokens: 1000000, CacheReadTokens: 1000000, OutputTokens: 100000,
			Tools: map[string]int{"command_execution": 2, "file_change": 1}, Denials: []string{"command_execution"},
			Final: "Fixed a.txt.", SessionID: "th-1", Lines: 8,
		}},
		{name: "codex failed", preset: PresetCodex, stream: `{"type":"thread.started","thread_id":"th-2"}
{"type":"error","message":"stream disconnected"}
{"type":"turn.failed","error":{"message":"unexpected status 500"}}`, want: RunStats{
			Preset: PresetCodex, Tools: map[string]int{}, SessionID: "th-2", IsError: true,
			Errors: []string{"stream disconnected", "unexpected status 500"}, Lines: 3,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &streamWriter{p: newStreamParser(tt.preset, prices, tt.model)}
			stream := tt.stream
			if tt.upTo > 0 {
				stream = strings.Join(strings.SplitAfter(stream, "\n")[:tt.upTo], "")
			}
			// Written in pieces that cut lines, as a pipe delivers them.
			for len(stream) > 0 {
				n := min(len(stream), 37)
				_, err := w.Write([]byte(stream[:n]))
				require.NoError(t, err)
				stream = stream[n:]
			}
			w.flush()
			got := w.Stats()
			assert.InDelta(t, tt.want.CostUSD, got.CostUSD, 1e-9)
			got.CostUSD, tt.want.CostUSD = 0, 0
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestStreamWriter_CheckStopsOnceAtTheLineOverBudget: the check is asked
// after each line and stops the run at the first answer over a budget,
// once; a line over the parser's bound is skipped, not buffered.
func TestStreamWriter_CheckStopsOnceAtTheLineOverBudget(t *testing.T) {
	t.Parallel()
	b := budget{MaxTurns: 2}
	var stops []error
	w := &streamWriter{
		p: newStreamParser(PresetClaudeCode, nil, ""),
		check: func(st RunStats) error {
			if c := judgeBudget(b, spend{Turns: st.Turns}); c.Kind != budgetOK {
				return &BudgetError{call: c}
			}
			return nil
		},
		stop: func(err error) { stops = append(stops, err) },
	}
	turn := func(id string) string {
		return `{"type":"assistant","message":{"id":"` + id + `","content":[{"type":"tool_use","name":"Bash"}]}}` + "\n"
	}
	_, _ = w.Write([]byte(turn("m1") + turn("m2")))
	assert.Empty(t, stops, "two turns are within the bound")
	_, _ = w.Write([]byte(`{"type":"user","message":{"content":"` + strings.Repeat("x", maxStreamLine+10) + `"}}` + "\n"))
	_, _ = w.Write([]byte(turn("m3") + turn("m4")))
	require.Len(t, stops, 1)
	var be *BudgetError
	require.ErrorAs(t, stops[0], &be)
	assert.Equal(t, "turns", be.Kind())
	assert.Contains(t, be.Error(), "turn 3")
	assert.Equal(t, 4, w.Stats().Turns)
	assert.Equal(t, 4, w.Stats().Lines, "the line over the bound skipped")
}

// BenchmarkStreamParser_Claude is the parsing prloop adds to each line of
// Claude Code's stream, the budget check included (BENCHMARKS.md).
func BenchmarkStreamParser_Claude(b *testing.B) {
	prices, err := parsePrices("*=3/15")
	require.NoError(b, err)
	chunk := []byte(strings.Repeat(claudeStream, 100))
	b.SetBytes(int64(len(chunk)))
	lines := strings.Count(claudeStream, "\n") * 100
	for b.Loop() {
		w := &streamWriter{p: newStreamParser(PresetClaudeCode, prices, ""), stop: func(error) {},
			check: func(st RunStats) error {
				if c := judgeBudget(budget{MaxTurns: 1000, MaxCostUSD: 100}, spend{Turns: st.Turns, RunCostUSD: st.CostUSD}); c.Kind != budgetOK {
					return &BudgetError{call: c}
				}
				return nil
			}}
		_, _ = w.Write(chunk)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
