package feedback_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/feedback"
)

// The real coding agents' CLIs, run by prloop in its sandbox against the
// scripted model servers (modelsim_test.go), offline: the prompt arrives,
// the edit lands and is pushed, turns and cost are read from the stream,
// budgets stop a looping agent, and the transcript is kept.

// fixedMain is what the scripted agents write into main.go.
const fixedMain = "package main\n\n// main is renamed as the reviewer asked.\nfunc main() {}\n"

// editScript is a fix in four turns: read main.go, write it, try a
// command that the permission mode denies, and say what was done.
func editScript(n int, cwd string) turn {
	file := filepath.Join(cwd, "main.go")
	switch n {
	case 1:
		return turn{text: "Reading main.go.", tools: []toolCall{{name: "Read", input: map[string]any{"file_path": file}}}}
	case 2:
		return turn{tools: []toolCall{{name: "Write", input: map[string]any{"file_path": file, "content": fixedMain}}}}
	case 3:
		return turn{tools: []toolCall{{name: "Bash", input: map[string]any{"command": "curl -s https://example.com", "description": "fetch"}}}}
	}
	return turn{text: "Fixed main.go as the reviewer asked."}
}

// loopScript never ends: it reads main.go again and again.
func loopScript(n int, cwd string) turn {
	return turn{text: "Looking once more.", tools: []toolCall{{name: "Read", input: map[string]any{"file_path": filepath.Join(cwd, "main.go")}}}}
}

// claudeConfig runs the Claude Code preset against the model server.
func (e *env) claudeConfig(t *testing.T, model *modelSim, mut ...func(*feedback.Config)) feedback.Config {
	t.Helper()
	bin, readOnly := agentBinDir(t, "claude")
	e.environ = append(e.environ, "PATH="+bin+":/usr/local/bin:/usr/bin:/bin",
		"ANTHROPIC_BASE_URL="+model.srv.URL, "ANTHROPIC_API_KEY=sk-ant-test-key")
	return e.config("noop.sh", append([]func(*feedback.Config){func(c *feedback.Config) {
		c.Agent, c.AgentCmd = "claude-code", ""
		c.AgentPermissionMode = "acceptEdits"
		c.AgentReadOnlyPaths = readOnly
		c.AgentTimeout = 2 * waitFor
		c.AgentPrices = "*=3/15"
	}}, mut...)...)
}

// TestRealAgent_ClaudeCode_FixIsPushed: the real Claude Code CLI gets the
// prompt, reads and writes main.go, is denied a command; prloop pushes the
// edit and PRFeedbackAddressed summarises the run from its stream: turns,
// cost, tools, the denial and the final message. The transcript is kept
// beside the log, and neither prloop's token nor any of its credentials
// reached the model server.
func TestRealAgent_ClaudeCode_FixIsPushed(t *testing.T) {
	t.Parallel()
	model := anthropicSim(t, editScript)
	e := newEnv(t)
	cfg := e.claudeConfig(t, model)
	sm := e.fixWith(t, model, cfg, "sk-ant-test-key")
	assert.Equal(t, "claude-code", sm.Preset)
	assert.Equal(t, 4, sm.Turns)
	assert.Positive(t, sm.CostUSD)
	assert.False(t, sm.CostEstimated, "the CLI's own total_cost_usd")
	assert.Equal(t, sm.CostUSD, sm.PRCostUSD)
	assert.Subset(t, sm.Tools, []string{"Bash×1", "Read×1", "Write×1"})
	assert.Equal(t, []string{"Bash"}, sm.Denials)
	assert.Equal(t, "Fixed main.go as the reviewer asked.", sm.Final)
	require.NotEmpty(t, sm.Transcript)
	assert.Contains(t, model.Results(), "true", "the denied command's result is an error")

	tr := transcript(t, cfg.WorkspaceDir, sm)
	assert.Contains(t, tr, `"type":"result"`)
	assert.Contains(t, tr, `"permission_denials"`)
	assert.Positive(t, e.metric("prloop_agent_cost_usd_total", "preset", "claude-code"))
	assert.Equal(t, 1.0, e.metric("prloop_agent_runs_total", "preset", "claude-code", "outcome", "ok"))
}

// TestRealAgent_ClaudeCode_BudgetsStopALoop: a real Claude Code that loops
// is stopped by prloop from its stream, at the first turn over
// PRLOOP_AGENT_MAX_TURNS, or at the turn whose cost crosses
// PRLOOP_AGENT_MAX_COST_USD (priced from the tokens the stream reports,
// before the CLI's own result); the PR is escalated as
// agent_budget_exhausted with the figures, and nothing is pushed.
func TestRealAgent_ClaudeCode_BudgetsStopALoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mut     func(*feedback.Config)
		budget  string
		figures string
		// maxCalls bounds the model calls: the stop comes at once.
		maxCalls int
	}{
		{name: "turns", mut: func(c *feedback.Config) { c.AgentMaxTurns = 3 }, budget: "turns",
			figures: "reached turn 4, over PRLOOP_AGENT_MAX_TURNS=3", maxCalls: 5},
		// 100k input tokens at $3 per million: $0.30 a turn.
		{name: "cost", mut: func(c *feedback.Config) { c.AgentMaxCostUSD = 0.5 }, budget: "pr_cost",
			figures: "at or over PRLOOP_AGENT_MAX_COST_USD=$0.5", maxCalls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			model := anthropicSim(t, loopScript)
			model.inTokens = 100_000
			e := newEnv(t)
			cfg := e.claudeConfig(t, model, tt.mut)
			e.comment(e.pr, "please rename main")
			e.start("a", cfg)
			e.request(e.pr, e.head, 0)

			esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, 2*waitFor).Data.(*events.EscalationRequested)
			assert.Equal(t, events.ReasonAgentBudgetExhausted, esc.Reason)
			assert.Contains(t, esc.Detail, tt.figures)
			assert.Contains(t, esc.LastError, "agent stopped: agent budget used up", "prloop stopped it, not the CLI's own cap")
			require.NotNil(t, esc.Agent)
			assert.Equal(t, tt.budget, esc.Agent.Budget)
			assert.LessOrEqual(t, model.Calls(), tt.maxCalls, "stopped at the turn over the budget")
			assert.Empty(t, e.bareLog("feature/x", e.head), "nothing pushed")
			assert.NotContains(t, strings.Join([]string{esc.Detail, esc.LastError, esc.Agent.Final}, " "), cfg.WorkspaceDir, "no server path")
			assert.Equal(t, 1.0, e.metric("prloop_agent_runs_total", "preset", "claude-code", "outcome", "budget"))
		})
	}
}

// codexEditScript is the fix as Codex makes it, with its exec_command:
// read main.go, write it, try a command that asks to leave Codex's
// sandbox (declined: codex exec never asks for approval), and say so.
func codexEditScript(n int, cwd string) turn {
	switch n {
	case 1:
		return turn{text: "Reading main.go.", tools: []toolCall{{name: "exec_command", input: map[string]any{"cmd": "cat main.go"}}}}
	case 2:
		return turn{tools: []toolCall{{name: "exec_command", input: map[string]any{"cmd": "printf '%s' '" + fixedMain + "' > main.go"}}}}
	case 3:
		return turn{tools: []toolCall{{name: "exec_command", input: map[string]any{
			"cmd": "curl -s https://example.com", "sandbox_permissions": "require_escalated", "justification": "fetch"}}}}
	}
	return turn{text: "Fixed main.go as the reviewer asked."}
}

// codexLoopScript never ends: it reads main.go again and again.
func codexLoopScript(n int, cwd string) turn {
	return turn{tools: []toolCall{{name: "exec_command", input: map[string]any{"cmd": "cat main.go"}}}}
}

// codexConfig runs the Codex preset against the model server: a provider
// of its own (the built-in one's base URL cannot be moved), with the key
// in OPENAI_API_KEY, set with -c in PRLOOP_AGENT_ARGS.
func (e *env) codexConfig(t *testing.T, model *modelSim, mut ...func(*feedback.Config)) feedback.Config {
	t.Helper()
	bin, readOnly := agentBinDir(t, "codex")
	e.environ = append(e.environ, "PATH="+bin+":/usr/local/bin:/usr/bin:/bin", "OPENAI_API_KEY=sk-openai-test-key")
	return e.config("noop.sh", append([]func(*feedback.Config){func(c *feedback.Config) {
		c.Agent, c.AgentCmd = "codex", ""
		c.AgentModel = "gpt-5"
		c.AgentArgs = `-c model_provider=sim -c 'model_providers.sim={name="sim",base_url="` + model.srv.URL +
			`/v1",env_key="OPENAI_API_KEY",wire_api="responses"}'`
		c.AgentReadOnlyPaths = readOnly
		c.AgentTimeout = 2 * waitFor
		c.AgentPrices = "*=1/10"
	}}, mut...)...)
}

// TestRealAgent_Codex_FixIsPushed: the real Codex CLI gets the prompt,
// reads and writes main.go with its commands; prloop pushes the edit and
// PRFeedbackAddressed summarises the run: turns, the cost priced from the
// tokens Codex reports, tools and the final message. The transcript is
// kept, and none of prloop's credentials reached the model server.
func TestRealAgent_Codex_FixIsPushed(t *testing.T) {
	t.Parallel()
	model := openAISim(t, codexEditScript)
	e := newEnv(t)
	cfg := e.codexConfig(t, model)
	sm := e.fixWith(t, model, cfg, "sk-openai-test-key")
	assert.Equal(t, "codex", sm.Preset)
	assert.GreaterOrEqual(t, sm.Turns, 3)
	// 4 responses of 1000 input and 100 output tokens at $1 and $10 per million.
	assert.InDelta(t, 4*(1000*1+100*10)/1e6, sm.CostUSD, 1e-6)
	assert.True(t, sm.CostEstimated, "priced from tokens")
	assert.Equal(t, "Fixed main.go as the reviewer asked.", sm.Final)
	assert.Contains(t, model.Results(), "func main()", "the read's result")

	assert.Contains(t, transcript(t, cfg.WorkspaceDir, sm), `"type":"turn.completed"`)
}

// fixWith runs one change request with the real agent of cfg and checks
// what every preset must do: its binary is found in the sandbox, the
// prompt arrives, the edit is pushed, the model's key (key) reaches the
// model server and none of prloop's credentials do. It returns the run's
// summary from PRFeedbackAddressed.
func (e *env) fixWith(t *testing.T, model *modelSim, cfg feedback.Config, key string) *events.AgentRunSummary {
	t.Helper()
	e.comment(e.pr, "please rename main, it says nothing")
	inst := e.start("a", cfg)
	require.NoError(t, inst.svc.CheckAgent(t.Context()), "the preset's binary is found in the sandbox")
	e.logTranscripts(t, cfg.WorkspaceDir, model)
	e.request(e.pr, e.head, 0)

	done := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, 2*waitFor).Data.(*events.FeedbackAddressed)
	assert.Contains(t, model.Prompts(), "please rename main, it says nothing", "the prompt arrives")
	out, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "show", done.HeadSHA+":main.go").Output()
	require.NoError(t, err)
	assert.Equal(t, fixedMain, string(out), "the agent's edit is pushed")
	seen := model.Seen()
	assert.Contains(t, seen, key, "the model's key reaches the agent")
	for _, secret := range []string{tokPrloop, "whsec-do-not-leak", "app.pem"} {
		assert.NotContains(t, seen, secret, "prloop's credentials never reach the agent")
	}
	require.NotNil(t, done.Agent, "the run's summary")
	return done.Agent
}

// transcript reads the one transcript kept under dir, which the summary
// names.
func transcript(t *testing.T, dir string, sm *events.AgentRunSummary) string {
	t.Helper()
	files := findFiles(t, dir, ".jsonl")
	require.Len(t, files, 1)
	assert.Equal(t, sm.Transcript, filepath.Base(files[0]))
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	return string(b)
}

// TestRealAgent_Codex_TurnBudgetStopsALoop: a real Codex that loops is
// stopped by prloop at the first turn over PRLOOP_AGENT_MAX_TURNS (its
// tool uses, counted from the stream) and escalated as
// agent_budget_exhausted.
func TestRealAgent_Codex_TurnBudgetStopsALoop(t *testing.T) {
	t.Parallel()
	model := openAISim(t, codexLoopScript)
	e := newEnv(t)
	cfg := e.codexConfig(t, model, func(c *feedback.Config) { c.AgentMaxTurns = 3 })
	e.comment(e.pr, "please rename main")
	e.start("a", cfg)
	e.request(e.pr, e.head, 0)

	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, 2*waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonAgentBudgetExhausted, esc.Reason)
	assert.Contains(t, esc.Detail, "reached turn 4, over PRLOOP_AGENT_MAX_TURNS=3")
	assert.Contains(t, esc.LastError, "agent stopped: agent budget used up")
	require.NotNil(t, esc.Agent)
	assert.Equal(t, "turns", esc.Agent.Budget)
	assert.LessOrEqual(t, model.Calls(), 6, "stopped at the turn over the budget")
	assert.Empty(t, e.bareLog("feature/x", e.head), "nothing pushed")
}

// logTranscripts shows the agent runs' logs and transcripts, and the tool
// results the model server saw, when the test fails.
func (e *env) logTranscripts(t *testing.T, dir string, model *modelSim) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, f := range append(findFiles(t, dir, ".jsonl"), findFiles(t, dir, ".log")...) {
			b, _ := os.ReadFile(f)
			t.Logf("%s:\n%s", filepath.Base(f), b)
		}
		t.Logf("tool results the model server saw:\n%s", model.Results())
	})
}
