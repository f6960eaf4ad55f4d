// Command bench measures the merger's throughput on one base branch, serial
// queue against speculative queue, side by side in one run, and prints one
// table (issue #19).
//
//	go run ./services/merger/bench -prs 40 -ci 10m -fail 0
//	go run ./services/merger/bench -prs 40 -ci 10m -fail 0.1
//	go run ./services/merger/bench -prs 12 -fail 0 -flaky 0.2
//
// Each contender gets a world of its own: the GitHub simulator (real git
// repositories, the REST API and git over HTTP) with one repository of
// -prs open PRs, each adding its own file, and an embedded NATS server.
// prloop's real merger binary (built from services/merger/cmd/merger) runs
// against it as its own process, configured only through PRLOOP_*
// variables: the contender's own (PRLOOP_QUEUE_MODE, PRLOOP_QUEUE_DEPTH)
// and the compressed timings.
//
// Every PR is approved within a minute, in random order: a native APPROVED
// review by alice on its head and the PRReviewApproved the poller would
// publish. A simulated CI (package simci) tests every commit pushed to a
// branch other than main after the PRs were opened (the heads update-branch
// makes, the queue's candidate branches prloop/queue/main/<n>): -ci later
// it sets the required status ci/test, failure when the commit's tree holds
// a BROKEN-<n> file, which each of the -fail share of PRs adds.
//
// With -flaky, the -flaky share of the other PRs each add a FLAKY-<n> file,
// and the CI reports ci/test as GitHub Actions does, as the check run of a
// job that can be re-run: the first attempt of a commit that adds a
// FLAKY-<n> file (that none of its parents has: the PR's own candidate,
// a squash on the one before it) fails, and a re-run of the failed job,
// which the merger asks of the simulator's REST API, passes -ci later.
// The table counts the PRs whose candidate was re-run and those of them
// merged.
//
// Time is compressed: every modelled duration (CI time, the approval
// window, the merger's poll interval and checks timeout) is divided by
// -compress, and the figures are scaled back. Processing (GitHub requests,
// git, NATS) is not compressed, so it weighs -compress times its real
// cost in modelled time; the table says how much.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prloop/prloop/pkg/benchrun"
)

// contender is one queue configuration of the merger: its name, the queue
// mode it asks for (PRLOOP_QUEUE_MODE) and any further PRLOOP_* variables.
type contender struct {
	name, mode string
	env        []string
}

// environ is the contender's part of the merger's environment.
func (c contender) environ() []string {
	return append([]string{"PRLOOP_QUEUE_MODE=" + c.mode}, c.env...)
}

// options are the benchmark's flags.
type options struct {
	prs  int
	ci   time.Duration
	fail float64
	// flaky is the share of PRs whose candidate fails once (-flaky).
	flaky    float64
	compress float64
	seed     uint64
	depth    int
	// warmup is how many PRs merge before the measured ones.
	warmup int
	// approveWithin is the modelled window in which every PR is approved.
	approveWithin time.Duration
	// poll and checksTimeout are the merger's modelled
	// PRLOOP_MERGE_POLL_INTERVAL and PRLOOP_CHECKS_TIMEOUT.
	poll, checksTimeout time.Duration
	// limit bounds each contender's run in real time.
	limit time.Duration
	modes []string
	// verbose passes the merger's debug log through.
	verbose bool
}

// contenders are the queue modes measured, in table order.
func (o options) contenders() []contender {
	all := []contender{
		{name: "serial", mode: "serial"},
		{name: "speculative", mode: "speculative", env: []string{fmt.Sprintf("PRLOOP_QUEUE_DEPTH=%d", o.depth)}},
	}
	var out []contender
	for _, c := range all {
		for _, m := range o.modes {
			if m == c.name {
				out = append(out, c)
			}
		}
	}
	return out
}

// real is a modelled duration as the run spends it.
func (o options) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.compress)
}

func main() {
	var o options
	var modes string
	flag.IntVar(&o.prs, "prs", 40, "PRs approved, on one repository and base main")
	flag.DurationVar(&o.ci, "ci", 10*time.Minute, "CI time T of one run, modelled")
	flag.Float64Var(&o.fail, "fail", 0, "share f of PRs that break CI (each adds a BROKEN-<n> file)")
	flag.Float64Var(&o.flaky, "flaky", 0, "share of PRs (besides the broken) whose candidate fails its first CI attempt and passes its re-run (each adds a FLAKY-<n> file); above 0 the CI reports a GitHub Actions job, which can be re-run, instead of a commit status")
	flag.Float64Var(&o.compress, "compress", 300, "time compression: every modelled duration runs this many times faster")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the broken PRs' choice and of the approval order and moments")
	flag.IntVar(&o.depth, "depth", 4, "PRLOOP_QUEUE_DEPTH of the speculative contender")
	flag.IntVar(&o.warmup, "warmup", 3, "PRs merged before the measured ones, in no figure: the merger measures its CI time on them, so that the measured PRs are queued with a known ETA (3 measurements make one)")
	flag.DurationVar(&o.approveWithin, "approve-within", time.Minute, "window in which every PR is approved, modelled")
	flag.DurationVar(&o.poll, "poll", 10*time.Second, "the merger's PRLOOP_MERGE_POLL_INTERVAL, modelled")
	flag.DurationVar(&o.checksTimeout, "checks-timeout", 30*time.Minute, "the merger's PRLOOP_CHECKS_TIMEOUT, modelled")
	flag.DurationVar(&o.limit, "limit", 200*time.Second, "longest real time one contender may take")
	flag.StringVar(&modes, "modes", "serial,speculative", "contenders, comma-separated: serial, speculative")
	flag.BoolVar(&o.verbose, "v", false, "pass the merger's log, at debug level, through to stderr")
	flag.Parse()
	o.modes = strings.Split(modes, ",")
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench builds the merger, runs the contenders and prints the table.
func bench(ctx context.Context, o options) error {
	root, err := benchrun.ScratchDir("prloop-merger-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "merger")
	if err := benchrun.Build(ctx, mergerPkg, bin); err != nil {
		return err
	}
	results, err := run(ctx, o, root, bin, os.Stdout)
	if err != nil {
		return err
	}
	printTable(os.Stdout, o, results)
	return nil
}

// mergerPkg is the merger's binary, relative to the repository root.
const mergerPkg = "./services/merger/cmd/merger"

// validate refuses flags that cannot make a run.
func (o options) validate() error {
	switch {
	case o.prs < 1:
		return fmt.Errorf("-prs %d: want at least 1", o.prs)
	case o.warmup < 0:
		return fmt.Errorf("-warmup %d: want 0 or more", o.warmup)
	case o.fail < 0 || o.fail >= 1:
		return fmt.Errorf("-fail %g: want a share from 0 up to below 1", o.fail)
	case o.flaky < 0 || o.fail+o.flaky >= 1:
		return fmt.Errorf("-flaky %g: want a share from 0 up to below 1 - fail (%g)", o.flaky, 1-o.fail)
	case o.compress < 1:
		return fmt.Errorf("-compress %g: want at least 1", o.compress)
	case o.ci <= 0 || o.poll <= 0 || o.checksTimeout <= 0 || o.limit <= 0:
		return fmt.Errorf("-ci, -poll, -checks-timeout and -limit: want positive durations")
	case len(o.contenders()) == 0:
		return fmt.Errorf("-modes %s: want serial, speculative or both", strings.Join(o.modes, ","))
	}
	return nil
}
