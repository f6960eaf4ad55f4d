package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/services/feedback"
)

// gitIn runs the test's own git (an orchestrator's, say) in dir.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// commitFile writes a file in the worktree and commits it.
func commitFile(t *testing.T, wt, name, content, message string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(wt, name), []byte(content), 0o644))
	gitIn(t, wt, "add", name)
	gitIn(t, wt, "commit", "--quiet", "-m", message)
	return gitIn(t, wt, "rev-parse", "HEAD")
}

// TestOpen_Arguments checks prloop open's arguments and what it reads
// from the worktree, without a running prloop.
func TestOpen_Arguments(t *testing.T) {
	t.Parallel()
	wt := t.TempDir()
	gitIn(t, wt, "init", "--quiet", "--initial-branch=main")
	commitFile(t, wt, "README.md", "# w\n", "Start")
	gitIn(t, wt, "checkout", "--quiet", "-b", "feature/x")
	head := commitFile(t, wt, "x.go", "package x\n", "Add x")
	body := filepath.Join(t.TempDir(), "body.md")
	require.NoError(t, os.WriteFile(body, []byte("Why it matters.\n"), 0o644))
	big := filepath.Join(t.TempDir(), "big.md")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("x"), events.MaxBody+1), 0o644))
	detached := t.TempDir()
	gitIn(t, detached, "init", "--quiet", "--initial-branch=main")
	c := commitFile(t, detached, "a", "a", "A")
	gitIn(t, detached, "checkout", "--quiet", "--detach", c)
	notGit := t.TempDir()

	for _, tc := range []struct {
		name string
		args []string
		want func(t *testing.T, d *events.CreateRequested)
		err  string
	}{
		{name: "the worktree's branch, defaults", args: []string{"acme/widgets", "-worktree", wt},
			want: func(t *testing.T, d *events.CreateRequested) {
				assert.Equal(t, ghref.PR{Owner: "acme", Repo: "widgets", Number: 0}, d.PR)
				assert.Equal(t, "feature/x", d.Branch)
				assert.Equal(t, head, d.HeadSHA)
				assert.Empty(t, d.BaseBranch, "the service resolves the default branch")
				assert.Empty(t, d.Title, "the service falls back to the last commit")
				assert.Equal(t, wt, d.Worktree)
				assert.Equal(t, "cli", d.Actor)
			}},
		{name: "every flag, flags after the repository", args: []string{"https://github.com/acme/widgets", "-worktree", wt, "-branch", "main", "-base", "feature/x",
			"-title", "Add\u202e x\n", "-body-file", body, "-draft", "-label", "agent", "-label", "needs review", "-context", "specs"},
			want: func(t *testing.T, d *events.CreateRequested) {
				assert.Equal(t, "main", d.Branch)
				assert.Equal(t, "feature/x", d.BaseBranch)
				assert.Equal(t, "Add x", d.Title)
				assert.Equal(t, "Why it matters.\n", d.Body)
				assert.True(t, d.Draft)
				assert.Equal(t, []string{"agent", "needs review"}, d.Labels)
				assert.True(t, filepath.IsAbs(d.ContextPath))
			}},
		{name: "no repository", args: []string{"-worktree", wt}, err: "takes one repository"},
		{name: "a PR, not a repository", args: []string{"acme/widgets#3", "-worktree", wt}, err: "names a pull request"},
		{name: "no worktree", args: []string{"acme/widgets"}, err: "-worktree is required"},
		{name: "missing worktree", args: []string{"acme/widgets", "-worktree", filepath.Join(wt, "nope")}, err: "is not a directory"},
		{name: "not a git checkout", args: []string{"acme/widgets", "-worktree", notGit}, err: "is not a git checkout"},
		{name: "detached HEAD", args: []string{"acme/widgets", "-worktree", detached}, err: "detached HEAD"},
		{name: "branch is the base", args: []string{"acme/widgets", "-worktree", wt, "-base", "feature/x"}, err: "is the base"},
		{name: "no such branch", args: []string{"acme/widgets", "-worktree", wt, "-branch", "feature/y"}, err: `has no branch "feature/y"`},
		{name: "branch like a flag", args: []string{"acme/widgets", "-worktree", wt, "-branch", "-x"}, err: "is not a branch name"},
		{name: "invalid branch", args: []string{"acme/widgets", "-worktree", wt, "-branch", "a..b"}, err: "not a valid branch name"},
		{name: "invalid base", args: []string{"acme/widgets", "-worktree", wt, "-base", "ma in"}, err: "not a valid branch name"},
		{name: "invisible title", args: []string{"acme/widgets", "-worktree", wt, "-title", "\u200b"}, err: "no visible characters"},
		{name: "body too big", args: []string{"acme/widgets", "-worktree", wt, "-body-file", big}, err: "at most 8192"},
		{name: "missing body file", args: []string{"acme/widgets", "-worktree", wt, "-body-file", body + ".nope"}, err: "-body-file"},
		{name: "label with a newline", args: []string{"acme/widgets", "-worktree", wt, "-label", "a\nb"}, err: "-label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			d, _, err := parseOpen(t.Context(), tc.args, &stderr)
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, errUsage)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			tc.want(t, d)
			_, err = events.New(events.PublisherCLI, d, time.Now(), d.Branch, ghref.EventSHA(d.HeadSHA))
			require.NoError(t, err, "the request is a valid event")
		})
	}
}

// TestOpen_EndToEnd runs the four services in one process against the
// simulator serving git over HTTP with a token on every request. An agent's
// worktree, a clone without credentials, has commits on a new branch;
// `prloop open` asks for its PR. prloop pushes the branch from its mirror,
// opens exactly one PR titled after the last commit, announces it with
// PRCreated and watches it: a 👍 from the reviewer gets it merged. Asking
// again opens no second PR, and the token is nowhere in the worktree.
func TestOpen_EndToEnd(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	w := simtest.Start(t, map[string]string{"main.go": "package main\n"}, simtest.GitHTTP())
	sim, repo := w.Sim, w.Repo
	sim.AddToken("tok-alice", "alice")
	require.NoError(t, sim.SetPermission(repo, "alice", "write"))
	dir := t.TempDir()
	for k, v := range map[string]string{
		"PRLOOP_GITHUB_API_URL": w.Server.URL, "GITHUB_TOKEN": simtest.Token, "GH_TOKEN": "",
		"PRLOOP_GITHUB_LOGIN": simtest.Login, "PRLOOP_REPOS": "", "PRLOOP_REVIEWERS": "alice",
		"PRLOOP_REVIEW_PROTOCOLS": "emoji,reviews", "PRLOOP_POLL_INTERVAL": "1s", "PRLOOP_REVIEW_TIMEOUT": "10m",
		"PRLOOP_DATA_DIR": filepath.Join(dir, "nats"), "PRLOOP_NATS_URL": "", "PRLOOP_NATS_PORT": "-1", "PRLOOP_NATS_CREDS_FILE": "",
		"PRLOOP_HTTP_ADDR": "127.0.0.1:0", "PRLOOP_WORKSPACE_DIR": filepath.Join(dir, "work"), "PRLOOP_MERGE_POLL_INTERVAL": "1s",
		"PRLOOP_AGENT_CMD": "true", "PRLOOP_LOG_LEVEL": "error",
	} {
		t.Setenv(k, v)
	}
	ctx, rt, _ := startLoop(t, "open-e2e")
	rec := eventstest.Record(t, rt.JS)
	// The operator's commands find prloop's NATS as `prloop open` would.
	t.Setenv("PRLOOP_NATS_URL", rt.Conn.URL)
	t.Setenv("PRLOOP_NATS_CREDS_FILE", rt.Conn.CredsFile)

	// The agent's worktree: a plain clone (no credentials), a new branch,
	// two commits.
	wt := filepath.Join(dir, "agent-wt")
	gitIn(t, dir, "clone", "--quiet", sim.GitDir(repo), wt)
	gitIn(t, wt, "checkout", "--quiet", "-b", "feature/greet")
	commitFile(t, wt, "greet.go", "package main\n\nfunc greet() string { return \"hello\" }\n", "Add greet")
	head := commitFile(t, wt, "greet_test.go", "package main\n", "Greet the world\n\nThe greeting says hello to everyone.\n")
	require.NoError(t, os.MkdirAll(filepath.Join(wt, ".specify"), 0o755))

	var out, errb bytes.Buffer
	require.NoError(t, run(ctx, []string{"open", "acme/widgets", "-worktree", wt, "-label", "agent-work", "-context", filepath.Join(wt, ".specify")}, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "opened acme/widgets#", "it waited for the PR")

	client := w.Client(t)
	var pr ghref.PR
	require.Eventually(t, func() bool {
		p, err := client.FindOpenPull(ctx, repo, "feature/greet", "main")
		if err != nil || p == nil {
			return false
		}
		pr = repo.PR(p.GetNumber())
		return true
	}, time.Minute, 50*time.Millisecond, "no PR opened; events: %v", rec.All())
	created := rec.Wait(t, pr, events.TypeCreated, time.Minute).Data.(*events.Created)
	assert.Equal(t, head, created.HeadSHA, "the pushed head is the worktree's branch")
	assert.Equal(t, "main", created.BaseBranch)
	assert.Equal(t, "feature/greet", created.Branch)
	assert.Equal(t, wt, created.Worktree)
	assert.Equal(t, filepath.Join(wt, ".specify"), created.ContextPath)
	assert.Equal(t, "Greet the world", created.Title)
	assert.NotEmpty(t, created.PR.URL)
	info, err := sim.PRInfo(pr)
	require.NoError(t, err)
	assert.Equal(t, "Greet the world", info.Title, "the last commit's subject")
	assert.Equal(t, "The greeting says hello to everyone.", info.Body, "and its body")
	assert.Equal(t, head, info.HeadSHA)
	assert.Equal(t, []string{"agent-work"}, info.Labels)
	assert.Equal(t, simtest.Login, info.Author, "prloop opened it")

	// Asking again: the CLI's same request is a duplicate, and a request
	// that JetStream does not drop (an orchestrator's retry with an id of
	// its own) finds the open PR.
	out.Reset()
	require.NoError(t, run(ctx, []string{"open", "acme/widgets", "-worktree", wt, "-wait", "0"}, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "already requested")
	_, _, err = events.NewEmitter(rt.JS, events.PublisherCLI).Emit(ctx, &events.CreateRequested{
		Base: events.Base{PR: repo.PR(events.CreateRequestedNumber), HeadSHA: head}, Worktree: wt, Branch: "feature/greet", Actor: "orchestrator",
	}, "feature/greet", ghref.EventSHA(head), "retry")
	require.NoError(t, err)
	cons := natstest.Consumer(t, rt.JS, feedback.Name)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= 2
	}, time.Minute, 20*time.Millisecond, "the second request was never handled")
	all, err := client.ListPulls(ctx, repo, "all")
	require.NoError(t, err)
	n := 0
	for _, p := range all {
		if p.GetHead().GetRef() == "feature/greet" {
			n++
		}
	}
	assert.Equal(t, 1, n, "one PR for the branch")
	assert.Equal(t, 1, rec.Count(pr, events.TypeCreated), "the repeat's PRCreated is the same event")
	dlq, err := events.CountDeadLetters(ctx, rt.JS, feedback.Name)
	require.NoError(t, err)
	assert.Zero(t, dlq, "nothing refused")

	// Watching began: the reviewer's 👍 gets it merged.
	rec.Wait(t, pr, events.TypeReviewPending, time.Minute)
	_, err = sim.AddReaction(pr, "alice", "+1")
	require.NoError(t, err)
	approved := rec.Wait(t, pr, events.TypeReviewApproved, time.Minute).Data.(*events.ReviewApproved)
	assert.Equal(t, head, approved.HeadSHA)
	rec.Wait(t, pr, events.TypeMerged, time.Minute)
	info, err = sim.PRInfo(pr)
	require.NoError(t, err)
	assert.True(t, info.Merged)

	// The token never reached the agent's worktree: not its config, not
	// its remotes, not any file git or prloop left there.
	assert.NotContains(t, gitIn(t, wt, "remote", "-v"), simtest.Token)
	require.NoError(t, filepath.WalkDir(wt, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		assert.NotContains(t, string(b), simtest.Token, "%s holds the token", path)
		return nil
	}))
}
