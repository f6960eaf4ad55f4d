package feedback

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/sandbox"
)

// Config is the feedback service's configuration, read from PRLOOP_* variables.
type Config struct {
	config.Common
	github.Config
	review.PolicyConfig
	// Settings are the operator's limits on repository policies
	// (.github/prloop.yml: the fix cycles).
	policy.Settings

	// Concurrency bounds the PRs addressed at once by this replica; each PR
	// has at most one attempt in flight across all replicas.
	Concurrency int `envconfig:"PRLOOP_FEEDBACK_CONCURRENCY" default:"2" desc:"PRs addressed at once per replica (one attempt per PR across all replicas)"`
	// WorkspaceDir holds prloop's clones (<owner>/<repo>/pr-<n>), prompts and
	// agent logs (pr-<n>.d/). Empty means <PRLOOP_DATA_DIR>/workspace.
	WorkspaceDir string `envconfig:"PRLOOP_WORKSPACE_DIR" desc:"clones (owner/repo/pr-N), prompts and agent logs; empty: PRLOOP_DATA_DIR/workspace"`
	// WorkspaceSweepInterval is how often the workspaces of closed or
	// merged PRs are looked for and removed (a few PRs per sweep); 0: never.
	WorkspaceSweepInterval time.Duration `envconfig:"PRLOOP_WORKSPACE_SWEEP_INTERVAL" default:"10m" desc:"how often the workspaces of closed or merged PRs are removed (up to 20 PRs checked per sweep); 0: never"`
	// Agent is the agent preset (agentpreset.go, docs/agents.md):
	// claude-code, codex or command. Unset, it is command when
	// PRLOOP_AGENT_CMD is set and claude-code otherwise.
	Agent string `envconfig:"PRLOOP_AGENT" desc:"the agent preset: claude-code, codex or command (PRLOOP_AGENT_CMD); unset, command when PRLOOP_AGENT_CMD is set, else claude-code"`
	// AgentCmd is the coding agent of PRLOOP_AGENT=command, run with sh -c
	// in the worktree, in the sandbox, with the prompt on stdin and in the
	// file named by PRLOOP_PROMPT_FILE (outside the worktree), PRLOOP_PR
	// and PRLOOP_BRANCH in its environment, and no credentials of prloop's.
	AgentCmd string `envconfig:"PRLOOP_AGENT_CMD" desc:"the coding agent of PRLOOP_AGENT=command, run with sh -c in the worktree, in the sandbox; prompt on stdin and in $PRLOOP_PROMPT_FILE; no credentials of prloop's; its program must be found in the sandbox at start"`
	// AgentModel, AgentArgs, AgentPermissionMode and AgentAllowedTools
	// shape a preset's command line: its model, extra arguments (sh
	// quoting, no expansions), and Claude Code's --permission-mode and
	// --allowedTools.
	AgentModel          string   `envconfig:"PRLOOP_AGENT_MODEL" desc:"the model a preset asks for (claude --model, codex -m); empty: the CLI's default"`
	AgentArgs           string   `envconfig:"PRLOOP_AGENT_ARGS" desc:"extra arguments for a preset's command line (sh quoting, no expansions)"`
	AgentPermissionMode string   `envconfig:"PRLOOP_AGENT_PERMISSION_MODE" default:"acceptEdits" desc:"Claude Code's --permission-mode for the claude-code preset"`
	AgentAllowedTools   []string `envconfig:"PRLOOP_AGENT_ALLOWED_TOOLS" desc:"Claude Code's --allowedTools for the claude-code preset (comma-separated)"`
	// AgentMaxTurns bounds one run's turns, counted from a preset's
	// stream; the run is stopped at the first turn over. 0: no bound.
	AgentMaxTurns int `envconfig:"PRLOOP_AGENT_MAX_TURNS" default:"100" desc:"turns one agent run may take, counted from the preset's stream; the run is stopped at the first turn over; 0: no bound"`
	// AgentMaxCostUSD bounds what a preset's runs cost per PR, across all
	// its runs and fix cycles; AgentDailyCostUSD what they cost across all
	// PRs per UTC day (new runs wait for the next day). 0: no bound.
	AgentMaxCostUSD   float64 `envconfig:"PRLOOP_AGENT_MAX_COST_USD" default:"20" desc:"USD a preset's runs may cost per PR across all its runs and fix cycles; over it the PR escalates agent_budget_exhausted; 0: no bound"`
	AgentDailyCostUSD float64 `envconfig:"PRLOOP_AGENT_DAILY_COST_USD" default:"0" desc:"USD the agent runs may cost across all PRs per UTC day; when reached, new runs wait for the next day; 0: no bound"`
	// AgentPrices prices tokens when a stream reports no cost (Codex
	// always; Claude Code until its final result): model=input/output in
	// USD per million tokens, comma-separated; "*" is any other model.
	AgentPrices string `envconfig:"PRLOOP_AGENT_PRICES" default:"claude-opus*=15/75,claude-sonnet*=3/15,claude-haiku*=1/5,gpt-5*-mini*=0.25/2,*=1.25/10" desc:"token prices when a stream reports no cost: model=input/output USD per million tokens, comma-separated; * is any other model"`
	// AgentTranscriptMaxBytes caps each run's kept transcript (the
	// preset's JSONL stream, beside the agent log).
	AgentTranscriptMaxBytes int64 `envconfig:"PRLOOP_AGENT_TRANSCRIPT_MAX_BYTES" default:"4194304" desc:"bytes of each run's kept transcript (the preset's JSONL stream, beside the agent log)"`
	// AgentTimeout bounds one agent run; its whole sandbox is then killed.
	AgentTimeout time.Duration `envconfig:"PRLOOP_AGENT_TIMEOUT" default:"10m" desc:"then every process in the agent's sandbox is killed"`
	// AgentBudget bounds the agent wall time spent on one PR across all
	// its runs and fix cycles; once spent, the PR is escalated with reason
	// agent_budget_exhausted instead of running the agent again. 0: no bound.
	AgentBudget time.Duration `envconfig:"PRLOOP_AGENT_BUDGET" default:"1h" desc:"agent wall time per PR across runs and cycles, then agent_budget_exhausted; 0: no bound"`
	// AgentSandbox is how the agent (and every git command in its
	// worktree) is confined: auto picks the strongest that works here
	// (bwrap, then namespaces); none runs it as prloop's user, with
	// prloop's view of the machine (see docs/security.md).
	AgentSandbox string `envconfig:"PRLOOP_AGENT_SANDBOX" default:"auto" desc:"auto, bwrap, namespaces or none"`
	// AgentReadOnlyPaths and AgentWritablePaths are host paths the agent
	// sees besides its worktree and the system directories (/usr, /etc,
	// …): its own installation or state (e.g. ~/.claude), comma-separated.
	AgentReadOnlyPaths []string `envconfig:"PRLOOP_AGENT_READONLY_PATHS" desc:"comma-separated host paths the agent also sees, read-only (its install)"`
	AgentWritablePaths []string `envconfig:"PRLOOP_AGENT_WRITABLE_PATHS" desc:"comma-separated host paths the agent also sees, writable (its state)"`
	// AgentMemoryMaxMB caps the sandbox's memory where cgroup v2 is
	// writable; 0: no cap.
	AgentMemoryMaxMB int64 `envconfig:"PRLOOP_AGENT_MEMORY_MAX_MB" default:"0" desc:"memory cap of the sandbox where cgroup v2 is writable; 0: none"`
	// AgentMaxCommits and AgentMaxBytes bound the agent's work that prloop
	// takes in and pushes: commits on top of the PR's head, and bytes of
	// new objects. Work over a bound is escalated, not pushed.
	AgentMaxCommits int   `envconfig:"PRLOOP_AGENT_MAX_COMMITS" default:"50" desc:"most commits of the agent's work prloop pushes"`
	AgentMaxBytes   int64 `envconfig:"PRLOOP_AGENT_MAX_BYTES" default:"52428800" desc:"most bytes of the agent's work prloop pushes"`
	// AgentMayEditWorkflows lets prloop push agent commits that change
	// .github/workflows; off, because a workflow runs with the
	// repository's secrets and the agent reads strangers' text.
	AgentMayEditWorkflows bool `envconfig:"PRLOOP_AGENT_MAY_EDIT_WORKFLOWS" default:"false" desc:"push agent commits that change .github/workflows"`
	// AgentAttempts is how many agent runs one change request may use in
	// total, across retries and redeliveries, before it is escalated.
	AgentAttempts int `envconfig:"PRLOOP_AGENT_ATTEMPTS" default:"3" desc:"agent runs per change request before escalating feedback_failed"`
	// AgentBackoff is the pause before the second run; it doubles for each
	// further one.
	AgentBackoff time.Duration `envconfig:"PRLOOP_AGENT_BACKOFF" default:"30s" desc:"pause before the agent's second run; it doubles for each further one"`
	// AgentKillGrace is how long an agent has between SIGTERM and SIGKILL
	// when it times out or the service stops.
	AgentKillGrace time.Duration `envconfig:"PRLOOP_AGENT_KILL_GRACE" default:"5s" desc:"how long an agent has between SIGTERM and SIGKILL when it times out or the service stops"`
	// AgentLogMaxBytes caps each run's kept stdout and stderr.
	AgentLogMaxBytes int64 `envconfig:"PRLOOP_AGENT_LOG_MAX_BYTES" default:"1048576" desc:"cap of each run's kept stdout and stderr"`
	// PromptTemplate is a text/template file replacing the built-in prompt.
	PromptTemplate string `envconfig:"PRLOOP_PROMPT_TEMPLATE" desc:"a text/template file replacing the built-in prompt"`
	// PromptMaxBytes caps the review comments' text in the prompt.
	PromptMaxBytes int `envconfig:"PRLOOP_PROMPT_MAX_BYTES" default:"65536" desc:"cap of the review comments' text in the prompt"`
	// ContextMaxBytes caps the spec or plan files' text in the prompt.
	ContextMaxBytes int `envconfig:"PRLOOP_CONTEXT_MAX_BYTES" default:"65536" desc:"cap of the spec or plan files' text in the prompt"`
	// MaxFixCycles is how many fixes prloop may push per PR; the change
	// request that would start one more is escalated instead.
	MaxFixCycles int `envconfig:"PRLOOP_MAX_FIX_CYCLES" default:"2" desc:"fixes prloop may push per PR; the next change request escalates max_fix_cycles"`
	// MaxCIFixCycles, when above 0, bounds the fixes of failing checks
	// (PRChecksFailed) on their own; 0 counts them with review fixes
	// against MaxFixCycles.
	MaxCIFixCycles int `envconfig:"PRLOOP_MAX_CI_FIX_CYCLES" default:"0" desc:"fixes of failing checks allowed per PR on their own; 0 counts them with review fixes against PRLOOP_MAX_FIX_CYCLES"`
	// RerunFailedChecks re-runs a head's failed GitHub Actions jobs once
	// before the agent is asked: only a failure that repeats on the same
	// head goes to the agent.
	RerunFailedChecks bool `envconfig:"PRLOOP_RERUN_FAILED_CHECKS" default:"true" desc:"re-run a head's failed GitHub Actions jobs once before the agent is asked; only a repeated failure goes to the agent"`
	// CheckLogLines and CheckLogBytes bound the tail of each failed job's
	// log the prompt quotes.
	CheckLogLines int `envconfig:"PRLOOP_CHECK_LOG_LINES" default:"200" desc:"lines of each failed job's log tail the agent's prompt quotes"`
	CheckLogBytes int `envconfig:"PRLOOP_CHECK_LOG_BYTES" default:"20480" desc:"bytes of each failed job's log tail the agent's prompt quotes"`
	// EscalationLabel on a PR means a human has it: no agent runs for it.
	EscalationLabel string `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required" desc:"the label that hands a PR to a human (1 to 50 characters, no commas); while it is on, prloop runs no agent for the PR; removing it resumes the loop"`
	// NotifyReviewers tells the reviewers when a fix is pushed: their
	// review is requested again, their inline threads get a reply, and one
	// comment says what the agent changed (docs/reviews.md, "Telling reviewers a
	// fix is ready").
	NotifyReviewers bool `envconfig:"PRLOOP_NOTIFY_REVIEWERS" default:"true" desc:"after a fix, request the review again, answer the inline threads and post one note"`
	// DryRun logs the note to the reviewers instead of posting it; fixes
	// are still pushed.
	DryRun bool `envconfig:"PRLOOP_DRY_RUN" default:"false" desc:"publish what would happen, change nothing on GitHub (the feedback service still pushes fixes, and logs its note to the reviewers instead of posting it)"`
	// GitAuthorName and GitAuthorEmail sign the commits prloop makes itself,
	// and are the agent's git identity (user.name and user.email, from its
	// environment), since its sandbox's empty HOME has none.
	GitAuthorName  string `envconfig:"PRLOOP_GIT_AUTHOR_NAME" default:"prloop" desc:"name of prloop's own commits; also the agent's git identity (user.name through GIT_CONFIG_* in its environment), so a plain git commit works in its empty HOME; an agent that names itself keeps its name"`
	GitAuthorEmail string `envconfig:"PRLOOP_GIT_AUTHOR_EMAIL" default:"prloop@users.noreply.github.com" desc:"email of prloop's own commits; also the agent's git identity (user.email through GIT_CONFIG_* in its environment)"`
	// GitHubLogin is prloop's own GitHub login, whose comments never count;
	// empty asks GitHub (GET /user) at start.
	GitHubLogin string `envconfig:"PRLOOP_GITHUB_LOGIN" desc:"prloop's own login, whose signals never count; empty: asked from GitHub"`
	// LeaseTTL is how long a PR's attempt lease outlives a replica that
	// stopped renewing it (a crash); it is renewed every LeaseTTL/3. It
	// must be well above the clock skew between replicas' hosts.
	LeaseTTL time.Duration `envconfig:"PRLOOP_FEEDBACK_LEASE_TTL" default:"1m" desc:"how long a PR's attempt lease outlives a replica that stopped renewing it; more than 3 times PRLOOP_AGENT_KILL_GRACE"`
	// AckWait is how long JetStream waits for a sign of life before it
	// redelivers a change request; the service signals every AckWait/3.
	AckWait time.Duration `envconfig:"PRLOOP_FEEDBACK_ACK_WAIT" default:"30s" desc:"how long JetStream waits for a sign of life before it redelivers a change request"`
	// MaxDeliver bounds deliveries of one change request, including those
	// that wait for another replica's attempt on the same PR to end.
	MaxDeliver int `envconfig:"PRLOOP_FEEDBACK_MAX_DELIVER" default:"30" desc:"deliveries of one change request, including those that wait for another replica's attempt"`
	// RetryBackoff are the redelivery delays after an error or while the PR
	// is busy elsewhere; the last repeats.
	RetryBackoff []time.Duration `envconfig:"PRLOOP_FEEDBACK_RETRY_BACKOFF" default:"2s,10s,30s,1m,2m,5m" desc:"redelivery delays of a change request after an error or while the PR is busy elsewhere; the last repeats"`
}

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate(), c.PolicyConfig.Validate(), c.Settings.Validate()}
	positive := []struct {
		name string
		v    time.Duration
	}{
		{"PRLOOP_AGENT_TIMEOUT", c.AgentTimeout},
		{"PRLOOP_AGENT_KILL_GRACE", c.AgentKillGrace},
	}
	for _, p := range positive {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s: want a positive duration", p.name, p.v))
		}
	}
	if c.AgentBudget < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_BUDGET=%s: want a duration of 0 (no bound) or more", c.AgentBudget))
	}
	if _, err := sandbox.ParseMode(c.AgentSandbox); err != nil {
		errs = append(errs, err)
	}
	for _, p := range append(slices.Clip(c.AgentReadOnlyPaths), c.AgentWritablePaths...) {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("PRLOOP_AGENT_READONLY_PATHS/PRLOOP_AGENT_WRITABLE_PATHS: %q is not an absolute path", p))
		}
	}
	if c.AgentMemoryMaxMB < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_MEMORY_MAX_MB=%d: want 0 (no cap) or more", c.AgentMemoryMaxMB))
	}
	if c.AgentBackoff < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_AGENT_BACKOFF=%s: want a duration of 0 or more", c.AgentBackoff))
	}
	errs = append(errs, c.validateAgent())
	for _, n := range []struct {
		name string
		v    int64
	}{
		{"PRLOOP_FEEDBACK_CONCURRENCY", int64(c.Concurrency)},
		{"PRLOOP_AGENT_ATTEMPTS", int64(c.AgentAttempts)},
		{"PRLOOP_AGENT_LOG_MAX_BYTES", c.AgentLogMaxBytes},
		{"PRLOOP_PROMPT_MAX_BYTES", int64(c.PromptMaxBytes)},
		{"PRLOOP_CONTEXT_MAX_BYTES", int64(c.ContextMaxBytes)},
		{"PRLOOP_FEEDBACK_MAX_DELIVER", int64(c.MaxDeliver)},
		{"PRLOOP_AGENT_MAX_COMMITS", int64(c.AgentMaxCommits)},
		{"PRLOOP_AGENT_MAX_BYTES", c.AgentMaxBytes},
	} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("%s=%d: want at least 1", n.name, n.v))
		}
	}
	if c.MaxCIFixCycles < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_MAX_CI_FIX_CYCLES=%d: want 0 (count with PRLOOP_MAX_FIX_CYCLES) or more", c.MaxCIFixCycles))
	}
	if c.CheckLogLines < 1 || c.CheckLogBytes < 1 {
		errs = append(errs, fmt.Errorf("PRLOOP_CHECK_LOG_LINES=%d, PRLOOP_CHECK_LOG_BYTES=%d: want at least 1", c.CheckLogLines, c.CheckLogBytes))
	}
	if c.MaxFixCycles < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_MAX_FIX_CYCLES=%d: want 0 or more", c.MaxFixCycles))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_FEEDBACK_LEASE_TTL=%s: want at least 1s", c.LeaseTTL))
	} else if c.LeaseTTL/3 <= c.AgentKillGrace {
		// A replica that cannot renew stops its agent a third of the TTL
		// before the lease expires; the agent must be dead by then.
		errs = append(errs, fmt.Errorf("PRLOOP_FEEDBACK_LEASE_TTL=%s: want more than 3 times PRLOOP_AGENT_KILL_GRACE (%s)", c.LeaseTTL, c.AgentKillGrace))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_FEEDBACK_ACK_WAIT=%s: want at least 1s", c.AckWait))
	}
	if err := config.CheckBackoff("PRLOOP_FEEDBACK_RETRY_BACKOFF", c.RetryBackoff); err != nil {
		errs = append(errs, err)
	}
	if c.GitAuthorName == "" || c.GitAuthorEmail == "" {
		errs = append(errs, errors.New("PRLOOP_GIT_AUTHOR_NAME and PRLOOP_GIT_AUTHOR_EMAIL must not be empty"))
	}
	if c.PromptTemplate != "" {
		if _, err := os.Stat(c.PromptTemplate); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_PROMPT_TEMPLATE: %w", err))
		} else if _, err := loadTemplate(c.PromptTemplate); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_PROMPT_TEMPLATE: %w", err))
		}
	}
	return errors.Join(errs...)
}

// withDefaults is c with the settings that have no sensible zero at their
// defaults (their tags) when a configuration built in code leaves them
// unset: the bounds of the failed jobs' log tails the prompt quotes.
func (c Config) withDefaults() Config {
	config.DefaultZero(&c, "PRLOOP_CHECK_LOG_LINES", "PRLOOP_CHECK_LOG_BYTES")
	return c
}
