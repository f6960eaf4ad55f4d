// Command prloop is the all-in-one prloop binary: every service in one
// process with an embedded NATS server, and the operator's commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prloop/prloop/pkg/sandbox"
)

const usage = `prloop closes the loop after a coding agent opens a pull request: it waits
for review, hands change requests back to the agent, checks the fix was
pushed, merges what is approved and calls a human when the loop is stuck.

Usage:
  prloop demo         play the whole loop locally: no token, no network
  prloop run          run all four services in one process (embedded NATS
                      in $PRLOOP_DATA_DIR unless $PRLOOP_NATS_URL is set)
  prloop doctor       check what 'prloop run' needs: configuration, the token
                      and its scopes, each repository, NATS, the sandbox
  prloop open REPO    ask a running prloop to push a worktree's branch, open
                      its PR in owner/repo and watch it (-worktree PATH);
                      waits for the PR's URL or the refusal (-wait)
  prloop watch PR     ask a running prloop to watch owner/repo#N, once
                      GitHub says it is open
  prloop queue freeze REPO -reason TEXT | unfreeze REPO | list
                      freeze a base's merge queue (-base BRANCH, -until TIME),
                      lift it, or list the freezes and queues
  prloop status       a table of the PRs prloop knows (-json for JSON, -watch)
  prloop explain PR   why owner/repo#N is not merged yet, and what unblocks it
  prloop policy check [FILE]
                      check a .github/prloop.yml and print its effective policy
  prloop events       print the events, one line each, and follow (-pr owner/repo#N,
                      -since DURATION)
  prloop dlq          list the dead letters (list) or publish them again (replay [-id SEQ ...])
  prloop ghsim        serve a GitHub simulator (no token, no network)
  prloop emit-test    publish one test CloudEvent to a running prloop
  prloop nats-keys    make the NATS keys of a Compose or Kubernetes deployment
  prloop app create   register a GitHub App with what prloop needs (-org ORG),
                      by GitHub's manifest flow in your browser
  prloop version      print the version

Run 'prloop <command> -h' for a command's flags. Configuration comes from
PRLOOP_* environment variables; 'prloop run -h' lists them.
`

func main() {
	// First: in a re-exec as the agent sandbox's init this never returns.
	sandbox.Init()
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "prloop:", err)
		os.Exit(1)
	}
}

// errUsage marks an error caused by how prloop was called.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given; try 'prloop run'", errUsage)
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "run":
		return runAll(ctx, args[1:], stderr)
	case "doctor":
		return runDoctor(ctx, args[1:], stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "explain":
		return runExplain(ctx, args[1:], stdout, stderr)
	case "policy":
		return runPolicy(ctx, args[1:], stdout, stderr)
	case "events":
		return runEvents(ctx, args[1:], stdout, stderr)
	case "dlq":
		return runDLQ(ctx, args[1:], stdout, stderr)
	case "watch":
		return runWatch(ctx, args[1:], stdout, stderr)
	case "open":
		return runOpen(ctx, args[1:], stdout, stderr)
	case "queue":
		return runQueue(ctx, args[1:], stdout, stderr)
	case "ghsim":
		return runGHSim(ctx, args[1:], stdout, stderr)
	case "emit-test":
		return emitTest(ctx, args[1:], stdout, stderr)
	case "nats-keys":
		return runNATSKeys(args[1:], stdout, stderr)
	case "app":
		return runApp(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "prloop", versionString())
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
}
