package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/prstatus"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the PRs as one JSON document (schema "+StatusSchema+", docs/operations.md)")
	watch := fs.Bool("watch", false, "redraw the table every second and on each new event, until Ctrl-C")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop status [-json] [-watch]\n\nShows every PR prloop knows, from its events in NATS ($PRLOOP_NATS_URL, default %s).\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	settings, err := loadCLISettings()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// Redraw (with -watch) on each new event; one pending redraw is enough.
	changed := make(chan struct{}, 1)
	follower, err := followBoard(ctx, conn.JS, stderr, func(ghref.PR) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return withCredsHint(err, conn)
	}
	render := func(w io.Writer) error {
		var rows []prstatus.Row
		follower.View(func(b *prstatus.Board) { rows = b.Rows(settings.lineOptions()) })
		now := time.Now()
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(statusJSON(rows, now))
		}
		return printStatus(w, rows, now)
	}
	if !*watch {
		return render(stdout)
	}
	return redraw(ctx, stdout, changed, render)
}

// redraw renders every second and whenever changed fires, until ctx ends:
// in place on a terminal (clear and home), as one table after another
// otherwise.
func redraw(ctx context.Context, stdout io.Writer, changed <-chan struct{}, render func(io.Writer) error) error {
	term := isTerminal(stdout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var buf bytes.Buffer
		if term {
			buf.WriteString("\x1b[H\x1b[2J")
		}
		if err := render(&buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !term {
			buf.WriteString("\n")
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-changed:
		}
	}
}

// printStatus renders the rows as a table: the board as every view shows
// it (prstatus.Row), so STATE and REASON are the page's and explain's.
func printStatus(w io.Writer, rows []prstatus.Row, now time.Time) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no PRs watched yet: 'prloop watch owner/repo#N', or set PRLOOP_REPOS")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PR\tSTATE\tHEAD\tFIX CYCLE\tLAST EVENT\tREASON")
	for _, r := range rows {
		last := "-"
		if r.Last != "" {
			last = fmt.Sprintf("%s (%s ago)", r.Last, r.Age(now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.PR, r.Line.State, orDash(ghref.ShortSHA(r.Head)), r.FixCycle, last, r.Line.Text)
	}
	return tw.Flush()
}

// cliSettings are the services' settings the operator commands name, read
// from the same PRLOOP_* variables with the services' defaults.
type cliSettings struct {
	MaxFixCycles int      `envconfig:"PRLOOP_MAX_FIX_CYCLES" default:"2" desc:"fixes prloop may push per PR; the next change request escalates max_fix_cycles"`
	Label        string   `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required" desc:"the label that hands a PR to a human (1 to 50 characters, no commas); while it is on, prloop runs no agent for the PR; removing it resumes the loop"`
	Reviewers    []string `envconfig:"PRLOOP_REVIEWERS" desc:"whose review signals count; empty: anyone with write, maintain or admin permission (never the author)"`
	// StatusContext names prloop's own commit status and check run, which
	// are not among the checks a PR waits for.
	StatusContext string `envconfig:"PRLOOP_STATUS_CONTEXT" default:"prloop" desc:"the context of prloop's commit status, or the name of its check run under GitHub App auth; the merger never counts either as a check"`
}

// Validate accepts any value: the services validate them.
func (cliSettings) Validate() error { return nil }

func loadCLISettings() (cliSettings, error) {
	var s cliSettings
	return s, config.Fill(&s)
}

func (s cliSettings) lineOptions() prstatus.Options {
	return prstatus.Options{MaxFixCycles: s.MaxFixCycles, Label: s.Label}
}

// followBoard follows the event stream into a board and returns once it
// has read the events the stream held; it keeps following until ctx ends,
// calling onApply after each new event.
func followBoard(ctx context.Context, js prstatus.Stream, stderr io.Writer, onApply func(ghref.PR)) (*prstatus.Follower, error) {
	f := prstatus.NewFollower(logging.New(stderr, "warn", "text"))
	f.OnApply = onApply
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, js) }()
	select {
	case <-f.CaughtUp():
		return f, nil
	case err := <-done:
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("read the event stream: %w (has prloop run against this NATS?)", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prFlag := fs.String("pr", "", "only events about this PR (owner/repo#N)")
	follow := fs.Bool("follow", true, "keep printing new events until Ctrl-C")
	since := fs.Duration("since", 0, "only the events of the last DURATION (e.g. 1h, 30m); 0 starts from the first recorded")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop events [-pr owner/repo#N] [-since DURATION] [-follow=false]\n\nPrints prloop's events, one readable line each, from the first recorded\n(or those of the last -since), then follows new ones ($PRLOOP_NATS_URL,\ndefault %s).\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *since < 0 {
		return fmt.Errorf("%w: -since %s is negative, want a duration such as 1h", errUsage, *since)
	}
	filter := events.SubjectPrefix + ".>"
	if *prFlag != "" {
		pr, err := ghref.ParsePR(*prFlag)
		if err != nil {
			return fmt.Errorf("%w: -pr: %v", errUsage, err)
		}
		filter = events.PRFilter(pr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	cc := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if *since > 0 {
		start := time.Now().Add(-*since)
		cc.DeliverPolicy, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := conn.JS.OrderedConsumer(ctx, events.StreamName, cc)
	if err != nil {
		return withCredsHint(fmt.Errorf("read events: %w (has prloop run against this NATS?)", err), conn)
	}
	color := isTerminal(stdout)
	for {
		// Without -follow, stop once the stream has nothing more to give.
		wait := time.Hour
		if !*follow {
			wait = 500 * time.Millisecond
		}
		fctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil || !*follow {
				return nil
			}
			continue
		}
		e, d, err := events.Decode(msg.Data())
		if err != nil {
			fmt.Fprintf(stdout, "(malformed message on %s: %v)\n", msg.Subject(), err)
			continue
		}
		fmt.Fprintln(stdout, eventLine(e.Time(), d, color))
	}
}
