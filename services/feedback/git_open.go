package feedback

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prloop/prloop/pkg/gitx"
)

// openGit is prloop's git as opening a pull request uses it: the same wall
// as a fix's (git.go). The branch's commits leave the agent's worktree
// only as a bundle the sandboxed git makes; the mirror takes them in
// (fsck on), checks them and pushes them, with the token only in that
// one git process's environment.
type openGit interface {
	SyncBase(ctx context.Context, wt Worktree, base string) (string, error)
	SyncBranch(ctx context.Context, wt Worktree) (string, error)
	ExportBranch(ctx context.Context, wt Worktree, base string) (string, error)
	CountCommits(ctx context.Context, wt Worktree, from, to string) (int, error)
	MergeBase(ctx context.Context, wt Worktree, a, b string) (string, error)
	IsAncestor(ctx context.Context, wt Worktree, a, b string) (bool, error)
	CommitMessage(ctx context.Context, wt Worktree, sha string) (subject, body string, err error)
	Inspect(ctx context.Context, wt Worktree, start, target string, maxCommits int, forbidWorkflows string) error
	Push(ctx context.Context, wt Worktree, target string) error
	DropRefs(ctx context.Context, wt Worktree) error
}

var _ openGit = (*realGit)(nil)

// SyncBase brings the base branch from GitHub into the mirror (baseRef)
// and returns its head there.
func (g *realGit) SyncBase(ctx context.Context, wt Worktree, base string) (string, error) {
	if err := g.checkBranch(ctx, base); err != nil {
		return "", err
	}
	if err := g.ensureMirror(ctx, wt); err != nil {
		return "", err
	}
	if _, err := g.mirrorGit(ctx, wt.Mirror, wt.Remote, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--", wt.Remote, "+refs/heads/"+base+":"+wt.baseRef()); err != nil {
		return "", err
	}
	return g.mirrorGit(ctx, wt.Mirror, "", "rev-parse", "--verify", wt.baseRef()+"^{commit}")
}

// SyncBranch returns the head of wt.Branch on GitHub, with its commits in
// the mirror (headRef), or "" when GitHub has no such branch yet.
func (g *realGit) SyncBranch(ctx context.Context, wt Worktree) (string, error) {
	if err := g.ensureMirror(ctx, wt); err != nil {
		return "", err
	}
	out, err := g.mirrorGit(ctx, wt.Mirror, wt.Remote, "ls-remote", "--heads", "--", wt.Remote, "refs/heads/"+wt.Branch)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(out) == "" {
		return "", nil
	}
	return g.Sync(ctx, wt)
}

// ExportBranch takes the commits of wt.Branch in the agent's worktree
// that base (a commit the mirror has) lacks into the mirror's resultRef,
// and returns the branch's head as the mirror knows it. The worktree's
// git runs in the sandbox without credentials: it fetches base from the
// mirror (read-only there), so that the bundle holds only what base
// lacks, and bundles the branch into wt.Out. Nothing is committed: what
// the worktree holds uncommitted is not part of the PR.
func (g *realGit) ExportBranch(ctx context.Context, wt Worktree, base string) (string, error) {
	if !shaRE.MatchString(base) {
		return "", fmt.Errorf("%w: base %q is not a commit id", ErrUnusable, base)
	}
	if err := g.checkBranch(ctx, wt.Branch); err != nil {
		return "", err
	}
	branch := "refs/heads/" + wt.Branch
	head, err := g.worktreeGit(ctx, wt, nil, "", "rev-parse", "--verify", "--quiet", branch+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("branch %s in worktree %s: %w", wt.Branch, wt.Dir, err)
	}
	if !shaRE.MatchString(head) {
		return "", fmt.Errorf("%w: the worktree's branch %s is at %q, not a commit id", ErrGit, wt.Branch, Truncate(head, 80))
	}
	if !g.HasCommit(ctx, wt, head) {
		if _, err := g.worktreeGit(ctx, wt, nil, "", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", wt.Mirror, wt.baseRef()); err != nil {
			return "", err
		}
		if err := os.MkdirAll(wt.Out, 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", wt.Out, err)
		}
		bundle := filepath.Join(wt.Out, "branch.bundle")
		defer os.Remove(bundle)
		if _, err := g.worktreeGit(ctx, wt, nil, wt.Out, "bundle", "create", "--quiet", bundle, branch, "^"+base); err != nil {
			return "", err
		}
		st, err := os.Lstat(bundle)
		if err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("%w: no bundle of the branch at %s", ErrGit, bundle)
		}
		if g.MaxBundleBytes > 0 && st.Size() > g.MaxBundleBytes {
			return "", fmt.Errorf("%w: %d bytes of new objects, over PRLOOP_AGENT_MAX_BYTES=%d", ErrTooBig, st.Size(), g.MaxBundleBytes)
		}
		if _, err := g.mirrorGit(ctx, wt.Mirror, "", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
			"--", bundle, "+"+branch+":"+wt.resultRef()); err != nil {
			return "", err
		}
	} else if _, err := g.mirrorGit(ctx, wt.Mirror, "", "update-ref", wt.resultRef(), head); err != nil {
		return "", err
	}
	return g.mirrorGit(ctx, wt.Mirror, "", "rev-parse", "--verify", wt.resultRef()+"^{commit}")
}

// CountCommits counts the commits of to that from lacks, in the mirror.
func (g *realGit) CountCommits(ctx context.Context, wt Worktree, from, to string) (int, error) {
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "rev-list", "--count", from+".."+to)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("%w: rev-list --count said %q", ErrGit, Truncate(out, 80))
	}
	return n, nil
}

// MergeBase returns the best common ancestor of a and b in the mirror.
func (g *realGit) MergeBase(ctx context.Context, wt Worktree, a, b string) (string, error) {
	return g.mirrorGit(ctx, wt.Mirror, "", "merge-base", a, b)
}

// CommitMessage returns the subject and body of the commit sha as the
// mirror holds it: what the agent wrote, to be cleaned before use.
func (g *realGit) CommitMessage(ctx context.Context, wt Worktree, sha string) (string, string, error) {
	if !shaRE.MatchString(sha) {
		return "", "", fmt.Errorf("%w: %q is not a commit id", ErrUnusable, sha)
	}
	out, err := g.runner().Run(ctx, gitx.Cmd{Args: []string{"show", "--no-patch", "--format=%s%x00%b", sha}, GitDir: wt.Mirror})
	if err != nil {
		return "", "", err
	}
	subject, body, _ := strings.Cut(out, "\x00")
	return subject, body, nil
}

// DropRefs removes the mirror's refs of this work (its objects stay, for
// the PR's attempts).
func (g *realGit) DropRefs(ctx context.Context, wt Worktree) error {
	refs, err := g.mirrorGit(ctx, wt.Mirror, "", "for-each-ref", "--format=%(refname)", wt.refs()+"/")
	if err != nil {
		return err
	}
	for _, ref := range strings.Fields(refs) {
		if _, err := g.mirrorGit(ctx, wt.Mirror, "", "update-ref", "-d", ref); err != nil {
			return err
		}
	}
	return nil
}
