package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/natsx"
)

// defaultNATSURL is where a local 'prloop run' serves its embedded NATS.
const defaultNATSURL = "nats://127.0.0.1:4222"

// defaultDataDir is config.Common's default PRLOOP_DATA_DIR.
const defaultDataDir = "./.prloop"

// natsURL is the server the operator commands talk to.
func natsURL() string {
	if u := os.Getenv("PRLOOP_NATS_URL"); u != "" {
		return u
	}
	return defaultNATSURL
}

// cliNATS returns the connection options of the operator commands and
// where they looked for the key. They authenticate with
// PRLOOP_NATS_CREDS_FILE, or else with the key a local 'prloop run' keeps
// in its data directory (PRLOOP_DATA_DIR, default ./.prloop) when it is
// there: without credentials NATS lets them only subscribe, which is
// enough for 'nats sub' but not for JetStream reads or a PRWatchRequested.
func cliNATS() (natsx.Options, cliKey) {
	k := cliKey{path: os.Getenv("PRLOOP_NATS_CREDS_FILE"), fromVar: true}
	if k.path == "" {
		dir := os.Getenv("PRLOOP_DATA_DIR")
		if dir == "" {
			dir = defaultDataDir
		}
		k = cliKey{looked: natsx.KeyFile(dir)}
		if abs, err := filepath.Abs(k.looked); err == nil {
			k.looked = abs
		}
		if _, err := os.Stat(k.looked); err == nil {
			k.path = k.looked
		}
	}
	return natsx.Options{URL: natsURL(), CredsFile: k.path, Name: "prloop-cli", Logger: logging.New(io.Discard, "error", "text")}, k
}

// cliKey is the NATS key an operator command uses, and where it came from.
type cliKey struct {
	path string // empty: none found
	// fromVar: path is PRLOOP_NATS_CREDS_FILE's; else it is the data
	// directory's key, looked for at looked.
	fromVar bool
	looked  string
}

// missing says that there is no key and where it was looked for.
func (k cliKey) missing() string {
	return fmt.Sprintf("no NATS key: PRLOOP_NATS_CREDS_FILE is not set and there is no %s (the key 'prloop run' keeps in PRLOOP_DATA_DIR, default %s)", k.looked, defaultDataDir)
}

// describe names the key and where it came from.
func (k cliKey) describe() string {
	if k.fromVar {
		return fmt.Sprintf("the NATS key %s (PRLOOP_NATS_CREDS_FILE)", k.path)
	}
	return fmt.Sprintf("the NATS key %s (found in PRLOOP_DATA_DIR, default %s)", k.path, defaultDataDir)
}

// credsHint says where the operator commands look for credentials, for
// errors that may come from their lack.
const credsHint = "commands that publish or read JetStream need prloop's NATS key: run them where 'prloop run' keeps its data (PRLOOP_DATA_DIR, default ./.prloop) or set PRLOOP_NATS_CREDS_FILE"

// withCredsHint adds credsHint to err when conn has no credentials, the
// likely cause of a refused publish or JetStream request.
func withCredsHint(err error, conn *natsx.Conn) error {
	if err == nil || conn.CredsFile != "" {
		return err
	}
	return fmt.Errorf("%w (connected without credentials: %s)", err, credsHint)
}

func emitTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop emit-test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prFlag := fs.String("pr", "prloop/example#1", "the PR the test event is about")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop emit-test [-pr owner/repo#N]\n\nPublishes one PRReviewPending CloudEvent to the prloop at $PRLOOP_NATS_URL\n(default %s), so that 'nats sub \"pr.>\"' shows it. It is not a PR:\nstatus, explain and the web page leave it out (the CLI does not publish\nPRReviewPending, pkg/events' table).\n\n", defaultNATSURL)
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
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	now := time.Now()
	e, err := events.New("cli", events.ReviewPending{Base: events.Base{PR: pr}, Status: events.StatusPending, Detail: "test event from prloop emit-test"}, now, "emit-test", now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return err
	}
	ack, err := events.Publish(ctx, conn.JS, e)
	if err != nil {
		return withCredsHint(err, conn)
	}
	fmt.Fprintf(stdout, "published %s %s on %s (stream %s, seq %d)\n", e.Type(), e.ID(), events.Subject(pr, events.TypeReviewPending), ack.Stream, ack.Sequence)
	return nil
}
