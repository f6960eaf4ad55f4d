package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/gitx"
)

const openUsage = `Usage: prloop open owner/repo -worktree PATH [-branch B] [-base BRANCH] [-title T] [-body-file F] [-draft] [-label L ...] [-context PATH] [-wait 60s]

Asks a running prloop (at $PRLOOP_NATS_URL, default %s) to push a branch
of a worktree and open its pull request, then watch it: it publishes a
PRCreateRequested event and waits (-wait) for the PR, printing its number
and URL, or for the refusal, printing the reason and exiting non-zero. The branch defaults to the worktree's current
branch, the base to the repository's default branch, the title and body to
the last commit's subject and body. prloop pushes from its own mirror; the
worktree needs no credentials.

`

// maxOpenLabels and maxOpenLabel bound -label (the feedback service
// refuses more).
const (
	maxOpenLabels = 20
	maxOpenLabel  = 50
)

// defaultOpenWait is how long prloop open waits for the PR or the refusal.
const defaultOpenWait = 60 * time.Second

func runOpen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d, wait, err := parseOpen(ctx, args, stderr)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connectCLI(pctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	e, dup, err := events.NewEmitter(conn.JS, events.PublisherCLI).Emit(pctx, d, d.Branch, ghref.EventSHA(d.HeadSHA))
	if err != nil {
		return withCredsHint(err, conn)
	}
	base := d.BaseBranch
	if base == "" {
		base = "the default branch"
	}
	what := fmt.Sprintf("%s %s at %s → %s", d.PR.RepoRef(), d.Branch, ghref.ShortSHA(d.HeadSHA), base)
	switch {
	case wait <= 0 && dup:
		fmt.Fprintf(stdout, "already requested: %s\n", what)
		return nil
	case wait <= 0:
		fmt.Fprintf(stdout, "open requested: %s (event %s); 'prloop events -pr %s#N' follows it once PRCreated names it\n",
			what, e.ID(), d.PR.RepoRef())
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out, err := awaitOpen(wctx, conn.JS, d, e.ID())
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("open %s: no PRCreated and no refusal within %s (is prloop's feedback service running?); the request stands: 'prloop events' and 'prloop dlq list' show what becomes of it", what, wait)
	case err != nil:
		return withCredsHint(fmt.Errorf("open %s: %w", what, err), conn)
	case out.refusal != "":
		return fmt.Errorf("prloop refused to open %s: %s", what, out.refusal)
	}
	c := out.created
	verb := "opened"
	if c.Existing {
		verb = "already open:"
	}
	fmt.Fprintf(stdout, "%s %s %s (%s into %s)\n", verb, c.PR, c.PR.URL, c.Branch, c.BaseBranch)
	return nil
}

// parseOpen parses and checks prloop open's arguments into the request,
// reading the branch and its head from the worktree's git.
func parseOpen(ctx context.Context, args []string, stderr io.Writer) (*events.CreateRequested, time.Duration, error) {
	d, wait, err := parseOpenArgs(ctx, args, stderr)
	if err == nil && *wait < 0 {
		err = fmt.Errorf("%w: -wait %s is negative; 0 returns at once", errUsage, *wait)
	}
	if err != nil {
		return nil, 0, err
	}
	return d, *wait, nil
}

// parseOpenArgs is parseOpen without the check of -wait.
func parseOpenArgs(ctx context.Context, args []string, stderr io.Writer) (*events.CreateRequested, *time.Duration, error) {
	fs := flag.NewFlagSet("prloop open", flag.ContinueOnError)
	fs.SetOutput(stderr)
	worktree := fs.String("worktree", "", "the local checkout holding the branch (required)")
	branch := fs.String("branch", "", "the branch to push and open (default: the worktree's current branch)")
	base := fs.String("base", "", "the branch to merge into (default: the repository's default branch)")
	title := fs.String("title", "", "the PR's title (default: the last commit's subject)")
	bodyFile := fs.String("body-file", "", "a file holding the PR's body (default: the last commit's body when there is no -title)")
	draft := fs.Bool("draft", false, "open the PR as a draft")
	contextPath := fs.String("context", "", "spec or plan material for the agent's prompt in later fixes (e.g. .specify/)")
	wait := fs.Duration("wait", defaultOpenWait, "how long to wait for the PR (its URL and number) or the refusal; 0 returns once the request is published")
	var labels []string
	fs.Func("label", "a label to add to the PR (repeatable)", func(s string) error {
		labels = append(labels, s)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(stderr, openUsage, defaultNATSURL)
		fs.PrintDefaults()
	}
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(positional) != 1 {
		fs.Usage()
		return nil, nil, fmt.Errorf("%w: prloop open takes one repository (owner/repo), got %d", errUsage, len(positional))
	}
	repo, err := ghref.ParseRepo(positional[0])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if *worktree == "" {
		return nil, nil, fmt.Errorf("%w: -worktree is required: the checkout holding the branch", errUsage)
	}
	for _, p := range []*string{worktree, contextPath} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
			}
			*p = abs
		}
	}
	if st, err := os.Stat(*worktree); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("%w: -worktree %s is not a directory", errUsage, *worktree)
	}

	g := worktreeReader{dir: *worktree}
	if _, err := g.run(ctx, "rev-parse", "--git-dir"); err != nil {
		return nil, nil, fmt.Errorf("%w: -worktree %s is not a git checkout", errUsage, *worktree)
	}
	if *branch == "" {
		b, err := g.run(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
		if err != nil || b == "" {
			return nil, nil, fmt.Errorf("%w: the worktree %s is on a detached HEAD: check out a branch or name one with -branch", errUsage, *worktree)
		}
		*branch = b
	}
	if err := g.checkBranch(ctx, "-branch", *branch); err != nil {
		return nil, nil, err
	}
	if *base != "" {
		if err := g.checkBranch(ctx, "-base", *base); err != nil {
			return nil, nil, err
		}
		if *base == *branch {
			return nil, nil, fmt.Errorf("%w: the branch %q is the base: a pull request needs a branch of its own", errUsage, *branch)
		}
	}
	head, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+*branch+"^{commit}")
	if err != nil || head == "" {
		return nil, nil, fmt.Errorf("%w: the worktree %s has no branch %q", errUsage, *worktree, *branch)
	}

	d := &events.CreateRequested{
		Base:     events.Base{PR: repo.PR(events.CreateRequestedNumber), HeadSHA: head, Title: events.CleanTitle(*title)},
		Worktree: *worktree, Branch: *branch, BaseBranch: *base, Draft: *draft, ContextPath: *contextPath, Actor: "cli",
	}
	if *title != "" && d.Title == "" {
		return nil, nil, fmt.Errorf("%w: -title has no visible characters", errUsage)
	}
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: -body-file: %v", errUsage, err)
		}
		if len(b) > events.MaxBody {
			return nil, nil, fmt.Errorf("%w: -body-file %s has %d bytes, at most %d", errUsage, *bodyFile, len(b), events.MaxBody)
		}
		d.Body = strings.ToValidUTF8(string(b), "")
	}
	if len(labels) > maxOpenLabels {
		return nil, nil, fmt.Errorf("%w: %d labels, at most %d", errUsage, len(labels), maxOpenLabels)
	}
	for _, l := range labels {
		if l == "" || len([]rune(l)) > maxOpenLabel || events.CleanTitle(l) != l {
			return nil, nil, fmt.Errorf("%w: -label %q: want 1 to %d visible characters on one line", errUsage, l, maxOpenLabel)
		}
	}
	d.Labels = labels
	return d, wait, nil
}

// worktreeReader reads a worktree with prloop's hardened git (pkg/gitx):
// system and global configuration ignored, hooks and fsmonitor off, no
// credentials, and only local commands, so that a worktree's config (the
// coding agent's to write) cannot make the operator's git run anything.
type worktreeReader struct{ dir string }

func (w worktreeReader) run(ctx context.Context, args ...string) (string, error) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv) // GIT_DIR and friends would point elsewhere
		}
	}
	r := &gitx.Runner{Env: env}
	return r.Run(ctx, gitx.Cmd{Args: args, Dir: w.dir})
}

// checkBranch refuses a branch name git would take for an option or
// reject as a branch.
func (w worktreeReader) checkBranch(ctx context.Context, flagName, b string) error {
	if b == "" || strings.HasPrefix(b, "-") {
		return fmt.Errorf("%w: %s %q is not a branch name", errUsage, flagName, b)
	}
	if _, err := w.run(ctx, "check-ref-format", "refs/heads/"+b); err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) {
			return fmt.Errorf("%w: %s %q is not a valid branch name", errUsage, flagName, b)
		}
		return err
	}
	return nil
}
