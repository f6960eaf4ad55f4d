package merger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/gitx"
)

var (
	// errRebaseConflict says the head does not rebase cleanly onto its base.
	errRebaseConflict = errors.New("rebase conflict")
	// errStaleHead says the head moved while prloop was updating it: the
	// approval is stale, and the next look drops it.
	errStaleHead = errors.New("head moved during the branch update")
)

// update brings the PR's head (st.Head) up to date with its base and
// returns the new head, once GitHub shows it.
func (s *Service) update(ctx context.Context, st *stored, p *gh.PullRequest) (string, error) {
	from := st.Head
	if s.cfg.UpdateMethod == UpdateRebase {
		to, err := s.rebase(ctx, st, p)
		if err != nil {
			return "", err
		}
		return s.awaitHead(ctx, st, from, func(head string) error {
			if head != to {
				return fmt.Errorf("%w: to %s, not prloop's rebase %s", errStaleHead, ghref.ShortSHA(head), ghref.ShortSHA(to))
			}
			return nil
		})
	}
	if err := s.d.GitHub.UpdateBranch(ctx, st.PR, from); err != nil {
		return "", err
	}
	// GitHub merges asynchronously; the new head is prloop's if it is a
	// merge whose first parent is the head prloop asked to update.
	return s.awaitHead(ctx, st, from, func(head string) error {
		ok, err := s.madeFrom(ctx, st, p, head, from)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: to %s, which is not the merge of the base into %s prloop computes", errStaleHead, ghref.ShortSHA(head), ghref.ShortSHA(from))
		}
		return nil
	})
}

// awaitHead polls the PR until its head is no longer from, and returns the
// new head if accept takes it; it gives up after PRLOOP_UPDATE_TIMEOUT.
func (s *Service) awaitHead(ctx context.Context, st *stored, from string, accept func(string) error) (string, error) {
	deadline := s.d.Now().Add(s.cfg.UpdateTimeout)
	for {
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			return "", err
		}
		if head := p.GetHead().GetSHA(); head != from {
			if err := accept(head); err != nil {
				return "", err
			}
			return head, nil
		}
		if s.d.Now().After(deadline) {
			return "", fmt.Errorf("head of %s still %s %s after the branch update", st.PR, ghref.ShortSHA(from), s.cfg.UpdateTimeout)
		}
		if err := ctxtime.Sleep(ctx, min(s.cfg.PollInterval, time.Second)); err != nil {
			return "", err
		}
	}
}

// rebase rebases the head onto the base in a scratch repository and pushes
// it with --force-with-lease on the head prloop checked, so a push someone
// made meanwhile is never overwritten. The new head is written into the
// entry before the push, so that a replica resuming after a crash
// recognises it as prloop's.
func (s *Service) rebase(ctx context.Context, st *stored, p *gh.PullRequest) (string, error) {
	from := st.Head
	g, done, err := s.fetch(ctx, st, p)
	if err != nil {
		return "", fmt.Errorf("rebase: %w", err)
	}
	defer done()
	baseRef, headRef, headURL := p.GetBase().GetRef(), p.GetHead().GetRef(), p.GetHead().GetRepo().GetCloneURL()
	if got, err := g.run(ctx, "rev-parse", "refs/prloop/head"); err != nil {
		return "", fmt.Errorf("rebase %s: %w", st.PR, err)
	} else if got != from {
		return "", fmt.Errorf("rebase %s: %w: branch %s is at %s", st.PR, errStaleHead, headRef, ghref.ShortSHA(got))
	}
	if _, err := g.run(ctx, "checkout", "-q", "--detach", from); err != nil {
		return "", fmt.Errorf("rebase %s: %w", st.PR, err)
	}
	if _, err := g.run(ctx, "rebase", "-q", "refs/prloop/base"); err != nil {
		_, _ = g.run(context.WithoutCancel(ctx), "rebase", "--abort")
		return "", fmt.Errorf("rebase %s onto %s: %w: %v", st.PR, baseRef, errRebaseConflict, err)
	}
	to, err := g.run(ctx, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("rebase %s: %w", st.PR, err)
	}
	if st.Intent == nil {
		return "", fmt.Errorf("rebase %s: no update intent recorded", st.PR)
	}
	st.Intent.To = to
	if err := s.q.save(ctx, st); err != nil {
		return "", err
	}
	_, err = g.remote(ctx, headURL, "push", "-q", "--force-with-lease=refs/heads/"+headRef+":"+from, headURL, "HEAD:refs/heads/"+headRef)
	if err != nil {
		if strings.Contains(err.Error(), "stale info") || strings.Contains(err.Error(), "rejected") {
			return "", fmt.Errorf("push rebased %s: %w: %v", st.PR, errStaleHead, err)
		}
		return "", fmt.Errorf("push rebased %s: %w", st.PR, err)
	}
	return to, nil
}

// fetch fetches the PR's base and head branches into a scratch repository
// (as refs/prloop/base and refs/prloop/head) and returns git working in
// it, and a function that removes it.
func (s *Service) fetch(ctx context.Context, st *stored, p *gh.PullRequest) (gitRunner, func(), error) {
	baseURL, headURL := p.GetBase().GetRepo().GetCloneURL(), p.GetHead().GetRepo().GetCloneURL()
	baseRef, headRef := p.GetBase().GetRef(), p.GetHead().GetRef()
	if baseURL == "" || headURL == "" || baseRef == "" || headRef == "" {
		return nil, nil, fmt.Errorf("fetch %s: GitHub did not say where its branches live", st.PR)
	}
	dir, err := os.MkdirTemp("", "prloop-merger-")
	if err != nil {
		return nil, nil, fmt.Errorf("fetch %s: %w", st.PR, err)
	}
	done := func() { _ = os.RemoveAll(dir) }
	g := gitCmd{dir: dir, r: &gitx.Runner{Bin: s.d.GitBin, Env: gitEnv(dir), Token: s.d.GitToken}}
	if _, err := g.run(ctx, "init", "-q"); err != nil {
		done()
		return nil, nil, fmt.Errorf("fetch %s: %w", st.PR, err)
	}
	for _, f := range []struct{ url, ref, to string }{{baseURL, baseRef, "base"}, {headURL, headRef, "head"}} {
		if _, err := g.remote(ctx, f.url, "fetch", "-q", "--no-tags", f.url, "+refs/heads/"+f.ref+":refs/prloop/"+f.to); err != nil {
			done()
			return nil, nil, fmt.Errorf("fetch %s: %w", st.PR, err)
		}
	}
	return g, done, nil
}

// isMergeOf reports whether head (fetched as refs/prloop/head) is a merge
// of a base-branch commit into from exactly as prloop computes it: parents
// from and a commit of refs/prloop/base, and the tree git merge-tree
// writes for those two. A head that moved on again is not.
func isMergeOf(ctx context.Context, g gitRunner, head, from string) (bool, error) {
	got, err := g.run(ctx, "rev-parse", "refs/prloop/head")
	if err != nil || got != head {
		return false, err
	}
	line, err := g.run(ctx, "rev-list", "--parents", "-n", "1", head)
	if err != nil {
		return false, err
	}
	ps := strings.Fields(line)
	if len(ps) != 3 || ps[1] != from {
		return false, nil
	}
	onBase, err := g.ok(ctx, "merge-base", "--is-ancestor", ps[2], "refs/prloop/base")
	if err != nil || !onBase {
		return false, err
	}
	out, err := g.run(ctx, "merge-tree", "--write-tree", from, ps[2])
	if gitx.ExitCode(err) == 1 {
		return false, nil // the two conflict: no merge prloop would make
	}
	if err != nil {
		return false, err
	}
	want, _, _ := strings.Cut(out, "\n")
	tree, err := g.run(ctx, "rev-parse", head+"^{tree}")
	if err != nil {
		return false, err
	}
	return tree == strings.TrimSpace(want), nil
}

// gitEnv is the base environment of the merger's git in the scratch
// repository dir (gitx adds the hardening and, for a fetch or push, the
// credential): no user config, prloop as committer.
func gitEnv(dir string) []string {
	return []string{
		"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "LC_ALL=C",
		"GIT_COMMITTER_NAME=prloop", "GIT_COMMITTER_EMAIL=prloop@users.noreply.github.com",
		"GIT_AUTHOR_NAME=prloop", "GIT_AUTHOR_EMAIL=prloop@users.noreply.github.com",
	}
}

// gitRunner is the merger's git, in one scratch repository: candidates
// (merge-tree, commit-tree, their push) and branch updates (the rebase,
// the check of a merge commit GitHub made) all go through it, so a table
// test can record what git is asked and answer for it. gitCmd runs the
// real git (pkg/gitx: hardened, the token only for remote commands).
type gitRunner interface {
	// run runs a local git command and returns its trimmed stdout.
	run(ctx context.Context, args ...string) (string, error)
	// runEnv is run with more environment (a candidate's fixed dates).
	runEnv(ctx context.Context, env []string, args ...string) (string, error)
	// remote runs a git command that talks to remote, with the credential.
	remote(ctx context.Context, remote string, args ...string) (string, error)
	// ok runs git for its exit status: true on 0, false on 1.
	ok(ctx context.Context, args ...string) (bool, error)
}

var _ gitRunner = gitCmd{}

// gitCmd runs git in one scratch repository.
type gitCmd struct {
	dir string
	r   *gitx.Runner
}

// run runs a local git command and returns its trimmed stdout; the error
// carries stderr.
func (g gitCmd) run(ctx context.Context, args ...string) (string, error) {
	return g.r.Run(ctx, gitx.Cmd{Args: args, Dir: g.dir})
}

// runEnv runs a local git command with env added to its environment.
func (g gitCmd) runEnv(ctx context.Context, env []string, args ...string) (string, error) {
	return g.r.Run(ctx, gitx.Cmd{Args: args, Dir: g.dir, Env: env})
}

// remote runs a git command that talks to remote: only it gets the
// credential.
func (g gitCmd) remote(ctx context.Context, remote string, args ...string) (string, error) {
	return g.r.Run(ctx, gitx.Cmd{Args: args, Dir: g.dir, Remote: remote})
}

// ok runs git for its exit status: true on 0, false on 1, an error otherwise.
func (g gitCmd) ok(ctx context.Context, args ...string) (bool, error) {
	_, err := g.run(ctx, args...)
	if gitx.ExitCode(err) == 1 {
		return false, nil
	}
	return err == nil, err
}
