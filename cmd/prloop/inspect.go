package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/state"
)

// connectCLI connects an operator command to a running prloop's NATS.
func connectCLI(ctx context.Context) (*natsx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := natsx.Connect(ctx, cliNATS())
	if err != nil {
		return nil, fmt.Errorf("%w (is prloop running? start it with 'prloop run', or point PRLOOP_NATS_URL at its NATS)", err)
	}
	return conn, nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the state records as JSON")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop status [-json]\n\nShows every PR prloop knows, from its state in NATS ($PRLOOP_NATS_URL, default %s).\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	kv, err := conn.JS.KeyValue(ctx, state.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("no prloop state in this NATS (bucket %s is missing): has prloop run against it?", state.Bucket)
	}
	if err != nil {
		return withCredsHint(fmt.Errorf("open state bucket: %w", err), conn)
	}
	recs, err := state.NewStore(kv).List(ctx)
	if err != nil {
		return err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].PR.Key() < recs[j].PR.Key() })
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if recs == nil {
			recs = []state.PR{}
		}
		return enc.Encode(recs)
	}
	return printStatus(stdout, recs, time.Now())
}

// printStatus renders the state records as a table.
func printStatus(w io.Writer, recs []state.PR, now time.Time) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no PRs watched yet: 'prloop watch owner/repo#N', or set PRLOOP_REPOS")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PR\tSTATUS\tHEAD\tFIX CYCLE\tAGE\tLAST EVENT\tESCALATED")
	for _, r := range recs {
		status := string(r.Status)
		switch {
		case r.Merged:
			status = "merged"
		case r.Closed:
			status = "closed"
		case status == "":
			status = "-"
		}
		head := r.HeadSHA
		if len(head) > 7 {
			head = head[:7]
		}
		age := "-"
		if !r.WatchedSince.IsZero() {
			age = now.Sub(r.WatchedSince).Round(time.Second).String()
		}
		last := "-"
		if r.LastEventType != "" {
			last = fmt.Sprintf("%s (%s ago)", r.LastEventType, now.Sub(r.LastEventAt).Round(time.Second))
		}
		esc := "no"
		if r.Escalated() {
			var reasons []string
			for reason := range r.Escalations {
				reasons = append(reasons, string(reason))
			}
			sort.Strings(reasons)
			esc = "yes: " + strings.Join(reasons, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.PR, status, head, r.FixCycle, age, last, esc)
	}
	return tw.Flush()
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prFlag := fs.String("pr", "", "only events about this PR (owner/repo#N)")
	follow := fs.Bool("follow", true, "keep printing new events until Ctrl-C")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop events [-pr owner/repo#N] [-follow=false]\n\nPrints prloop's events, one readable line each, from the first recorded,\nthen follows new ones ($PRLOOP_NATS_URL, default %s).\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
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
	cons, err := conn.JS.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
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
