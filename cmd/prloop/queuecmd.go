package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// prloop queue: the merge queues' freezes (docs/queue.md). The CLI only
// asks (PRQueueFreezeRequested) and reads the stream; the merger records
// the freeze and says so (PRQueueFrozen, PRQueueUnfrozen).

const queueUsage = `Usage:
  prloop queue freeze owner/repo [-base BRANCH] -reason TEXT [-until TIME]
  prloop queue unfreeze owner/repo [-base BRANCH]
  prloop queue list

freeze asks the merger to merge nothing on BRANCH (without -base: on every
base of the repository) until unfreeze, or until TIME (RFC 3339, such as
2026-11-28T18:00:00Z, or a duration from now, such as 2h). Approvals
still queue and CI still runs; every queued PR's status says "queue
frozen: TEXT". list shows the freezes and the queues, in merge order.
`

func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, queueUsage)
		return fmt.Errorf("%w: prloop queue takes freeze, unfreeze or list", errUsage)
	}
	switch args[0] {
	case "freeze", "unfreeze":
		return runFreeze(ctx, args[0] == "unfreeze", args[1:], stdout, stderr)
	case "list":
		return runQueueList(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, queueUsage)
		return nil
	}
	fmt.Fprint(stderr, queueUsage)
	return fmt.Errorf("%w: unknown queue command %q", errUsage, args[0])
}

// parseUntil reads -until: an RFC 3339 time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%w: -until %s: want a time in the future", errUsage, s)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: -until %q: want an RFC 3339 time (2026-11-28T18:00:00Z) or a duration (2h)", errUsage, s)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("%w: -until %s is not in the future", errUsage, s)
	}
	return t.UTC(), nil
}

func runFreeze(ctx context.Context, unfreeze bool, args []string, stdout, stderr io.Writer) error {
	name := "prloop queue freeze"
	if unfreeze {
		name = "prloop queue unfreeze"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("base", "", "the base branch whose queue to freeze; empty: every base of the repository")
	var reason, until *string
	if !unfreeze {
		reason = fs.String("reason", "", "why (required): every queued PR's status says \"queue frozen: REASON\"")
		until = fs.String("until", "", "unfreeze by itself at this time (RFC 3339) or after this duration (2h)")
	}
	wait := fs.Duration("wait", 10*time.Second, "wait this long for the merger's answer; 0 does not wait")
	fs.Usage = func() {
		fmt.Fprint(stderr, queueUsage+"\n")
		fs.PrintDefaults()
	}
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fs.Usage()
		return fmt.Errorf("%w: %s takes one repository (owner/repo), got %d", errUsage, name, len(positional))
	}
	repo, err := ghref.ParseRepo(positional[0])
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	now := time.Now()
	d := &events.QueueFreezeRequested{Base: events.Base{PR: repo.PR(events.RepoNumber)}, BaseBranch: strings.TrimSpace(*base), Unfreeze: unfreeze, Actor: "cli"}
	if !unfreeze {
		d.Reason = events.CleanTitle(*reason)
		if d.Reason == "" {
			return fmt.Errorf("%w: %s needs -reason TEXT: it is what every queued PR's status shows", errUsage, name)
		}
		if d.Until, err = parseUntil(*until, now); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+*wait)
	defer cancel()
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	what := "the merge queue of " + repo.String() + " on " + baseName(d.BaseBranch)
	if _, _, err := events.NewEmitter(conn.JS, events.PublisherCLI).Emit(ctx, d,
		events.BaseToken(d.BaseBranch), strings.TrimPrefix(name, "prloop queue "), now.UTC().Format(time.RFC3339Nano)); err != nil {
		return withCredsHint(err, conn)
	}
	if *wait <= 0 {
		fmt.Fprintf(stdout, "asked the merger to %s %s\n", strings.TrimPrefix(name, "prloop queue "), what)
		return nil
	}
	// The merger's answer is the freeze on the board, or its absence.
	done := func(b *prstatus.Board) bool {
		f, ok := b.Frozen(repo, d.BaseBranch)
		if unfreeze {
			return !ok || f.Base != d.BaseBranch
		}
		return ok && f.Base == d.BaseBranch && f.Reason == d.Reason
	}
	answered := make(chan struct{}, 1)
	follower, err := followBoard(ctx, conn.JS, stderr, func(ghref.PR) {
		select {
		case answered <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return withCredsHint(err, conn)
	}
	timeout := time.After(*wait)
	for {
		var ok bool
		follower.View(func(b *prstatus.Board) { ok = done(b) })
		if ok {
			if unfreeze {
				fmt.Fprintf(stdout, "unfrozen: %s\n", what)
			} else {
				fmt.Fprintf(stdout, "frozen: %s (%s)\n", what, d.Reason)
			}
			return nil
		}
		select {
		case <-answered:
		case <-time.After(100 * time.Millisecond):
		case <-timeout:
			return fmt.Errorf("asked to %s %s, and the merger did not answer within %s: is it running?", strings.TrimPrefix(name, "prloop queue "), what, *wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func baseName(base string) string {
	if base == events.AllBases {
		return "every base"
	}
	return base
}

func runQueueList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop queue list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, queueUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: prloop queue list takes no arguments", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	follower, err := followBoard(ctx, conn.JS, stderr, nil)
	if err != nil {
		return withCredsHint(err, conn)
	}
	var err2 error
	follower.View(func(b *prstatus.Board) { err2 = printQueues(stdout, b) })
	return err2
}

// printQueues writes the board's freezes, then each queue in merge order.
func printQueues(w io.Writer, b *prstatus.Board) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	freezes := b.Freezes()
	if len(freezes) == 0 {
		fmt.Fprintln(tw, "no queue is frozen")
	} else {
		fmt.Fprintln(tw, "FROZEN\tBASE\tREASON\tUNTIL\tBY")
		for _, f := range freezes {
			until := "unfrozen"
			if !f.Until.IsZero() {
				until = f.Until.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Repo, baseName(f.Base), f.Reason, until, f.Actor)
		}
	}
	queues := b.Queues()
	if len(queues) == 0 {
		fmt.Fprintln(tw, "\nno PR is queued")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "\nQUEUE\tPOS\tPR\tSTATUS")
	for _, q := range queues {
		for i, p := range b.Queue(q.Repo, q.Base) {
			fmt.Fprintf(tw, "%s %s\t%d\t%s\t%s\n", q.Repo, q.Base, i+1, p.PR, b.Line(p.PR, prstatus.Options{}).Text)
		}
	}
	return tw.Flush()
}
