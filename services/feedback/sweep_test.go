package feedback_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/services/feedback"
)

// TestSweep_RemovesWorkspacesOfClosedPRs: once a PR is closed or merged,
// the sweep removes its clone, its prompt and logs, its mirror refs and
// the service's records of it, so the bucket's key count goes back down;
// an open PR's workspace and record stay (issue #15, defect 7).
func TestSweep_RemovesWorkspacesOfClosedPRs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// closeFirst closes the PR before the change request, which is
		// then skipped before any checkout: a record without a workspace.
		closeFirst bool
		close      func(e *env) error
		removed    bool
	}{
		{name: "open PR kept", close: func(*env) error { return nil }},
		{name: "closed PR removed", close: func(e *env) error { return e.sim.ClosePR(e.pr) }, removed: true},
		{name: "closed before the change request: its record removed", closeFirst: true, close: func(e *env) error { return e.sim.ClosePR(e.pr) }, removed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.comment(e.pr, "main does nothing; print a greeting")
			if tt.closeFirst {
				require.NoError(t, tt.close(e))
			}
			in := e.start("a", e.config("commit_push.sh"))
			e.request(e.pr, e.head, 0)
			base := filepath.Join(in.cfg.WorkspaceDir, "acme", "widgets")
			mirror := filepath.Join(base, "mirror.git")
			if tt.closeFirst {
				e.rec.Wait(t, e.pr, events.TypeFeedbackSkipped, waitFor)
				require.NoDirExists(t, filepath.Join(base, "pr-1"))
			} else {
				e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor)
				require.DirExists(t, filepath.Join(base, "pr-1"))
				require.DirExists(t, filepath.Join(base, "pr-1.d"))
				require.NotEmpty(t, prRefs(t, mirror), "the attempt left refs in the mirror")
				require.NoError(t, tt.close(e))
			}
			e.consumerSettled()
			attempt := "attempt." + events.PRKey(e.pr)
			require.Eventually(t, func() bool {
				keys := feedbackKeys(t, e)
				return len(keys) == 1 && keys[0] == attempt
			}, waitFor, 10*time.Millisecond, "the attempt's record alone, its lease released")

			removed, err := in.svc.Sweep(t.Context())
			require.NoError(t, err)
			if !tt.removed {
				assert.Empty(t, removed)
				assert.DirExists(t, filepath.Join(base, "pr-1"))
				assert.NotEmpty(t, prRefs(t, mirror))
				assert.Equal(t, []string{attempt}, feedbackKeys(t, e))
				return
			}
			assert.Equal(t, []ghref.PR{{Owner: "acme", Repo: "widgets", Number: 1}}, removed)
			assert.Empty(t, feedbackKeys(t, e), "the bucket forgot the PR")
			assert.NoDirExists(t, filepath.Join(base, "pr-1"))
			assert.NoDirExists(t, filepath.Join(base, "pr-1.d"))
			if !tt.closeFirst {
				assert.Empty(t, prRefs(t, mirror))
				assert.DirExists(t, mirror, "the mirror serves the repository's other PRs")
			}
		})
	}
}

// feedbackKeys lists the keys in the feedback service's bucket, delete
// markers included (they would be keys a listing still pays for).
func feedbackKeys(t *testing.T, e *env) []string {
	t.Helper()
	b, err := kvlease.OpenBucket(t.Context(), e.conn.JS, feedback.Bucket)
	require.NoError(t, err)
	keys, err := b.KeysMatching(t.Context())
	require.NoError(t, err)
	return keys
}

// prRefs lists the mirror's refs/prloop/pr-1/ refs.
func prRefs(t *testing.T, mirror string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "--git-dir="+mirror, "for-each-ref", "--format=%(refname)", "refs/prloop/pr-1/").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
