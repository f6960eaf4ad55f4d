package feedback_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_AgentCommitsWithPlainGit: a real agent commits with a plain
// `git commit`; its sandbox's HOME is empty, so git has no identity but
// the one prloop gives it (PRLOOP_GIT_AUTHOR_NAME and _EMAIL). The commit
// is the agent's own, pushed as it made it, with both sandboxes.
func TestFeedback_AgentCommitsWithPlainGit(t *testing.T) {
	t.Parallel()
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			requireSandbox(t, mode)
			e := newEnv(t)
			e.comment(e.pr, "please fix")
			e.start("a", e.config("plain_commit.sh", func(c *feedback.Config) {
				c.AgentSandbox = string(mode)
				c.GitAuthorName, c.GitAuthorEmail = "prloop-agent", "agent@prloop.example"
			}))
			e.request(e.pr, e.head, 0)
			require.Eventually(t, func() bool {
				return e.rec.Count(e.pr, events.TypeFeedbackAddressed)+e.rec.Count(e.pr, events.TypeEscalationRequested) > 0
			}, waitFor, 10*time.Millisecond, "the attempt never ended")
			runs := e.waitRuns(1)
			require.Zero(t, e.rec.Count(e.pr, events.TypeEscalationRequested), "escalated; git commit said: %s", e.agentFile("commit-stderr", runs[0]))
			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
			out, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "-1", "--format=%an <%ae> | %cn <%ce> | %s", ev.HeadSHA).Output()
			require.NoError(t, err)
			assert.Equal(t, "prloop-agent <agent@prloop.example> | prloop-agent <agent@prloop.example> | Address review comments", strings.TrimSpace(string(out)),
				"the agent's own commit, not one prloop made of what it left")
			assert.Len(t, runs, 1)
		})
	}
}
