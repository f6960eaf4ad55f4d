package feedback_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_CostBudgetCountsEveryCycle: PRLOOP_AGENT_MAX_COST_USD bounds
// what the agent's runs cost on one PR across its fix cycles: the first
// fix ($0.60) is pushed; the second change request's run brings the PR to
// $1.20, over $1, and is stopped and escalated as agent_budget_exhausted
// with the figures, its work not pushed; a third change request escalates
// before any run.
func TestFeedback_CostBudgetCountsEveryCycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake, err := filepath.Abs(filepath.Join("testdata", "fakeclaude"))
	require.NoError(t, err)
	e.environ = append(e.environ, "PATH="+fake+":/usr/bin:/bin", "FAKE_COST=0.6")
	cfg := e.config("noop.sh", func(c *feedback.Config) {
		c.Agent, c.AgentCmd = "claude-code", ""
		c.AgentReadOnlyPaths = []string{fake}
		c.AgentMaxCostUSD = 1
		c.MaxFixCycles = 5
	})
	e.comment(e.pr, "add a comment to main.go")
	e.start("a", cfg)
	e.request(e.pr, e.head, 0)

	first := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
	require.NotNil(t, first.Agent)
	assert.InDelta(t, 0.6, first.Agent.PRCostUSD, 1e-9)
	assert.Equal(t, "edited main.go", first.Agent.Final)

	e.seedState()
	e.comment(e.pr, "and one more")
	e.request(e.pr, first.HeadSHA, first.FixCycle, "2")
	esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonAgentBudgetExhausted, esc.Reason)
	assert.Contains(t, esc.Detail, "cost $1.2000 (this run $0.6000), at or over PRLOOP_AGENT_MAX_COST_USD=$1")
	require.NotNil(t, esc.Agent)
	assert.Equal(t, "pr_cost", esc.Agent.Budget)
	assert.Empty(t, e.bareLog("feature/x", first.HeadSHA), "the run over the budget is not pushed")
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeFeedbackAddressed))

	// A human resolved it; a new change request on the same head finds the
	// budget spent and escalates without a run.
	e.sim.Advance(time.Second)
	e.request(e.pr, first.HeadSHA, first.FixCycle, "3")
	require.Eventually(t, func() bool { return e.rec.Count(e.pr, events.TypeEscalationRequested) == 2 }, waitFor, 10*time.Millisecond)
	last := e.rec.For(e.pr)[len(e.rec.For(e.pr))-1].Data.(*events.EscalationRequested)
	assert.Contains(t, last.Detail, "cost $1.2000 (this run $0.0000)")
	assert.Nil(t, last.Agent, "no run, no run's summary")
}

// TestFeedback_PresetRunsFromTheAgentsPath: a preset's binary is looked up
// on the agent's PATH inside the sandbox, in every backend, as the start-up
// check looks it up; without a sandbox it was looked up on prloop's own
// PATH and not found. A binary missing at run time is the shell's exit
// status 127: escalated at once, as for PRLOOP_AGENT_CMD.
func TestFeedback_PresetRunsFromTheAgentsPath(t *testing.T) {
	t.Parallel()
	fake, err := filepath.Abs(filepath.Join("testdata", "fakeclaude"))
	require.NoError(t, err)
	for _, mode := range []sandbox.Mode{sandbox.None, sandbox.Bwrap, sandbox.Namespaces} {
		for _, found := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/found=%v", mode, found), func(t *testing.T) {
				t.Parallel()
				requireSandbox(t, mode)
				e := newEnv(t)
				path := "/usr/bin:/bin"
				if found {
					path = fake + ":" + path
				}
				e.environ = append(e.environ, "PATH="+path, "FAKE_COST=0.01")
				cfg := e.config("noop.sh", func(c *feedback.Config) {
					c.Agent, c.AgentCmd, c.AgentSandbox = "claude-code", "", string(mode)
					c.AgentReadOnlyPaths = []string{fake}
					c.AgentBackoff = time.Hour // a retry would never come in time
				})
				e.comment(e.pr, "add a comment to main.go")
				e.start("a", cfg)
				e.request(e.pr, e.head, 0)
				if found {
					done := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
					require.NotNil(t, done.Agent)
					assert.Equal(t, "edited main.go", done.Agent.Final)
					return
				}
				esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
				assert.Equal(t, events.ReasonFeedbackFailed, esc.Reason)
				assert.Contains(t, esc.LastError, "exit status 127")
				assert.Contains(t, esc.LastError, "claude")
			})
		}
	}
}
