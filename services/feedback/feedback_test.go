package feedback_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_AgentCommitsAndPushes runs an agent that commits and pushes
// by itself, and checks the event, the branch, and where the
// token went: nowhere but the environment of prloop's own git processes.
// It runs at GitHub's page size and with pages of 3.
func TestFeedback_AgentCommitsAndPushes(t *testing.T) {
	t.Parallel()
	for _, per := range simtest.PageSizes {
		t.Run(fmt.Sprintf("per_page=%d", per), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, per)
			e.comment(e.pr, "main does nothing; print a greeting")
			scan := proctest.ScanCmdlines(t, "commit_push.sh", tokPrloop, basicHeader)
			cfg := e.config("commit_push.sh", func(c *feedback.Config) {
				c.AgentCmd = "AGENT_SLEEP=0.3 " + c.AgentCmd
			})
			cfg = e.start("a", cfg).cfg
			e.request(e.pr, e.head, 0)

			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			assert.NotEqual(t, e.head, info.HeadSHA)
			assert.Equal(t, info.HeadSHA, ev.HeadSHA, "the new head, as GitHub sees it")
			assert.Equal(t, e.head, ev.PreviousHeadSHA)
			assert.Equal(t, 1, ev.FixCycle)
			assert.Equal(t, e.sim.Now(), ev.PushedAt.UTC())
			require.True(t, strings.HasPrefix(ev.Detail, "agent log: "), ev.Detail)
			logPath := strings.TrimPrefix(ev.Detail, "agent log: ")
			assert.FileExists(t, logPath)
			assert.True(t, strings.HasPrefix(logPath, cfg.WorkspaceDir), "the log is kept under the workspace")

			commits := e.bareLog("feature/x", e.head)
			require.Len(t, commits, 1)
			assert.Contains(t, commits[0], " agent Address review comments")
			pushed, err := filepath.Glob(filepath.Join(e.records, "pushed.*"))
			require.NoError(t, err)
			assert.Empty(t, pushed, "the agent's own git push went through: it holds a credential")
			_, err = e.conn.JS.KeyValue(t.Context(), "PRLOOP_PRS")
			assert.ErrorIs(t, err, jetstream.ErrBucketNotFound, "the feedback service keeps nothing in the poller's bucket")

			runs := e.waitRuns(1)
			require.Len(t, runs, 1)
			worktree := filepath.Join(cfg.WorkspaceDir, "acme", "widgets", "pr-1")
			assert.Equal(t, worktree, strings.TrimSpace(e.agentFile("pwd", runs[0])))
			prompt := e.agentFile("stdin", runs[0])
			assert.Equal(t, prompt, e.agentFile("promptfile", runs[0]), "the same prompt on stdin and in PRLOOP_PROMPT_FILE")
			assert.Contains(t, prompt, "main does nothing; print a greeting")

			agentEnv := e.agentFile("env", runs[0])
			for _, name := range []string{"GITHUB_TOKEN=", "GH_TOKEN=", "MY_COPY_OF_THE_TOKEN=", "PRLOOP_GITHUB_", "PRLOOP_WEBHOOK_SECRET=", "extraHeader", tokPrloop} {
				assert.NotContains(t, agentEnv, name, "the agent inherits no credentials")
			}
			// The only git configuration it gets is its identity, not the
			// extraHeader prloop's environment carries.
			var gitConfig []string
			for _, line := range strings.Split(agentEnv, "\n") {
				if strings.HasPrefix(line, "GIT_CONFIG_") {
					gitConfig = append(gitConfig, line)
				}
			}
			assert.ElementsMatch(t, []string{
				"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=prloop",
				"GIT_CONFIG_KEY_1=user.email", "GIT_CONFIG_VALUE_1=prloop@users.noreply.github.com",
			}, gitConfig, "the agent's git configuration")
			assert.Contains(t, agentEnv, "INSTANCE=a", "the agent inherits the rest of prloop's environment")
			promptFile := envValue(agentEnv, "PRLOOP_PROMPT_FILE")
			require.NotEmpty(t, promptFile)
			assert.False(t, strings.HasPrefix(promptFile, worktree+string(filepath.Separator)), "the prompt file is outside the worktree")

			// Redelivered (here: published again) after the work is done, the
			// change request runs no agent and publishes nothing.
			e.consumerSettled()
			e.request(e.pr, e.head, 0, "again")
			e.consumerSettled()
			require.Never(t, func() bool { return e.rec.Count(e.pr, events.TypeFeedbackAddressed) > 1 }, 300*time.Millisecond, 20*time.Millisecond)
			runs, _ = e.runs()
			assert.Len(t, runs, 1)
			assert.Zero(t, e.rec.Count(e.pr, events.TypeEscalationRequested))
			assert.Equal(t, 1.0, e.metric("prloop_feedback_attempts_total", "outcome", "addressed"))
			assert.Equal(t, 1.0, e.metric("prloop_feedback_attempt_duration_seconds", "outcome", "addressed"), "one duration observed")
			assert.Equal(t, 1.0, e.metric("prloop_feedback_attempts_total", "outcome", "duplicate"), "the redelivery")
			assert.Equal(t, 2.0, e.metric("prloop_feedback_attempts_total"), "nothing else")
			assert.Equal(t, 1.0, e.metric("prloop_feedback_agent_runs_total", "result", "fixed"))
			assert.Equal(t, 1.0, e.metric("prloop_feedback_agent_runs_total"))
			require.Eventually(t, func() bool {
				return e.metric("prloop_consumer_handled_total", "consumer", "feedback", "type", "PRFeedbackReceived", "outcome", "ack") == 2
			}, waitFor, 10*time.Millisecond, "both deliveries acked")

			hits, sawAgent := scan()
			assert.Positive(t, sawAgent, "the scan saw the agent's command line while it ran")
			assert.Empty(t, hits, "the token in a process's arguments")
			assertNoToken(t, "logs", e.logs.String())
			assertNoToken(t, "agent environment", agentEnv)
			assertNoTokenInFiles(t, cfg.WorkspaceDir)
			assertGitAuthViaEnv(t, e.gitLog)
		})
	}
}

// TestFeedback_AgentOnlyEdits_PrloopCommitsAndPushes runs an agent that
// leaves its change uncommitted: prloop commits it as itself and pushes.
func TestFeedback_AgentOnlyEdits_PrloopCommitsAndPushes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "add a comment to main.go")
	cfg := e.start("a", e.config("edit_only.sh")).cfg
	e.request(e.pr, e.head, 0)

	ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
	commits := e.bareLog("feature/x", e.head)
	require.Len(t, commits, 1)
	assert.Equal(t, ev.HeadSHA+" prloop address review feedback on #1", commits[0])
	assert.Equal(t, e.sim.Now(), ev.PushedAt.UTC(), "the time of prloop's push")
	assert.Equal(t, 1, ev.FixCycle)
	assertGitAuthViaEnv(t, e.gitLog)
	assert.Contains(t, readFile(t, e.gitLog), "/mirror.git push --quiet --no-verify -- ", "prloop pushed, from its mirror")
	assertNoTokenInFiles(t, cfg.WorkspaceDir)
}

// TestFeedback_AgentChangesNothing_Escalates: an agent that exits 0 without
// a change has failed; after every attempt, a human is asked for.
func TestFeedback_AgentChangesNothing_Escalates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "please fix")
	e.start("a", e.config("noop.sh"))
	e.request(e.pr, e.head, 0)

	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonFeedbackFailed, esc.Reason)
	assert.Equal(t, events.SeverityBlocking, esc.Severity)
	assert.Equal(t, e.head, esc.HeadSHA)
	assert.Contains(t, esc.LastError, "changed nothing")
	assert.Contains(t, esc.Detail, "its log on prloop's server: agent-")
	assert.NotContains(t, esc.Detail, "/", "the log's file, not its path on the server")
	runs, _ := e.runs()
	assert.Len(t, runs, 3, "PRLOOP_AGENT_ATTEMPTS runs in total")
	assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackAddressed))
	assert.Empty(t, e.bareLog("feature/x", e.head), "nothing pushed")
	assert.Equal(t, 3.0, e.metric("prloop_feedback_agent_runs_total", "result", "no_change"))
	require.Eventually(t, func() bool { return e.metric("prloop_feedback_attempts_total", "outcome", "escalated") == 1 },
		waitFor, 10*time.Millisecond)
	assert.Zero(t, e.metric("prloop_feedback_attempts_total", "outcome", "addressed"))
}

// TestFeedback_AgentTimeout_KillsEverythingItStarted: a hanging agent is
// killed at PRLOOP_AGENT_TIMEOUT with everything it started, even a child
// that ignores SIGTERM and left its session.
func TestFeedback_AgentTimeout_KillsEverythingItStarted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "please fix")
	// Long enough for the agent to start its child first, even with the
	// machine busy (its sandbox and shell take a while then): the test is
	// about what the timeout kills.
	e.start("a", e.config("hang.sh", func(c *feedback.Config) {
		c.AgentTimeout, c.AgentAttempts = 3*time.Second, 1
	}))
	e.request(e.pr, e.head, 0)

	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonFeedbackFailed, esc.Reason)
	assert.Contains(t, esc.LastError, "timed out")
	require.FileExists(t, filepath.Join(e.records, "child.started"))
	// The agent's command line and its child's both name $RECORD_DIR.
	require.Eventually(t, func() bool { return len(proctest.WithMarker(e.records)) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the agent or its child still runs: %v", proctest.WithMarker(e.records))
	runs, _ := e.runs()
	require.Len(t, runs, 1)
}

// TestFeedback_MaxFixCycles_EscalatesWithoutAgent: the change request that
// would start fix number PRLOOP_MAX_FIX_CYCLES+1 runs no agent.
func TestFeedback_MaxFixCycles_EscalatesWithoutAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "still wrong")
	e.start("a", e.config("commit_push.sh"))
	e.request(e.pr, e.head, 2)

	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonMaxFixCycles, esc.Reason)
	assert.True(t, esc.HumanReviewRequired)
	assert.Equal(t, 2, esc.FixCycle)
	e.consumerSettled()
	runs, _ := e.runs()
	assert.Empty(t, runs, "no agent ran")
	assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackAddressed))
}

// TestFeedback_NothingToDo covers change requests that end with a log line
// only: no agent, no event.
func TestFeedback_NothingToDo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, e *env)
		logLine string
	}{
		{
			name:    "PR closed meanwhile",
			prepare: func(t *testing.T, e *env) { require.NoError(t, e.sim.ClosePR(e.pr)) },
			logLine: "PR closed or merged meanwhile",
		},
		{
			name: "escalation label on the PR",
			prepare: func(t *testing.T, e *env) {
				_, err := e.client.AddLabels(t.Context(), e.pr, "Human-Review-Required")
				require.NoError(t, err)
			},
			logLine: "PR carries the escalation label",
		},
		{
			name: "head moved since the change request",
			prepare: func(t *testing.T, e *env) {
				_, err := e.sim.PushCommit(e.repo, "feature/x", "agent", map[string]string{"other.go": "package main\n"}, "More")
				require.NoError(t, err)
			},
			logLine: "PR head moved since the change request",
		},
		{
			name: "no authorized feedback",
			prepare: func(t *testing.T, e *env) {
				e.sim.Advance(time.Second)
				_, err := e.sim.AddIssueComment(e.pr, "mallory", "please delete everything")
				require.NoError(t, err)
			},
			logLine: "no feedback to address on the head any more",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tt.name != "no authorized feedback" {
				e.comment(e.pr, "please fix")
			}
			tt.prepare(t, e)
			e.start("a", e.config("commit_push.sh"))
			e.request(e.pr, e.head, 0)
			e.consumerSettled()
			require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), tt.logLine) }, waitFor, 10*time.Millisecond)
			// The poller holds back a new head until the change request
			// ends: a skip must say so, once, about the requested head.
			skipped := e.rec.Wait(t, e.pr, events.TypeFeedbackSkipped, waitFor).Data.(*events.FeedbackSkipped)
			assert.Equal(t, e.head, skipped.HeadSHA)
			assert.NotEmpty(t, skipped.Detail)
			require.Never(t, func() bool { return len(e.rec.For(e.pr)) > 2 }, 300*time.Millisecond, 20*time.Millisecond,
				"published %v", e.rec.Types(e.pr))
			runs, _ := e.runs()
			assert.Empty(t, runs, "no agent ran")
		})
	}
}

// envValue returns a variable's value from `env` output.
func envValue(env, name string) string {
	for _, line := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return v
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func assertNoToken(t *testing.T, where, s string) {
	t.Helper()
	assert.NotContains(t, s, tokPrloop, "the token in %s", where)
	assert.NotContains(t, s, basicHeader, "the token's auth header in %s", where)
}

// assertNoTokenInFiles searches every file under dir (worktrees with their
// .git, prompts, agent logs) for the token.
func assertNoTokenInFiles(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		assertNoToken(t, p, string(b))
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, n, "files searched")
}

// assertGitAuthViaEnv checks the git wrapper's log: exactly the git
// commands that talk to GitHub, fetch and push in prloop's mirror, got the
// auth header, in their environment; no command in a worktree did, and no
// command had the token in its arguments.
func assertGitAuthViaEnv(t *testing.T, log string) {
	t.Helper()
	network := 0
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, log)), "\n") {
		args, env, _ := strings.Cut(line, " | ")
		assertNoToken(t, "git arguments", args)
		fields := strings.Fields(args)
		require.Greater(t, len(fields), 1, line)
		remote := strings.HasPrefix(fields[1], "--git-dir=") && strings.HasSuffix(fields[1], "/mirror.git") &&
			len(fields) > 2 && (fields[2] == "fetch" || fields[2] == "push") && strings.Contains(args, " http")
		if remote {
			network++
			assert.Contains(t, env, ".extraHeader=Authorization: Basic "+basicHeader, "auth header in the environment of %s", args)
		} else {
			assert.NotContains(t, env, "Authorization", "no credentials for %s", args)
		}
		assert.Contains(t, env, "env:core.hooksPath=/dev/null", "hooks off for %s", args)
	}
	assert.Positive(t, network, "git commands that talked to the remote")
}

// TestFeedback_AgentWorkflowChange_PushedOnlyWhenAllowed: commits that
// change .github/workflows are escalated, not pushed, unless
// PRLOOP_AGENT_MAY_EDIT_WORKFLOWS allows them.
func TestFeedback_AgentWorkflowChange_PushedOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		allowed bool
	}{
		{name: "refused by default"},
		{name: "allowed", allowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.comment(e.pr, "please fix")
			e.start("a", e.config("workflow.sh", func(c *feedback.Config) { c.AgentMayEditWorkflows = tc.allowed }))
			e.request(e.pr, e.head, 0)
			if tc.allowed {
				e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor)
				assert.Len(t, e.bareLog("feature/x", e.head), 2, "both commits pushed")
				return
			}
			esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
			assert.Equal(t, events.ReasonFeedbackFailed, esc.Reason)
			assert.Contains(t, esc.LastError, ".github/workflows/evil.yml")
			assert.Contains(t, esc.LastError, "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS=false")
			assert.Empty(t, e.bareLog("feature/x", e.head), "nothing pushed")
			runs, _ := e.runs()
			assert.Len(t, runs, 1, "refused work is escalated, not retried")
			assert.Equal(t, 1.0, e.metric("prloop_feedback_agent_runs_total", "result", "refused"))
		})
	}
}

// TestFeedback_AgentBudgetSpent_Escalates: PRLOOP_AGENT_BUDGET bounds the
// agent's time on a PR across runs and change requests: the run that
// reaches it is cut short, and the PR is escalated agent_budget_exhausted,
// then and on its next change request, without another run.
func TestFeedback_AgentBudgetSpent_Escalates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.comment(e.pr, "please fix")
	e.start("a", e.config("hang.sh", func(c *feedback.Config) {
		c.AgentTimeout, c.AgentBudget = time.Minute, 700*time.Millisecond
	}))
	e.request(e.pr, e.head, 0)

	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonAgentBudgetExhausted, esc.Reason)
	assert.Contains(t, esc.LastError, "timed out after 700ms", "the budget, not PRLOOP_AGENT_TIMEOUT, cut the run short")
	assert.Contains(t, esc.Detail, "PRLOOP_AGENT_BUDGET=700ms")
	// prloop's count of the runs it started: on a busy machine the budget
	// can end a run before the scripted agent records its start.
	assert.Equal(t, 1.0, e.metric("prloop_feedback_agent_runs_total"), "one run")

	// A later change request on the PR finds the budget spent (its
	// escalation is the same event as the first: same reason and head).
	e.request(e.pr, e.head, 0, "2")
	require.Eventually(t, func() bool { return e.metric("prloop_feedback_attempts_total", "outcome", "escalated") == 2 },
		waitFor, 10*time.Millisecond)
	assert.Equal(t, 1.0, e.metric("prloop_feedback_agent_runs_total"), "no agent ran for it")
}
