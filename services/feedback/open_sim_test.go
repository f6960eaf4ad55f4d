package feedback_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// envWrapper is a git that logs, one line per call, where it ran, its
// arguments, and whether its environment held the token in any form.
func envWrapper(t *testing.T) (bin, log string) {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	// The log's own directory: the sandboxed git commands write it too.
	bin, log = filepath.Join(t.TempDir(), "git"), filepath.Join(t.TempDir(), "calls.log")
	script := `#!/bin/sh
secret=no
# Matched in the shell: a grep would carry the token in its arguments,
# where the other tests' scans of every command line rightly find it.
e=$(env)
case "$e" in *'` + tokPrloop + `'*|*'` + basicHeader + `'*) secret=yes;; esac
printf '%s | secret=%s | args:%s\n' "$(pwd)" "$secret" "$(printf ' %s' "$@")" >>'` + log + `'
exec '` + real + `' "$@"
`
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, log
}

// agentClone makes the agent's worktree: a plain clone of the simulator's
// repository, without credentials, on a new branch with one commit.
func agentClone(t *testing.T, e *env, branch, message string) (string, string) {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=a@example.com",
			"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=a@example.com")
		cmd.Dir = filepath.Dir(wt)
		if _, err := os.Stat(wt); err == nil {
			cmd.Dir = wt
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("clone", "--quiet", e.sim.GitDir(e.repo), wt)
	git("checkout", "--quiet", "-b", branch)
	if message != "" {
		require.NoError(t, os.WriteFile(filepath.Join(wt, "open.go"), []byte("package main\n\n// opened\n"), 0o644))
		git("add", "open.go")
		git("commit", "--quiet", "-m", message)
	}
	return wt, git("rev-parse", "HEAD")
}

// TestOpen_PushesFromTheMirrorOnly: the feedback service opens a PR for a
// branch of the agent's worktree. Every git command in the worktree runs
// without the token in its environment (prloop's own environment has it
// in several forms); only the mirror's commands that talk to GitHub get
// it. A repeat opens nothing new, and a branch with nothing to merge is
// refused into the dead letters.
func TestOpen_PushesFromTheMirrorOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gitBin, e.gitLog = envWrapper(t)
	e.start("a", e.config("noop.sh", func(c *feedback.Config) {
		c.AgentWritablePaths = append(c.AgentWritablePaths, filepath.Dir(e.gitLog))
	}))
	wt, head := agentClone(t, e, "feature/open", "Open the door\n\nIt was closed.")
	repo0 := e.repo.PR(events.CreateRequestedNumber)
	ask := func(parts ...string) {
		_, _, err := e.emit.Emit(t.Context(), &events.CreateRequested{
			Base: events.Base{PR: repo0, HeadSHA: head}, Worktree: wt, Branch: "feature/open", Labels: []string{"agent"},
		}, parts...)
		require.NoError(t, err)
	}
	ask("1")
	var pr ghref.PR
	require.Eventually(t, func() bool {
		for _, r := range e.rec.All() {
			if c, ok := r.Data.(*events.Created); ok {
				pr = c.PR
				return true
			}
		}
		return false
	}, waitFor, 20*time.Millisecond)
	created := e.rec.Wait(t, pr, events.TypeCreated, waitFor).Data.(*events.Created)
	assert.Equal(t, head, created.HeadSHA)
	assert.False(t, created.Existing)
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	assert.Equal(t, "Open the door", info.Title)
	assert.Equal(t, "It was closed.", info.Body)
	assert.Equal(t, []string{"agent"}, info.Labels)

	ask("2") // a repeat JetStream does not drop
	e.consumerSettled()
	prs, err := e.client.ListPulls(t.Context(), e.repo, "all")
	require.NoError(t, err)
	n := 0
	for _, p := range prs {
		if p.GetHead().GetRef() == "feature/open" {
			n++
		}
	}
	assert.Equal(t, 1, n, "one PR for the branch")

	// Nothing to merge: refused, with the reason, into the dead letters.
	same, _ := agentClone(t, e, "feature/empty", "")
	_, _, err = e.emit.Emit(t.Context(), &events.CreateRequested{Base: events.Base{PR: repo0}, Worktree: same, Branch: "feature/empty"}, "3")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := events.CountDeadLetters(context.Background(), e.conn.JS, feedback.Name)
		return err == nil && n == 1
	}, waitFor, 20*time.Millisecond, "the empty branch was not refused")
	assert.Contains(t, e.logs.String(), `has no commits that main lacks`)

	b, err := os.ReadFile(e.gitLog)
	require.NoError(t, err)
	pushes, inWorktree := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		dirPart, rest, _ := strings.Cut(line, " | ")
		switch {
		case strings.HasPrefix(dirPart, filepath.Dir(wt)) || strings.HasPrefix(dirPart, filepath.Dir(same)):
			inWorktree++
			assert.Contains(t, rest, "secret=no", "a git command in the worktree had the token: %s", line)
		case strings.Contains(rest, "secret=yes"):
			// Only the mirror's commands that talk to GitHub get it.
			assert.Contains(t, rest, "--git-dir=", "the token outside the mirror: %s", line)
			assert.Regexp(t, `args: --git-dir=\S+ (fetch|ls-remote|push) .*http://`, rest, "the token in a local command: %s", line)
			if strings.Contains(rest, " push ") {
				pushes++
			}
		}
		assert.NotContains(t, rest, tokPrloop, "the token in an argument: %s", line)
	}
	assert.Equal(t, 1, pushes, "one push")
	assert.GreaterOrEqual(t, inWorktree, 3, "the worktree's git commands were seen: rev-parse, fetch from the mirror, bundle")
	assert.NotContains(t, e.logs.String(), tokPrloop)
}

// TestOpen_OnlyToABranchPrloopMayOwn: the worktree's checked-out branch is
// the agent's choice. prloop open pushes only to a branch GitHub does not
// have yet, or to one prloop opened a PR from in this same worktree: a
// fast-forward of another PR's branch, of a branch someone pushed, or of a
// branch the repository's rules protect, is refused with a reason naming
// its owner, and nothing is pushed or announced. The branch prloop opened
// itself takes more commits from its own worktree, and from no other.
func TestOpen_OnlyToABranchPrloopMayOwn(t *testing.T) {
	t.Parallel()
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			requireSandbox(t, mode)
			openOnlyOwned(t, mode)
		})
	}
}

// openOnlyOwned plays TestOpen_OnlyToABranchPrloopMayOwn with the
// worktree's git in the sandbox mode.
func openOnlyOwned(t *testing.T, mode sandbox.Mode) {
	e := newEnv(t)
	e.start("a", e.config("noop.sh", func(c *feedback.Config) { c.AgentSandbox = string(mode) }))
	repo0 := e.repo.PR(events.CreateRequestedNumber)
	_, err := e.sim.PushCommit(e.repo, "release/2.4", "octo", map[string]string{"REL": "2.4\n"}, "Release 2.4")
	require.NoError(t, err)
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "release/9", "ci"))

	var n int
	ask := func(wt, branch, head string) {
		n++
		_, _, err := e.emit.Emit(t.Context(), &events.CreateRequested{Base: events.Base{PR: repo0, HeadSHA: head}, Worktree: wt, Branch: branch}, strconv.Itoa(n))
		require.NoError(t, err)
	}
	refused := func(why string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), why) }, waitFor, 20*time.Millisecond, "not refused: %s", why)
	}
	// advance makes a worktree on branch, at GitHub's head of it (when
	// there is one) plus one commit.
	advance := func(branch string) (string, string) {
		wt, _ := agentClone(t, e, branch, "")
		cmd := exec.Command("sh", "-c", `git fetch -q origin && (git reset -q --hard "origin/$B" 2>/dev/null || true) &&
			echo more >>more.txt && git add more.txt && git -c user.name=agent -c user.email=a@example.com commit -qm More && git rev-parse HEAD`)
		cmd.Dir, cmd.Env = wt, append(os.Environ(), "B="+branch, "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return wt, strings.TrimSpace(string(out))
	}

	prHead := e.head
	wt, head := advance("feature/x") // the branch of PR #1, which its author opened
	ask(wt, "feature/x", head)
	refused(`branch \"feature/x\" belongs to pull request #1, which prloop did not open from ` + wt)
	wt, head = advance("release/2.4")
	ask(wt, "release/2.4", head)
	refused(`branch \"release/2.4\" exists on GitHub and prloop did not create it`)
	wt, head = advance("release/9")
	ask(wt, "release/9", head)
	refused(`branch \"release/9\" is protected on GitHub (rules: required_status_checks)`)

	// prloop's own branch: opened from wt, then more commits from wt are
	// pushed to its PR, and none from another worktree.
	mine, head := advance("feature/mine")
	ask(mine, "feature/mine", head)
	created := waitCreated(t, e, "feature/mine", head)
	more := commitMore(t, mine)
	ask(mine, "feature/mine", more)
	require.Eventually(t, func() bool {
		info, err := e.sim.PRInfo(created.PR)
		return err == nil && info.HeadSHA == more
	}, waitFor, 20*time.Millisecond, "prloop's own branch took no more commits from its worktree")
	other, head := advance("feature/mine")
	ask(other, "feature/mine", head)
	refused(`branch \"feature/mine\" belongs to pull request #` + strconv.Itoa(created.PR.Number) + `, which prloop did not open from ` + other)

	// Once the branch is gone from GitHub (its PR merged, say, and the
	// branch deleted), another worktree may open a PR from a branch of that
	// name, and the branch is then that worktree's: it takes more commits.
	require.NoError(t, e.client.DeleteBranch(t.Context(), e.repo, "feature/mine"))
	again, head := advance("feature/mine")
	ask(again, "feature/mine", head)
	reopened := waitCreated(t, e, "feature/mine", head)
	more = commitMore(t, again)
	ask(again, "feature/mine", more)
	require.Eventually(t, func() bool {
		info, err := e.sim.PRInfo(reopened.PR)
		return err == nil && info.HeadSHA == more
	}, waitFor, 20*time.Millisecond, "the branch's new owner could not push to it")

	e.consumerSettled()
	dead, err := events.CountDeadLetters(context.Background(), e.conn.JS, feedback.Name)
	require.NoError(t, err)
	assert.EqualValues(t, 4, dead, "each refusal dead-lettered with its reason")
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, prHead, info.HeadSHA, "another PR's branch was pushed to")
	assert.Zero(t, e.rec.Count(e.pr, events.TypeCreated), "another PR announced as prloop's")
	for _, b := range []string{"release/2.4", "release/9"} {
		out, _ := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "--format=%s", b).Output()
		assert.NotContains(t, string(out), "More", "pushed to %s", b)
	}
}

// commitMore commits one more change in the worktree wt and returns it.
func commitMore(t *testing.T, wt string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", "echo again >>more.txt && git -c user.name=agent -c user.email=a@example.com commit -qam Again && git rev-parse HEAD")
	cmd.Dir, cmd.Env = wt, append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// waitCreated waits for the PRCreated of branch at head and returns it.
func waitCreated(t *testing.T, e *env, branch, head string) *events.Created {
	t.Helper()
	var created *events.Created
	require.Eventually(t, func() bool {
		for _, r := range e.rec.All() {
			if c, ok := r.Data.(*events.Created); ok && c.Branch == branch && c.HeadSHA == head {
				created = c
				return true
			}
		}
		return false
	}, waitFor, 20*time.Millisecond, "no PRCreated for %s", branch)
	return created
}
