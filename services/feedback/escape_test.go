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
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_WorktreeCannotReachOutside: prloop works on the watch
// request's worktree after each agent run, outside the sandbox and with
// its own rights (it resets the worktree after a failed run, removing the
// files the agent added, and commits and bundles after a good one). An
// agent that rigs the worktree for those steps (git's work tree moved by
// core.worktree so that the paths git reports lead through a link to a
// directory of prloop's; .git itself a link; hooks, an fsmonitor and a
// clean filter that delete files) must not make prloop touch anything
// outside it: the victims survive byte for byte, with both sandboxes.
func TestFeedback_WorktreeCannotReachOutside(t *testing.T) {
	t.Parallel()
	attacks := []struct {
		attack string
		exit   string
		want   events.Type
	}{
		{attack: "core.worktree", exit: "3", want: events.TypeEscalationRequested},
		{attack: "dotgit-link", exit: "3", want: events.TypeEscalationRequested},
		{attack: "hooks", exit: "0", want: events.TypeFeedbackAddressed},
	}
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		for _, tt := range attacks {
			t.Run(string(mode)+"/"+tt.attack, func(t *testing.T) {
				t.Parallel()
				requireSandbox(t, mode)
				e := newEnv(t)
				wt := filepath.Join(t.TempDir(), "wt")
				out, err := exec.Command("git", "clone", "--quiet", "--branch", "feature/x", "file://"+e.sim.GitDir(e.repo), wt).CombinedOutput()
				require.NoError(t, err, "%s", out)
				e.worktree = wt

				// The victims: files like those of prloop's data directory.
				victim := t.TempDir()
				victims := map[string]string{"nats.seed": "SUAKEY\n", "app.pem": "-----BEGIN KEY-----\n", "stream.blk": "\x00\x01data"}
				var names []string
				for name, body := range victims {
					require.NoError(t, os.WriteFile(filepath.Join(victim, name), []byte(body), 0o600))
					names = append(names, name)
				}

				e.comment(e.pr, "please fix")
				e.start("a", e.config("escape.sh", func(c *feedback.Config) {
					c.AgentSandbox = string(mode)
					c.AgentCmd = "ATTACK=" + tt.attack + " EXIT=" + tt.exit + " VICTIM=" + victim +
						" VICTIM_FILES='" + strings.Join(names, " ") + "' " + c.AgentCmd
				}))
				e.request(e.pr, e.head, 0)
				e.rec.Wait(t, e.pr, tt.want, waitFor)
				e.consumerSettled()

				for name, body := range victims {
					got, err := os.ReadFile(filepath.Join(victim, name))
					if assert.NoError(t, err, "victim %s", name) {
						assert.Equal(t, body, string(got), "victim %s", name)
					}
				}
			})
		}
	}
}
