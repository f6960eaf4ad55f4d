package feedback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/gitx"
	"github.com/prloop/prloop/pkg/sandbox"
)

// realGit runs prloop's own git processes on two sides of a wall.
//
// Git is prloop's git on both sides of the wall, as an attempt uses it
// (realGit; fakes in the executor's tests).
type Git interface {
	Adopt(ctx context.Context, wt *Worktree, start string, resuming bool) (string, error)
	Clone(ctx context.Context, wt Worktree, start string) error
	Reset(ctx context.Context, wt Worktree, start string) error
	HasCommit(ctx context.Context, wt Worktree, sha string) bool
	Export(ctx context.Context, wt Worktree, start, message string, exclude ...string) (string, error)
	Sync(ctx context.Context, wt Worktree) (string, error)
	IsAncestor(ctx context.Context, wt Worktree, a, b string) (bool, error)
	Inspect(ctx context.Context, wt Worktree, start, target string, maxCommits int, forbidWorkflows string) error
	Push(ctx context.Context, wt Worktree, target string) error
}

var _ Git = (*realGit)(nil)

// The mirror is a bare repository per PR repository under the workspace,
// written only by prloop and never visible to the agent. Only there does
// git talk to GitHub, with the token in that one process's environment (an
// http.<host>.extraHeader set with GIT_CONFIG_COUNT/KEY/VALUE: never a URL,
// an argument, a file or a log line). Every check of the agent's work
// (ancestry, files changed, size) runs there, and so does the push.
//
// The worktree is the agent's: its files and its .git, config included,
// are the agent's to write, and a repository's config can make git run
// programs (core.fsmonitor, filters, core.alternateRefsCommand, …) or send
// its requests elsewhere (http.proxy, url.<x>.insteadOf). So git in the
// worktree only ever runs local commands, carries no credential, and runs
// in the agent's sandbox. What the agent made leaves the worktree only as
// a bundle file, which the mirror fetches as plain data, fsck on.
//
// Every git command runs with system and global configuration ignored,
// hooks and fsmonitor off, and only the https, http and file transports.
type realGit struct {
	// Bin is the git executable.
	Bin string
	// Env is the base environment, already stripped of credentials.
	Env []string
	// Name and Email sign the commits prloop makes itself.
	Name, Email string
	// Token returns the credential for the remote, fresh for each use.
	Token func(ctx context.Context) (github.Secret, error)
	// Sandbox runs the git commands in the worktree.
	Sandbox Sandbox
	// ReadOnly and Writable are host paths every sandboxed command also
	// sees (the git executable's own directory when it is not in /usr).
	ReadOnly, Writable []string
	// MaxBundleBytes bounds the agent's work as prloop takes it in.
	MaxBundleBytes int64
}

// Sandbox runs a command where the agent runs: *sandbox.Sandbox.
type Sandbox interface {
	Run(ctx context.Context, c sandbox.Cmd) error
	Mode() sandbox.Mode
}

var _ Sandbox = (*sandbox.Sandbox)(nil)

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// ErrGit is wrapped by errors of git commands that ran and failed.
var ErrGit = gitx.ErrGit

// ErrUnusable is wrapped by errors about a PR prloop cannot check out as
// GitHub describes it (clone URL, branch name, head): retrying is useless.
var ErrUnusable = errors.New("cannot check the PR out")

// mirrorGit runs git in prloop's mirror m and returns its trimmed stdout.
// remote names the remote the command talks to ("" for local commands),
// which is what gets the credentials. It runs as prloop's own process,
// outside the sandbox: m holds nothing the agent wrote but fsck'd objects.
func (g *realGit) mirrorGit(ctx context.Context, m, remote string, args ...string) (string, error) {
	return g.runner().Run(ctx, gitx.Cmd{Args: args, GitDir: m, Remote: remote})
}

// runner runs git as prloop's own process, with g's credentials.
func (g *realGit) runner() *gitx.Runner { return &gitx.Runner{Bin: g.Bin, Env: g.Env, Token: g.Token} }

// worktreeGit runs a local git command in wt's directory inside the
// sandbox, without credentials, seeing the mirror read-only and out (when
// set) writable; it returns the trimmed stdout.
func (g *realGit) worktreeGit(ctx context.Context, wt Worktree, extraEnv []string, out string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitx.LocalTimeout)
	defer cancel()
	env, _, err := g.runner().Environ(ctx, "")
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	c := sandbox.Cmd{
		Args: append([]string{g.Bin}, args...), Dir: wt.Dir, Env: append(append(env, worktreeEnv(wt.Dir)...), extraEnv...),
		ReadOnly: slices.Clip(g.ReadOnly), Writable: slices.Clip(g.Writable),
		Stdout: &stdout, Stderr: &stderr, KillGrace: time.Second,
	}
	if _, err := os.Stat(wt.Mirror); err == nil {
		c.ReadOnly = append(c.ReadOnly, wt.Mirror) // not made yet before the first Sync
	}
	if out != "" {
		c.Writable = append(c.Writable, out)
	}
	return gitx.Finish(g.Sandbox.Run(ctx, c), args, &stdout, &stderr, nil)
}

// worktreeEnv pins git in the worktree dir to it: the repository at
// dir/.git and the work tree at dir itself, whatever the worktree's
// config says. The agent writes that config: a core.worktree of its
// choosing would make git list and check out files relative to another
// directory, so that the paths it reports, joined to dir, lead through a
// link of the agent's out of the worktree. GIT_DIR and GIT_WORK_TREE
// outrank core.worktree and core.bare.
func worktreeEnv(dir string) []string {
	return []string{"GIT_DIR=" + filepath.Join(dir, ".git"), "GIT_WORK_TREE=" + dir}
}

// Worktree is where the agent works on a PR, and prloop's mirror of it.
type Worktree struct {
	Dir string
	// Own is set for prloop's clone under the workspace, which prloop may
	// reset at will; a worktree from the watch request is the user's.
	Own bool
	// Remote is the PR head repository's clone URL, which only the
	// mirror talks to.
	Remote string
	// Branch is the PR's head branch.
	Branch string
	// Mirror is prloop's bare repository for the PR's repository, and
	// Number the PR's number, which names its refs there.
	Mirror string
	Number int
	// Out is a directory outside the worktree where the sandboxed git
	// leaves the bundle of the agent's work.
	Out string
	// Keep are the untracked files of a user's worktree from before prloop
	// used it (a spec folder, notes): never committed, never deleted.
	Keep map[string]bool
	// RefPrefix names the mirror's refs for this work when it is about no
	// PR yet (opening one, open.go); default refs/prloop/pr-<Number>.
	RefPrefix string
}

// refs is the prefix of the mirror's refs for this worktree's work.
func (wt Worktree) refs() string {
	if wt.RefPrefix != "" {
		return wt.RefPrefix
	}
	return "refs/prloop/pr-" + strconv.Itoa(wt.Number)
}

// headRef is the mirror's copy of the PR branch as GitHub last showed it;
// resultRef is the agent's work as prloop took it in; baseRef the base
// branch (only when opening a PR).
func (wt Worktree) headRef() string   { return wt.refs() + "/head" }
func (wt Worktree) resultRef() string { return wt.refs() + "/result" }
func (wt Worktree) baseRef() string   { return wt.refs() + "/base" }

// checkRemote refuses a clone URL git could take for an option or a
// transport that runs commands.
func checkRemote(remote string) error {
	u, err := url.Parse(remote)
	if err != nil || strings.HasPrefix(remote, "-") {
		return fmt.Errorf("%w: clone URL %q is not a URL", ErrUnusable, remote)
	}
	switch u.Scheme {
	case "https", "http", "file":
		return nil
	}
	return fmt.Errorf("%w: clone URL %q: scheme %q, want https", ErrUnusable, remote, u.Scheme)
}

// checkBranch refuses branch names git could take for an option or reject.
func (g *realGit) checkBranch(ctx context.Context, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("%w: branch name %q", ErrUnusable, branch)
	}
	if _, err := g.mirrorGit(ctx, "", "", "check-ref-format", "refs/heads/"+branch); err != nil {
		return fmt.Errorf("%w: branch name %q: %w", ErrUnusable, branch, err)
	}
	return nil
}

// mirrorInit serialises the creation of mirrors: two attempts on PRs of
// one repository may start at once.
var mirrorInit sync.Mutex

// Sync brings the PR branch's commits from GitHub into the mirror,
// creating it when absent, and returns the branch's head there.
func (g *realGit) Sync(ctx context.Context, wt Worktree) (string, error) {
	if err := g.ensureMirror(ctx, wt); err != nil {
		return "", err
	}
	if _, err := g.mirrorGit(ctx, wt.Mirror, wt.Remote, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--", wt.Remote, "+refs/heads/"+wt.Branch+":"+wt.headRef()); err != nil {
		return "", err
	}
	return g.mirrorGit(ctx, wt.Mirror, "", "rev-parse", "--verify", wt.headRef()+"^{commit}")
}

// ensureMirror creates the mirror when absent.
func (g *realGit) ensureMirror(ctx context.Context, wt Worktree) error {
	mirrorInit.Lock()
	defer mirrorInit.Unlock()
	_, err := os.Stat(filepath.Join(wt.Mirror, "HEAD"))
	if err != nil {
		if err = os.MkdirAll(wt.Mirror, 0o700); err == nil {
			_, err = g.mirrorGit(ctx, wt.Mirror, "", "init", "--quiet", "--bare")
		}
	}
	if err != nil {
		return fmt.Errorf("create mirror %s: %w", wt.Mirror, err)
	}
	return nil
}

// fetchIntoWorktree brings the mirror's copy of the PR branch into the
// worktree, as origin/<branch> in prloop's clone and FETCH_HEAD in a
// user's worktree.
func (g *realGit) fetchIntoWorktree(ctx context.Context, wt Worktree) error {
	refspec := wt.headRef()
	if wt.Own {
		refspec = "+" + wt.headRef() + ":refs/remotes/origin/" + wt.Branch
	}
	_, err := g.worktreeGit(ctx, wt, nil, "", "fetch", "--quiet", "--no-tags", "--", wt.Mirror, refspec)
	return err
}

// Head returns the commit checked out in wt. It is the agent's word:
// only what the mirror took in (Export) is trusted.
func (g *realGit) Head(ctx context.Context, wt Worktree) (string, error) {
	return g.worktreeGit(ctx, wt, nil, "", "rev-parse", "--verify", "HEAD^{commit}")
}

// CurrentBranch returns the branch checked out in wt ("HEAD" when detached).
func (g *realGit) CurrentBranch(ctx context.Context, wt Worktree) (string, error) {
	return g.worktreeGit(ctx, wt, nil, "", "rev-parse", "--abbrev-ref", "HEAD")
}

// modified reports whether wt's tracked files have uncommitted changes.
func (g *realGit) modified(ctx context.Context, wt Worktree) (bool, error) {
	out, err := g.worktreeGit(ctx, wt, nil, "", "status", "--porcelain", "--untracked-files=no")
	return out != "", err
}

// untracked lists wt's untracked files that .gitignore does not hide.
func (g *realGit) untracked(ctx context.Context, wt Worktree) ([]string, error) {
	out, err := g.worktreeGit(ctx, wt, nil, "", "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(strings.TrimRight(out, "\x00"), "\x00"), nil
}

// newFiles lists the untracked files in wt that are not the user's.
func (g *realGit) newFiles(ctx context.Context, wt Worktree) ([]string, error) {
	all, err := g.untracked(ctx, wt)
	var out []string
	for _, f := range all {
		if !wt.Keep[f] {
			out = append(out, f)
		}
	}
	return out, err
}

// Dirty reports whether wt has uncommitted changes: modified tracked files
// or new untracked ones.
func (g *realGit) Dirty(ctx context.Context, wt Worktree) (bool, error) {
	if mod, err := g.modified(ctx, wt); err != nil || mod {
		return mod, err
	}
	files, err := g.newFiles(ctx, wt)
	return len(files) > 0, err
}

// HasCommit reports whether the mirror holds the commit sha.
func (g *realGit) HasCommit(ctx context.Context, wt Worktree, sha string) bool {
	if !shaRE.MatchString(sha) {
		return false
	}
	_, err := g.mirrorGit(ctx, wt.Mirror, "", "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b
// in the mirror.
func (g *realGit) IsAncestor(ctx context.Context, wt Worktree, a, b string) (bool, error) {
	_, err := g.mirrorGit(ctx, wt.Mirror, "", "merge-base", "--is-ancestor", a, b)
	if err != nil && gitx.ExitCode(err) == 1 {
		return false, nil
	}
	return err == nil, err
}

// Clone prepares prloop's own clone of the PR at wt.Dir from the mirror:
// created when absent, fetched otherwise, and on a local branch named like
// the PR's head branch tracking origin/<branch>, reset to start, clean:
// nothing an earlier agent run left there survives. The clone's origin is the PR's clone URL, for the agent's information:
// the agent has no credential to use it with.
func (g *realGit) Clone(ctx context.Context, wt Worktree, start string) error {
	if err := g.check(ctx, wt, start); err != nil {
		return err
	}
	if _, err := g.Sync(ctx, wt); err != nil {
		return err
	}
	// An agent may have replaced .git with a link or a file naming
	// another repository: prloop's clone is then made anew.
	if st, err := os.Lstat(filepath.Join(wt.Dir, ".git")); err != nil || !st.IsDir() {
		if err := os.RemoveAll(wt.Dir); err != nil {
			return fmt.Errorf("clear %s: %w", wt.Dir, err)
		}
		if err := os.MkdirAll(wt.Dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", wt.Dir, err)
		}
		if _, err := g.worktreeGit(ctx, wt, nil, "", "init", "--quiet"); err != nil {
			return err
		}
		if _, err := g.worktreeGit(ctx, wt, nil, "", "remote", "add", "origin", wt.Remote); err != nil {
			return err
		}
	}
	if err := g.fetchIntoWorktree(ctx, wt); err != nil {
		return err
	}
	return g.Reset(ctx, wt, start)
}

// check refuses a PR prloop cannot check out as GitHub describes it.
func (g *realGit) check(ctx context.Context, wt Worktree, start string) error {
	if err := checkRemote(wt.Remote); err != nil {
		return err
	}
	if !shaRE.MatchString(start) {
		return fmt.Errorf("%w: head %q is not a commit id", ErrUnusable, start)
	}
	return g.checkBranch(ctx, wt.Branch)
}

// worktreeIsAncestor asks the worktree's git whether a is an ancestor of
// b: only for choosing what to do with the worktree, never for trusting it.
func (g *realGit) worktreeIsAncestor(ctx context.Context, wt Worktree, a, b string) (bool, error) {
	_, err := g.worktreeGit(ctx, wt, nil, "", "merge-base", "--is-ancestor", a, b)
	if err != nil && gitx.ExitCode(err) == 1 {
		return false, nil
	}
	return err == nil, err
}

// Reset puts wt back at start with no local changes. In prloop's clone it
// also recreates the local branch there; in a user's worktree it only
// resets the checked-out branch and removes untracked files, keeping
// ignored ones (build caches, dependencies).
func (g *realGit) Reset(ctx context.Context, wt Worktree, start string) error {
	if !wt.Own {
		if _, err := g.worktreeGit(ctx, wt, nil, "", "reset", "--quiet", "--hard", start); err != nil {
			return err
		}
		files, err := g.newFiles(ctx, wt)
		if rerr := removeBeneath(wt.Dir, files); rerr != nil {
			err = errors.Join(err, fmt.Errorf("reset %s: %w", wt.Dir, rerr))
		}
		return err
	}
	steps := [][]string{
		{"checkout", "--quiet", "--force", "-B", wt.Branch, start},
		{"branch", "--quiet", "--set-upstream-to=origin/" + wt.Branch, wt.Branch},
		{"clean", "-ffdxq"},
	}
	for _, args := range steps {
		if _, err := g.worktreeGit(ctx, wt, nil, "", args...); err != nil {
			return err
		}
	}
	return nil
}

// Adopt checks whether the user's worktree at wt.Dir can be used for the
// change request on start: it must be a checkout of wt.Branch, and either
// at start, behind it without modified files (then fast-forwarded), or,
// when resuming, holding work of an interrupted attempt made from start
// (for the caller to reset). It returns why not otherwise. Unless wt.Keep
// already names the user's untracked files, it records those present now.
func (g *realGit) Adopt(ctx context.Context, wt *Worktree, start string, resuming bool) (string, error) {
	if st, err := os.Stat(wt.Dir); err != nil || !st.IsDir() {
		return "not a directory", nil
	}
	if err := g.check(ctx, *wt, start); err != nil {
		return "", err
	}
	branch, err := g.CurrentBranch(ctx, *wt)
	if err != nil {
		return "not a git checkout", nil
	}
	if branch != wt.Branch {
		return fmt.Sprintf("on branch %q, not %q", branch, wt.Branch), nil
	}
	if _, err := g.Sync(ctx, *wt); err != nil {
		return "", err
	}
	if err := g.fetchIntoWorktree(ctx, *wt); err != nil {
		return "", err
	}
	head, err := g.Head(ctx, *wt)
	if err != nil {
		return "", err
	}
	dirty, err := g.modified(ctx, *wt)
	if err != nil {
		return "", err
	}
	if wt.Keep == nil {
		files, err := g.untracked(ctx, *wt)
		if err != nil {
			return "", err
		}
		wt.Keep = map[string]bool{}
		for _, f := range files {
			wt.Keep[f] = true
		}
	}
	if resuming && (dirty || head != start) {
		if ok, _ := g.worktreeIsAncestor(ctx, *wt, start, head); ok {
			return "", nil
		}
	}
	if dirty {
		return "has uncommitted changes", nil
	}
	if head == start {
		return "", nil
	}
	if ok, _ := g.worktreeIsAncestor(ctx, *wt, head, start); !ok {
		return "has commits the PR does not", nil
	}
	if _, err := g.worktreeGit(ctx, *wt, nil, "", "merge", "--quiet", "--ff-only", start); err != nil {
		return "", err
	}
	return "", nil
}

// CommitAll commits every change in wt as prloop: modified tracked files
// and new files, but not the user's own untracked files.
func (g *realGit) CommitAll(ctx context.Context, wt Worktree, message string) error {
	if _, err := g.worktreeGit(ctx, wt, nil, "", "add", "--update"); err != nil {
		return err
	}
	files, err := g.newFiles(ctx, wt)
	if err != nil {
		return err
	}
	for len(files) > 0 {
		n := min(len(files), 200)
		if _, err := g.worktreeGit(ctx, wt, nil, "", append([]string{"add", "--"}, files[:n]...)...); err != nil {
			return err
		}
		files = files[n:]
	}
	_, err = g.worktreeGit(ctx, wt, g.identity(), "", "commit", "--quiet", "--no-verify", "-m", message)
	return err
}

// identity is the environment that makes prloop the author and committer
// of what the worktree's git records.
func (g *realGit) identity() []string { return gitIdentity(g.Name, g.Email) }

// agentIdentity is the environment that gives the agent's git an
// identity, name <email> (PRLOOP_GIT_AUTHOR_NAME and _EMAIL): its sandbox's
// HOME is empty, so without it a plain `git commit` fails with "Author
// identity unknown". It is configuration (user.name, user.email) from the
// environment, not GIT_AUTHOR_*: an agent that names itself with
// `git -c user.name=…` keeps its name, as it would on a developer's
// machine.
func agentIdentity(name, email string) []string {
	return []string{
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=" + name,
		"GIT_CONFIG_KEY_1=user.email", "GIT_CONFIG_VALUE_1=" + email,
	}
}

// gitIdentity is the environment that makes name <email> the author and
// committer of what git records, whatever git's configuration says.
func gitIdentity(name, email string) []string {
	return []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email,
	}
}

// ErrTooBig is wrapped by Export's error when the agent's work is over
// the size bound.
var ErrTooBig = fmt.Errorf("the agent's work is too big: %w", ErrRefused)

// Export takes the agent's work into the mirror: it commits what the
// agent left uncommitted, and when the worktree's head is a commit the
// mirror lacks, bundles it there (inside the sandbox) and fetches the
// bundle into the mirror's result ref (outside, fsck on). It returns the
// head as the mirror knows it: the only form of the agent's work prloop
// trusts from here on. The bundle leaves out what exclude (commits the
// mirror has, such as a merged base tip) reach.
func (g *realGit) Export(ctx context.Context, wt Worktree, start, message string, exclude ...string) (string, error) {
	dirty, err := g.Dirty(ctx, wt)
	if err != nil {
		return "", err
	}
	if dirty {
		if err := g.CommitAll(ctx, wt, message); err != nil {
			return "", err
		}
	}
	head, err := g.Head(ctx, wt)
	if err != nil {
		return "", err
	}
	if !shaRE.MatchString(head) {
		return "", fmt.Errorf("%w: the worktree's head %q is not a commit id", ErrGit, Truncate(head, 80))
	}
	if g.HasCommit(ctx, wt, head) {
		return head, nil // nothing new: start itself, or a commit the mirror has
	}
	if err := os.MkdirAll(wt.Out, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", wt.Out, err)
	}
	bundle := filepath.Join(wt.Out, "result.bundle")
	defer os.Remove(bundle)
	args := []string{"bundle", "create", "--quiet", bundle, "HEAD", "^" + start}
	for _, x := range exclude {
		if !shaRE.MatchString(x) {
			return "", fmt.Errorf("%w: %q is not a commit id", ErrUnusable, x)
		}
		args = append(args, "^"+x)
	}
	if _, err := g.worktreeGit(ctx, wt, nil, wt.Out, args...); err != nil {
		return "", err
	}
	st, err := os.Lstat(bundle)
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: no bundle of the agent's work at %s", ErrGit, bundle)
	}
	if g.MaxBundleBytes > 0 && st.Size() > g.MaxBundleBytes {
		return "", fmt.Errorf("%w: %d bytes of new objects, over PRLOOP_AGENT_MAX_BYTES=%d", ErrTooBig, st.Size(), g.MaxBundleBytes)
	}
	if _, err := g.mirrorGit(ctx, wt.Mirror, "", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--", bundle, "+HEAD:"+wt.resultRef()); err != nil {
		return "", err
	}
	return g.mirrorGit(ctx, wt.Mirror, "", "rev-parse", "--verify", wt.resultRef()+"^{commit}")
}

// ErrRefused is wrapped by Inspect's error when the agent's work changes
// what prloop does not push on its behalf.
var ErrRefused = errors.New("prloop does not push this")

// Inspect checks, in the mirror, the commits from start to target that
// prloop is about to push: at most maxCommits of them, and no change under
// .github/workflows when forbidWorkflows names the setting that forbids
// it (a workflow runs with the repository's secrets, so an agent that
// reads strangers' text must not write one; "" allows it).
func (g *realGit) Inspect(ctx context.Context, wt Worktree, start, target string, maxCommits int, forbidWorkflows string) error {
	n, err := g.mirrorGit(ctx, wt.Mirror, "", "rev-list", "--count", start+".."+target)
	if err != nil {
		return err
	}
	if c, _ := strconv.Atoi(n); maxCommits > 0 && c > maxCommits {
		return fmt.Errorf("%w: %d commits, over PRLOOP_AGENT_MAX_COMMITS=%d", ErrRefused, c, maxCommits)
	}
	if forbidWorkflows == "" {
		return nil
	}
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "diff", "--name-only", "--no-renames", "-z", start, target, "--", ".github/workflows")
	if err != nil {
		return err
	}
	if files := strings.Split(strings.TrimRight(out, "\x00"), "\x00"); out != "" {
		return fmt.Errorf("%w: the agent's commits change %s (%s)", ErrRefused, strings.Join(files, ", "), forbidWorkflows)
	}
	return nil
}

// Push pushes target from the mirror to the PR's branch. It is a plain
// push, so git refuses anything but a fast-forward: prloop never rewrites
// a PR's history.
func (g *realGit) Push(ctx context.Context, wt Worktree, target string) error {
	if _, err := g.mirrorGit(ctx, wt.Mirror, wt.Remote, "push", "--quiet", "--no-verify", "--", wt.Remote, target+":refs/heads/"+wt.Branch); err != nil {
		return err
	}
	_, err := g.mirrorGit(ctx, wt.Mirror, "", "update-ref", wt.headRef(), target)
	return err
}
