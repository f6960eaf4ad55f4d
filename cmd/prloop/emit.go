package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx"
)

// defaultNATSURL is where a local 'prloop run' serves its embedded NATS.
const defaultNATSURL = "nats://127.0.0.1:4222"

// natsURL is the server the operator commands talk to.
func natsURL() string {
	if u := os.Getenv("PRLOOP_NATS_URL"); u != "" {
		return u
	}
	return defaultNATSURL
}

func emitTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop emit-test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prFlag := fs.String("pr", "prloop/example#1", "the PR the test event is about")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop emit-test [-pr owner/repo#N]\n\nPublishes one PRReviewPending CloudEvent to the prloop at $PRLOOP_NATS_URL\n(default %s), so that 'nats sub \"pr.>\"' shows it.\n\n", defaultNATSURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	pr, err := ghref.ParsePR(*prFlag)
	if err != nil {
		return fmt.Errorf("%w: -pr: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := natsx.Connect(ctx, natsx.Options{URL: natsURL(), CredsFile: os.Getenv("PRLOOP_NATS_CREDS_FILE"), Name: "prloop-cli"})
	if err != nil {
		return fmt.Errorf("%w (start prloop with 'prloop run' first, or point PRLOOP_NATS_URL at its NATS)", err)
	}
	defer conn.Close(context.Background())

	now := time.Now()
	e, err := events.New("cli", events.ReviewPending{Base: events.Base{PR: pr}, Status: events.StatusPending, Detail: "test event from prloop emit-test"}, now, "emit-test", now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return err
	}
	ack, err := events.Publish(ctx, conn.JS, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %s %s on %s (stream %s, seq %d)\n", e.Type(), e.ID(), events.Subject(pr, events.TypeReviewPending), ack.Stream, ack.Sequence)
	return nil
}
