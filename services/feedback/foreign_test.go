package feedback_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// authorMerge has the PR's author push, over plain git, a merge of main's
// tip into the PR's head that resolves their conflict as the agent would
// (resolve.sh): a commit that passes every check of a resolution.
func authorMerge(t *testing.T, e *env) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "author")
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = filepath.Dir(wt)
		if _, err := os.Stat(wt); err == nil {
			cmd.Dir = wt
		}
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_AUTHOR_NAME=author", "GIT_AUTHOR_EMAIL=au@example.com",
			"GIT_COMMITTER_NAME=author", "GIT_COMMITTER_EMAIL=au@example.com")
		out, err := cmd.CombinedOutput()
		if len(args) > 0 && args[0] == "merge" {
			return string(out) // conflicts: exit 1
		}
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("clone", "--quiet", "--branch", "feature/x", "file://"+e.sim.GitDir(e.repo), wt)
	git("merge", "--no-edit", "origin/main")
	require.NoError(t, os.WriteFile(filepath.Join(wt, "main.go"), []byte("package main\n\nfunc main() { println(1) }\n\nfunc helper() {}\n"), 0o644))
	git("add", "-A")
	git("commit", "--quiet", "--no-edit")
	git("push", "--quiet", "origin", "HEAD:feature/x")
	return git("rev-parse", "HEAD")
}

// TestFeedback_ForeignPushIsNotTheAgentsWork: while the agent runs,
// someone else pushes to the PR: a commit on top of the change request's
// head, or, for a conflict the merger handed over, a merge commit that
// resolves it exactly as the agent's must. Neither is announced as the
// agent's work (which, for a resolution under
// PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX, would carry the approval over to
// a head nobody reviewed): the attempt is skipped as stale and nothing is
// pushed over the foreign head.
func TestFeedback_ForeignPushIsNotTheAgentsWork(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		conflict bool
		exit     string // the agent's exit status
	}{
		{name: "a push on a change request, the agent changes nothing", exit: "0"},
		{name: "a push on a change request, the agent fails", exit: "3"},
		{name: "a resolution of a conflict, the agent fails", conflict: true, exit: "3"},
		{name: "a resolution of a conflict, the agent changes nothing", conflict: true, exit: "0"},
	}
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		for _, tt := range tests {
			t.Run(string(mode)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				requireSandbox(t, mode)
				foreignPush(t, mode, tt.conflict, tt.exit)
			})
		}
	}
}

// foreignPush plays one row of TestFeedback_ForeignPushIsNotTheAgentsWork:
// a conflict resolution or a change request, and the agent's exit status.
func foreignPush(t *testing.T, mode sandbox.Mode, conflict bool, exit string) {
	t.Helper()
	e := newEnv(t)
	var base string
	if conflict {
		e, base = newConflictEnv(t)
	}
	e.start("a", e.config("wait_exit.sh", func(c *feedback.Config) {
		c.AgentSandbox = string(mode)
		c.AgentCmd = "EXIT=" + exit + " " + c.AgentCmd
	}))
	if conflict {
		e.resolveRequest(base, 1)
	} else {
		e.comment(e.pr, "please fix")
		e.request(e.pr, e.head, 0)
	}
	e.waitRuns(1)
	var foreign string
	if conflict {
		foreign = authorMerge(t, e)
	} else {
		var err error
		foreign, err = e.sim.PushCommit(e.repo, "feature/x", "agent", map[string]string{"other.go": "package main\n"}, "The author's own push")
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.records, "release-a"), nil, 0o644))

	require.Eventually(t, func() bool {
		return e.rec.Count(e.pr, events.TypeFeedbackSkipped)+e.rec.Count(e.pr, events.TypeFeedbackAddressed) > 0
	}, waitFor, 10*time.Millisecond, "the attempt never ended")
	e.consumerSettled()
	require.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackAddressed), "someone else's push announced as the agent's")
	skipped := e.rec.Wait(t, e.pr, events.TypeFeedbackSkipped, waitFor).Data.(*events.FeedbackSkipped)
	assert.Contains(t, skipped.Detail, "prloop did not push")
	assert.Zero(t, e.rec.Count(e.pr, events.TypeEscalationRequested))
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, foreign, info.HeadSHA, "nothing pushed over the foreign head")
}
