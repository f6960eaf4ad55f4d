package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	worktree := fs.String("worktree", "", "a local checkout of the PR branch the agent may work in")
	contextPath := fs.String("context", "", "spec or plan material for the agent's prompt (e.g. .specify/)")
	check := fs.Bool("check", true, "first ask GitHub that the PR exists and is open (needs GITHUB_TOKEN, GH_TOKEN or 'gh auth login'); -check=false publishes without asking")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop watch owner/repo#N [-worktree PATH] [-context PATH] [-check=false]\n\nAsks a running prloop (at $PRLOOP_NATS_URL, default %s) to watch a pull\nrequest: it checks with GitHub that the PR exists and is open, then\npublishes a PRWatchRequested event. Accepts owner/repo#N or a PR URL.\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	pr, err := parsePRArg(fs, args)
	if err != nil {
		return err
	}
	for _, p := range []*string{worktree, contextPath} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			*p = abs
		}
	}
	if *worktree != "" {
		if st, err := os.Stat(*worktree); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: -worktree %s is not a directory", errUsage, *worktree)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if *check {
		if err := checkWatchable(ctx, pr); err != nil {
			return err
		}
	}
	d := &events.WatchRequested{Base: events.Base{PR: pr}, Worktree: *worktree, ContextPath: *contextPath, Actor: "cli"}
	e, dup, err := events.NewEmitter(conn.JS, events.PublisherCLI).Emit(ctx, d, time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		return withCredsHint(err, conn)
	}
	if dup {
		fmt.Fprintf(stdout, "already requested: watching %s\n", pr)
		return nil
	}
	fmt.Fprintf(stdout, "watching %s (event %s)\n", pr, e.ID())
	return nil
}

// checkWatchable asks GitHub whether pr exists and is open: a watch of a
// PR that is not would show it waiting for review for ever.
func checkWatchable(ctx context.Context, pr ghref.PR) error {
	c, err := cliGitHub(ctx)
	if err != nil {
		return fmt.Errorf("cannot check %s with GitHub: %w; or skip the check with -check=false", pr, err)
	}
	p, err := c.GetPull(ctx, pr)
	switch {
	case errors.Is(err, github.ErrNotFound):
		return fmt.Errorf("%s: no such pull request on GitHub, or the token cannot see it: %w", pr, err)
	case err != nil:
		return fmt.Errorf("check %s with GitHub: %w", pr, err)
	case p.GetMerged():
		return fmt.Errorf("%s is merged: prloop watches open pull requests", pr)
	case p.GetState() != "open":
		return fmt.Errorf("%s is %s: prloop watches open pull requests; reopen it first", pr, p.GetState())
	}
	return nil
}

// parsePRArg parses a command's flags, before or after its one PR argument
// (owner/repo#N or a URL), and the PR.
func parsePRArg(fs *flag.FlagSet, args []string) (ghref.PR, error) {
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return ghref.PR{}, err
	}
	if len(positional) != 1 {
		fs.Usage()
		return ghref.PR{}, fmt.Errorf("%w: %s takes one PR (owner/repo#N or a URL), got %d", errUsage, fs.Name(), len(positional))
	}
	pr, err := ghref.ParsePR(positional[0])
	if err != nil {
		return ghref.PR{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	return pr, nil
}

// parseInterspersed parses a command's flags wherever they stand among its
// positional arguments, and returns those.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			positional = append(positional, args[0])
			args = args[1:]
		}
	}
	return positional, nil
}
