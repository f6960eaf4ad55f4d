package feedback

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/github"
)

// Timeouts of prloop's own git processes.
const (
	gitLocalTimeout   = 2 * time.Minute
	gitNetworkTimeout = 10 * time.Minute
)

// Git runs prloop's own git processes: clone, fetch, commit, push. The
// GitHub token reaches them only through their environment, as an
// http.<host>.extraHeader set with GIT_CONFIG_COUNT/KEY/VALUE and only for
// the commands that talk to the remote: never in a URL, an argument (which
// ps shows), a file (the agent can read .git/config) or a log line. Hooks
// and fsmonitor are disabled for every command, so nothing the agent wrote
// into the worktree runs with that environment.
type Git struct {
	// Bin is the git executable.
	Bin string
	// Env is the base environment, already stripped of credentials.
	Env []string
	// Name and Email sign the commits prloop makes itself.
	Name, Email string
	// Token returns the credential for the remote, fresh for each use.
	Token func(ctx context.Context) (github.Secret, error)
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// ErrGit is wrapped by errors of git commands that ran and failed.
var ErrGit = errors.New("git failed")

// ErrUnusable is wrapped by errors about a PR prloop cannot check out as
// GitHub describes it (clone URL, branch name, head): retrying is useless.
var ErrUnusable = errors.New("cannot check the PR out")

// hardening is configuration every prloop git command runs with.
var hardening = [][2]string{
	{"core.hooksPath", os.DevNull},
	{"core.fsmonitor", "false"},
	{"commit.gpgsign", "false"},
}

// authScope is the URL prefix the auth header is limited to: scheme and
// host for http(s) remotes, so git sends it nowhere else (submodules, LFS
// or redirects elsewhere); the remote itself for others (file:// with the
// simulator), where git never uses it.
func authScope(remote string) string {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return remote
	}
	return u.Scheme + "://" + u.Host + "/"
}

// basicAuth is the header value git sends: GitHub accepts a token as the
// password of the x-access-token user, for PATs and App tokens alike.
func basicAuth(tok github.Secret) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok.Reveal()))
}

// environ returns the environment of one git command; remote is "" for a
// command that needs no credentials.
func (g *Git) environ(ctx context.Context, remote string) ([]string, []string, error) {
	cfg := append([][2]string(nil), hardening...)
	var secrets []string
	if remote != "" {
		tok, err := g.Token(ctx)
		if err != nil {
			return nil, nil, err
		}
		if tok != "" {
			header := basicAuth(tok)
			cfg = append(cfg, [2]string{"credential.helper", ""}, [2]string{"http." + authScope(remote) + ".extraHeader", header})
			secrets = append(secrets, tok.Reveal(), strings.TrimPrefix(header, "Authorization: Basic "))
		}
	}
	env := append([]string(nil), g.Env...)
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, kv := range cfg {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env, secrets, nil
}

// run runs git in dir and returns its trimmed stdout. remote names the
// remote the command talks to ("" for local commands), which is what gets
// the credentials.
func (g *Git) run(ctx context.Context, dir, remote string, extraEnv []string, args ...string) (string, error) {
	timeout := gitLocalTimeout
	if remote != "" {
		timeout = gitNetworkTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env, secrets, err := g.environ(ctx, remote)
	if err != nil {
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	cmd := exec.CommandContext(ctx, g.Bin, args...)
	cmd.Dir = dir
	cmd.Env = append(env, extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		for _, s := range secrets {
			msg = strings.ReplaceAll(msg, s, "[REDACTED]")
		}
		return strings.TrimSpace(out.String()), &gitError{args: args, err: err, stderr: Truncate(msg, 2000)}
	}
	return strings.TrimSpace(out.String()), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() []error { return []error{ErrGit, e.err} }

// exitCode is the exit status of a failed git command, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Worktree is where the agent works on a PR.
type Worktree struct {
	Dir string
	// Own is set for prloop's clone under the workspace, which prloop may
	// reset at will; a worktree from the watch request is the user's.
	Own bool
	// Remote is the PR head repository's clone URL, where prloop fetches
	// and pushes (never "origin", which the agent can repoint).
	Remote string
	// Branch is the PR's head branch.
	Branch string
	// Keep are the untracked files of a user's worktree from before prloop
	// used it (a spec folder, notes): never committed, never deleted.
	Keep map[string]bool
}

// checkRemote refuses a clone URL git could take for an option or a
// transport that runs commands.
func checkRemote(remote string) error {
	u, err := url.Parse(remote)
	if err != nil || strings.HasPrefix(remote, "-") {
		return fmt.Errorf("%w: clone URL %q is not a URL", ErrUnusable, remote)
	}
	switch u.Scheme {
	case "https", "http", "file", "ssh":
		return nil
	}
	return fmt.Errorf("%w: clone URL %q: scheme %q, want https", ErrUnusable, remote, u.Scheme)
}

// checkBranch refuses branch names git could take for an option or reject.
func (g *Git) checkBranch(ctx context.Context, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("%w: branch name %q", ErrUnusable, branch)
	}
	if _, err := g.run(ctx, "", "", nil, "check-ref-format", "refs/heads/"+branch); err != nil {
		return fmt.Errorf("%w: branch name %q: %w", ErrUnusable, branch, err)
	}
	return nil
}

// Head returns the commit checked out in dir.
func (g *Git) Head(ctx context.Context, dir string) (string, error) {
	return g.run(ctx, dir, "", nil, "rev-parse", "--verify", "HEAD^{commit}")
}

// CurrentBranch returns the branch checked out in dir ("HEAD" when detached).
func (g *Git) CurrentBranch(ctx context.Context, dir string) (string, error) {
	return g.run(ctx, dir, "", nil, "rev-parse", "--abbrev-ref", "HEAD")
}

// modified reports whether dir's tracked files have uncommitted changes.
func (g *Git) modified(ctx context.Context, dir string) (bool, error) {
	out, err := g.run(ctx, dir, "", nil, "status", "--porcelain", "--untracked-files=no")
	return out != "", err
}

// untracked lists dir's untracked files that .gitignore does not hide.
func (g *Git) untracked(ctx context.Context, dir string) ([]string, error) {
	out, err := g.run(ctx, dir, "", nil, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(strings.TrimRight(out, "\x00"), "\x00"), nil
}

// newFiles lists the untracked files in wt that are not the user's.
func (g *Git) newFiles(ctx context.Context, wt Worktree) ([]string, error) {
	all, err := g.untracked(ctx, wt.Dir)
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
func (g *Git) Dirty(ctx context.Context, wt Worktree) (bool, error) {
	if mod, err := g.modified(ctx, wt.Dir); err != nil || mod {
		return mod, err
	}
	files, err := g.newFiles(ctx, wt)
	return len(files) > 0, err
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b.
func (g *Git) IsAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := g.run(ctx, dir, "", nil, "merge-base", "--is-ancestor", a, b)
	if err != nil && exitCode(err) == 1 {
		return false, nil
	}
	return err == nil, err
}

// Fetch brings the remote branch's commits into wt. prloop's clone also
// updates origin/<branch>, the branch's upstream.
func (g *Git) Fetch(ctx context.Context, wt Worktree) error {
	refspec := "refs/heads/" + wt.Branch
	if wt.Own {
		refspec = "+refs/heads/" + wt.Branch + ":refs/remotes/origin/" + wt.Branch
	}
	_, err := g.run(ctx, wt.Dir, wt.Remote, nil, "fetch", "--quiet", "--no-tags", "--", wt.Remote, refspec)
	return err
}

// Clone prepares prloop's own clone of the PR at dir: cloned when absent,
// fetched otherwise, and on a local branch named like the PR's head branch
// tracking origin/<branch>, so the agent's plain `git push` works. Unless
// keep is set, or the checkout holds work made from start, it is reset
// to start, clean.
func (g *Git) Clone(ctx context.Context, wt Worktree, start string, keep bool) error {
	if err := checkRemote(wt.Remote); err != nil {
		return err
	}
	if !shaRE.MatchString(start) {
		return fmt.Errorf("%w: head %q is not a commit id", ErrUnusable, start)
	}
	if err := g.checkBranch(ctx, wt.Branch); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(wt.Dir, ".git")); err != nil {
		if err := os.RemoveAll(wt.Dir); err != nil {
			return fmt.Errorf("clear %s: %w", wt.Dir, err)
		}
		if err := os.MkdirAll(filepath.Dir(wt.Dir), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(wt.Dir), err)
		}
		if _, err := g.run(ctx, filepath.Dir(wt.Dir), wt.Remote, nil, "clone", "--quiet", "--no-checkout", "--no-tags", "--", wt.Remote, wt.Dir); err != nil {
			return err
		}
		keep = false
	} else {
		// The agent can edit .git/config; put back what prloop relies on.
		if _, err := g.run(ctx, wt.Dir, "", nil, "remote", "set-url", "origin", wt.Remote); err != nil {
			return err
		}
	}
	if err := g.Fetch(ctx, wt); err != nil {
		return err
	}
	if keep {
		head, err := g.Head(ctx, wt.Dir)
		dirty, derr := g.Dirty(ctx, wt)
		if err == nil && derr == nil && (dirty || head != start) {
			if ok, _ := g.IsAncestor(ctx, wt.Dir, start, head); ok {
				return nil // the work of an interrupted attempt on this change request
			}
		}
	}
	return g.Reset(ctx, wt, start)
}

// Reset puts wt back at start with no local changes. In prloop's clone it
// also recreates the local branch there; in a user's worktree it only
// resets the checked-out branch and removes untracked files, keeping
// ignored ones (build caches, dependencies).
func (g *Git) Reset(ctx context.Context, wt Worktree, start string) error {
	if !wt.Own {
		if _, err := g.run(ctx, wt.Dir, "", nil, "reset", "--quiet", "--hard", start); err != nil {
			return err
		}
		files, err := g.newFiles(ctx, wt)
		for _, f := range files {
			if rerr := os.Remove(filepath.Join(wt.Dir, f)); rerr != nil && !os.IsNotExist(rerr) {
				err = errors.Join(err, fmt.Errorf("reset %s: %w", wt.Dir, rerr))
			}
		}
		return err
	}
	steps := [][]string{
		{"checkout", "--quiet", "--force", "-B", wt.Branch, start},
		{"branch", "--quiet", "--set-upstream-to=origin/" + wt.Branch, wt.Branch},
		{"clean", "-ffdxq"},
	}
	for _, args := range steps {
		if _, err := g.run(ctx, wt.Dir, "", nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// Adopt checks whether the user's worktree at wt.Dir can be used for the
// change request on start: it must be a checkout of wt.Branch, and either
// at start, behind it without modified files (then fast-forwarded), or,
// when resuming, holding work made from start. It returns why not
// otherwise, and records the untracked files present now as the user's.
func (g *Git) Adopt(ctx context.Context, wt *Worktree, start string, resuming bool) (string, error) {
	if st, err := os.Stat(wt.Dir); err != nil || !st.IsDir() {
		return "not a directory", nil
	}
	if err := checkRemote(wt.Remote); err != nil {
		return "", err
	}
	if !shaRE.MatchString(start) {
		return "", fmt.Errorf("%w: head %q is not a commit id", ErrUnusable, start)
	}
	branch, err := g.CurrentBranch(ctx, wt.Dir)
	if err != nil {
		return "not a git checkout", nil
	}
	if branch != wt.Branch {
		return fmt.Sprintf("on branch %q, not %q", branch, wt.Branch), nil
	}
	if err := g.Fetch(ctx, *wt); err != nil {
		return "", err
	}
	head, err := g.Head(ctx, wt.Dir)
	if err != nil {
		return "", err
	}
	dirty, err := g.modified(ctx, wt.Dir)
	if err != nil {
		return "", err
	}
	files, err := g.untracked(ctx, wt.Dir)
	if err != nil {
		return "", err
	}
	wt.Keep = map[string]bool{}
	for _, f := range files {
		wt.Keep[f] = true
	}
	if resuming && (dirty || head != start) {
		if ok, _ := g.IsAncestor(ctx, wt.Dir, start, head); ok {
			return "", nil
		}
	}
	if dirty {
		return "has uncommitted changes", nil
	}
	if head == start {
		return "", nil
	}
	if ok, _ := g.IsAncestor(ctx, wt.Dir, head, start); !ok {
		return "has commits the PR does not", nil
	}
	if _, err := g.run(ctx, wt.Dir, "", nil, "merge", "--quiet", "--ff-only", start); err != nil {
		return "", err
	}
	return "", nil
}

// CommitAll commits every change in wt as prloop: modified tracked files
// and new files, but not the user's own untracked files.
func (g *Git) CommitAll(ctx context.Context, wt Worktree, message string) error {
	if _, err := g.run(ctx, wt.Dir, "", nil, "add", "--update"); err != nil {
		return err
	}
	files, err := g.newFiles(ctx, wt)
	if err != nil {
		return err
	}
	for len(files) > 0 {
		n := min(len(files), 200)
		if _, err := g.run(ctx, wt.Dir, "", nil, append([]string{"add", "--"}, files[:n]...)...); err != nil {
			return err
		}
		files = files[n:]
	}
	id := []string{
		"GIT_AUTHOR_NAME=" + g.Name, "GIT_AUTHOR_EMAIL=" + g.Email,
		"GIT_COMMITTER_NAME=" + g.Name, "GIT_COMMITTER_EMAIL=" + g.Email,
	}
	_, err = g.run(ctx, wt.Dir, "", id, "commit", "--quiet", "--no-verify", "-m", message)
	return err
}

// Push pushes HEAD to the PR's branch. It is a plain push, so git refuses
// anything but a fast-forward: prloop never rewrites a PR's history.
func (g *Git) Push(ctx context.Context, wt Worktree) error {
	_, err := g.run(ctx, wt.Dir, wt.Remote, nil, "push", "--quiet", "--no-verify", "--", wt.Remote, "HEAD:refs/heads/"+wt.Branch)
	return err
}
