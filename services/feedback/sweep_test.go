package feedback_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// TestSweep_RemovesWorkspacesOfClosedPRs: once a PR is closed or merged,
// the sweep removes its clone, its prompt and logs and its mirror refs;
// an open PR's workspace stays (issue #15, defect 7).
func TestSweep_RemovesWorkspacesOfClosedPRs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		close   func(e *env) error
		removed bool
	}{
		{name: "open PR kept", close: func(*env) error { return nil }},
		{name: "closed PR removed", close: func(e *env) error { return e.sim.ClosePR(e.pr) }, removed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.comment(e.pr, "main does nothing; print a greeting")
			in := e.start("a", e.config("commit_push.sh"))
			e.request(e.pr, e.head, 0)
			e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor)
			base := filepath.Join(in.cfg.WorkspaceDir, "acme", "widgets")
			mirror := filepath.Join(base, "mirror.git")
			require.DirExists(t, filepath.Join(base, "pr-1"))
			require.DirExists(t, filepath.Join(base, "pr-1.d"))
			require.NotEmpty(t, prRefs(t, mirror), "the attempt left refs in the mirror")

			require.NoError(t, tt.close(e))
			removed, err := in.svc.Sweep(t.Context())
			require.NoError(t, err)
			if !tt.removed {
				assert.Empty(t, removed)
				assert.DirExists(t, filepath.Join(base, "pr-1"))
				assert.NotEmpty(t, prRefs(t, mirror))
				return
			}
			assert.Equal(t, []ghref.PR{{Owner: "acme", Repo: "widgets", Number: 1}}, removed)
			assert.NoDirExists(t, filepath.Join(base, "pr-1"))
			assert.NoDirExists(t, filepath.Join(base, "pr-1.d"))
			assert.Empty(t, prRefs(t, mirror))
			assert.DirExists(t, mirror, "the mirror serves the repository's other PRs")
		})
	}
}

// prRefs lists the mirror's refs/prloop/pr-1/ refs.
func prRefs(t *testing.T, mirror string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "--git-dir="+mirror, "for-each-ref", "--format=%(refname)", "refs/prloop/pr-1/").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
