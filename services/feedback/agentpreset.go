package feedback

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prloop/prloop/pkg/sandbox"
)

// Agent presets (PRLOOP_AGENT): prloop builds the command line of the
// coding agents people use and reads their structured output (turns,
// tools, cost), so that it can enforce its own budgets and keep a
// transcript. "command" is any other agent: PRLOOP_AGENT_CMD run by sh,
// opaque to prloop.

// Preset names an agent preset.
type Preset string

// The presets.
const (
	// PresetClaudeCode runs Claude Code: claude -p --output-format stream-json.
	PresetClaudeCode Preset = "claude-code"
	// PresetCodex runs OpenAI's Codex CLI: codex exec --json.
	PresetCodex Preset = "codex"
	// PresetCommand runs PRLOOP_AGENT_CMD with sh -c; no stream is read.
	PresetCommand Preset = "command"
)

// agentSpec is how one agent run is started: the argv, or the shell
// command, and the environment a preset adds.
type agentSpec struct {
	Preset Preset
	// Args is the argv of a preset; Shell the command of PresetCommand.
	Args  []string
	Shell string
	// Env is added to the run's environment: each CLI's switches against
	// telemetry and self-updates, which a sandboxed, unattended run must
	// not attempt.
	Env []string
}

// program is the program the spec runs first, for the start-up check;
// false when only the shell knows it (see agentProgram).
func (s agentSpec) program() (string, bool) {
	if s.Preset == PresetCommand {
		return agentProgram(s.Shell)
	}
	return s.Args[0], true
}

// argv is what the sandbox runs: sh in both cases, so that the program is
// looked up on the agent's PATH, inside the sandbox, as the start-up check
// looked it up (without a sandbox, exec would look on prloop's own), and a
// missing one is the shell's exit status 127 (ErrAgentNotRunnable).
func (s agentSpec) argv() []string {
	if s.Preset == PresetCommand {
		return []string{"sh", "-c", s.Shell}
	}
	return append([]string{"sh", "-c", `exec "$0" "$@"`}, s.Args...)
}

// preset resolves PRLOOP_AGENT: unset, it is "command" when
// PRLOOP_AGENT_CMD is set (prloop's behaviour before presets) and
// "claude-code" otherwise.
func (c Config) preset() Preset {
	if c.Agent == "" {
		if strings.TrimSpace(c.AgentCmd) != "" {
			return PresetCommand
		}
		return PresetClaudeCode
	}
	return Preset(c.Agent)
}

// agentSpec builds the run's command line from the settings; confined
// says prloop's sandbox confines the run (PRLOOP_AGENT_SANDBOX is not
// none).
func (c Config) agentSpec(confined bool) (agentSpec, error) {
	extra, err := splitArgs(c.AgentArgs)
	if err != nil {
		return agentSpec{}, fmt.Errorf("PRLOOP_AGENT_ARGS: %w", err)
	}
	switch p := c.preset(); p {
	case PresetClaudeCode:
		args := []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
		if c.AgentPermissionMode != "" {
			args = append(args, "--permission-mode", c.AgentPermissionMode)
		}
		if c.AgentModel != "" {
			args = append(args, "--model", c.AgentModel)
		}
		if c.AgentMaxTurns > 0 {
			// The CLI's own cap is a backstop one turn above prloop's,
			// which stops the run at the first turn over the budget.
			args = append(args, "--max-turns", strconv.Itoa(c.AgentMaxTurns+1))
		}
		if len(c.AgentAllowedTools) > 0 {
			args = append(args, "--allowedTools", strings.Join(c.AgentAllowedTools, ","))
		}
		return agentSpec{Preset: p, Args: append(args, extra...), Env: []string{
			// Documented switches of Claude Code's settings: no
			// auto-update, telemetry, error reporting or other
			// non-essential traffic from an unattended run.
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		}}, nil
	case PresetCodex:
		// Codex's own sandbox (workspace-write) is bubblewrap, which cannot
		// set up a user namespace inside prloop's ("bwrap: setting up uid
		// map: Operation not permitted": every command fails). Inside
		// prloop's sandbox, which confines the run to the worktree, Codex
		// runs unsandboxed, as its documentation says for externally
		// sandboxed environments; without prloop's sandbox it keeps its
		// own. The worktree may be prloop's clone, which Codex would not
		// call trusted: --skip-git-repo-check.
		sb := []string{"--sandbox", "workspace-write"}
		if confined {
			sb = []string{"--dangerously-bypass-approvals-and-sandbox"}
		}
		args := append([]string{"codex", "exec", "--json"}, sb...)
		args = append(args, "--skip-git-repo-check")
		if c.AgentModel != "" {
			args = append(args, "-m", c.AgentModel)
		}
		// "-" reads the prompt from stdin, after the extra arguments.
		return agentSpec{Preset: p, Args: append(append(args, extra...), "-"), Env: []string{"NO_COLOR=1"}}, nil
	case PresetCommand:
		if strings.TrimSpace(c.AgentCmd) == "" {
			return agentSpec{}, errors.New("PRLOOP_AGENT=command needs PRLOOP_AGENT_CMD, e.g. claude -p --permission-mode acceptEdits")
		}
		if len(extra) > 0 {
			return agentSpec{}, errors.New("PRLOOP_AGENT_ARGS is for the presets; with PRLOOP_AGENT=command, put the arguments in PRLOOP_AGENT_CMD")
		}
		return agentSpec{Preset: p, Shell: c.AgentCmd}, nil
	default:
		return agentSpec{}, fmt.Errorf("PRLOOP_AGENT=%s: want claude-code, codex or command", c.Agent)
	}
}

// splitArgs splits s into words as sh would, quotes included, but refuses
// expansions: the arguments are passed as they are, with no shell.
func splitArgs(s string) ([]string, error) {
	var out []string
	for rest := strings.TrimSpace(s); rest != ""; rest = strings.TrimSpace(rest) {
		word, lit, tail, ok := shellWord(rest)
		if !ok || strings.ContainsAny(lit, "$`;&|<>()") {
			return nil, fmt.Errorf("%q: want plain words, quoted as in sh, without expansions or operators", s)
		}
		out = append(out, word)
		rest = tail
	}
	return out, nil
}

// newAgent builds the agent runner of cfg in sb: the preset's command
// line, its prices and bounds.
func newAgent(cfg Config, sb Sandbox) (*sandboxAgent, error) {
	spec, err := cfg.agentSpec(sb.Mode() != sandbox.None)
	if err != nil {
		return nil, err
	}
	prices, err := parsePrices(cfg.AgentPrices)
	if err != nil {
		return nil, fmt.Errorf("PRLOOP_AGENT_PRICES: %w", err)
	}
	transcript := cfg.AgentTranscriptMaxBytes
	if transcript <= 0 {
		transcript = defaultTranscriptMaxBytes
	}
	return &sandboxAgent{
		Spec: spec, Prices: prices, TranscriptMaxBytes: transcript, Model: cfg.AgentModel,
		Timeout: cfg.AgentTimeout, KillGrace: cfg.AgentKillGrace, LogMaxBytes: cfg.AgentLogMaxBytes,
		Sandbox: sb,
	}, nil
}
