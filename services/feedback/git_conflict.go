// Git for conflict resolution: merge-tree in the mirror, the merge started
// in the worktree, and the facts checkResolution (plan_conflict.go) judges.

package feedback

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prloop/prloop/pkg/gitx"
)

// conflictGit is prloop's git as conflict resolution uses it, besides Git.
type conflictGit interface {
	SyncBase(ctx context.Context, wt Worktree, base string) (string, error)
	Conflicts(ctx context.Context, wt Worktree, head, base string) ([]string, error)
	StartMerge(ctx context.Context, wt Worktree, base string) error
	Messages(ctx context.Context, wt Worktree, from, to string, n int) ([]string, int, error)
	Resolution(ctx context.Context, wt Worktree, head, base, target string) (resolution, error)
	CommitAll(ctx context.Context, wt Worktree, message string) error
	Head(ctx context.Context, wt Worktree) (string, error)
}

// Conflicts lists the paths in which head and base conflict, from git
// merge-tree in the mirror (git 2.38 or newer): none when they merge
// cleanly.
func (g *realGit) Conflicts(ctx context.Context, wt Worktree, head, base string) ([]string, error) {
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", head, base)
	if err != nil && gitx.ExitCode(err) != 1 {
		return nil, err
	}
	if err == nil {
		return nil, nil // exit 0: a clean merge
	}
	// The tree, then each conflicted path (once per stage written).
	fields := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	var files []string
	for _, f := range fields[1:] {
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files, nil
}

// StartMerge merges base (a commit the mirror has) into the worktree's
// head without committing, leaving conflict markers: the worktree's git
// fetches it from the mirror (read-only there) and merges, in the
// sandbox, without credentials.
func (g *realGit) StartMerge(ctx context.Context, wt Worktree, base string) error {
	if !shaRE.MatchString(base) {
		return fmt.Errorf("%w: base %q is not a commit id", ErrUnusable, base)
	}
	if _, err := g.worktreeGit(ctx, wt, nil, "", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", wt.Mirror, wt.baseRef()); err != nil {
		return err
	}
	_, err := g.worktreeGit(ctx, wt, g.identity(), "", "merge", "--quiet", "--no-commit", "--no-ff", "--no-edit", base)
	if err != nil && gitx.ExitCode(err) != 1 {
		return err // exit 1 is the conflict the agent is to resolve
	}
	return nil
}

// Messages returns the cleaned messages of the commits of to that from
// lacks, newest first, at most n, and how many more there are.
func (g *realGit) Messages(ctx context.Context, wt Worktree, from, to string, n int) ([]string, int, error) {
	total, err := g.CountCommits(ctx, wt, from, to)
	if err != nil {
		return nil, 0, err
	}
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "log", "--format=%s%x00%b%x1e", fmt.Sprintf("--max-count=%d", n), from+".."+to)
	if err != nil {
		return nil, 0, err
	}
	var msgs []string
	for _, rec := range strings.Split(out, "\x1e") {
		subject, body, _ := strings.Cut(strings.TrimLeft(rec, "\n"), "\x00")
		if subject == "" && strings.TrimSpace(body) == "" {
			continue
		}
		msg := Truncate(SanitizeLine(subject), conflictMaxSubjectBytes)
		if body = strings.TrimSpace(Sanitize(body)); body != "" {
			msg += "\n\n" + Truncate(body, conflictMaxBodyBytes)
		}
		msgs = append(msgs, msg)
	}
	return msgs, max(0, total-len(msgs)), nil
}

// Resolution gathers, in the mirror, the facts checkResolution judges
// about target, the agent's resolution of head's conflict with base.
func (g *realGit) Resolution(ctx context.Context, wt Worktree, head, base, target string) (resolution, error) {
	r := resolution{Head: head, Base: base, Target: target}
	run := func(args ...string) (string, error) { return g.mirrorGit(ctx, wt.Mirror, "", args...) }
	lines := func(out string) []string { return strings.Fields(out) }
	paths := func(out string) []string {
		if out == "" {
			return nil
		}
		return strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	}
	out, err := run("rev-list", "--parents", "--max-count=1", target)
	if err != nil {
		return r, err
	}
	if f := lines(out); len(f) > 0 {
		r.Parents = f[1:]
	}
	if out, err = run("rev-list", target, "^"+head, "^"+base); err != nil {
		return r, err
	}
	r.New = lines(out)
	mb, err := g.MergeBase(ctx, wt, head, base)
	if err != nil {
		return r, err
	}
	diff := func(a, b string, pathspec ...string) ([]string, error) {
		out, err := run(append([]string{"diff", "--name-only", "--no-renames", "-z", a, b, "--"}, pathspec...)...)
		return paths(out), err
	}
	if r.Ours, err = diff(mb, head); err != nil {
		return r, err
	}
	if r.Theirs, err = diff(mb, base); err != nil {
		return r, err
	}
	if r.Changed, err = diff(mb, target); err != nil {
		return r, err
	}
	if r.Conflicted, err = g.Conflicts(ctx, wt, head, base); err != nil {
		return r, err
	}
	grep := func(re string) ([]string, error) {
		out, err := run("grep", "-I", "-l", "-z", "-E", "-e", re, target, "--")
		if err != nil && gitx.ExitCode(err) == 1 {
			return nil, nil // no match
		}
		var files []string
		for _, f := range paths(out) {
			files = append(files, strings.TrimPrefix(f, target+":"))
		}
		return files, err
	}
	if r.MarkerFiles, err = grep(markerRE); err != nil {
		return r, err
	}
	if r.SeparatorFiles, err = grep(separatorRE); err != nil {
		return r, err
	}
	fromHead, err := diff(head, target, ".github/workflows")
	if err != nil {
		return r, err
	}
	fromBase, err := diff(base, target, ".github/workflows")
	if err != nil {
		return r, err
	}
	for _, f := range fromHead {
		if slices.Contains(fromBase, f) {
			r.Workflows = append(r.Workflows, f)
		}
	}
	return r, nil
}

var _ conflictGit = (*realGit)(nil)

// markerRE finds conflict marker lines for git grep.
const (
	markerRE    = `^(<<<<<<<|>>>>>>>)( |$)`
	separatorRE = `^=======$`
)
