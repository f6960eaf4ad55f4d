package feedback

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/sandbox"
)

// TestWorktreeGit_PinnedToTheWorktree: the agent's .git/config moves git's
// work tree (core.worktree) and says the repository is bare; prloop's git
// in the worktree still lists paths relative to the worktree itself, so a
// link the agent planted is reported as the link (link), never as a path
// through it (link/victim) that prloop would then resolve on the host.
func TestWorktreeGit_PinnedToTheWorktree(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	wt, outside := filepath.Join(top, "wt"), filepath.Join(top, "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com",
			"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	run("init", "-q", wt)
	run("-C", wt, "commit", "-q", "--allow-empty", "-m", "start")
	require.NoError(t, os.MkdirAll(filepath.Join(wt, "sub", "link"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "sub", "link", "victim"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(wt, "link")))
	run("-C", wt, "config", "core.bare", "true")
	run("-C", wt, "config", "core.worktree", "../sub")

	sb, err := sandbox.New(sandbox.Options{Mode: sandbox.None}, nil)
	require.NoError(t, err)
	g := &realGit{Bin: "git", Env: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: sb}
	files, err := g.untracked(t.Context(), Worktree{Dir: wt})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"link", "sub/link/victim"}, files)
}
