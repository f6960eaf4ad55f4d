// Command chaos is prloop's chaos suite (issue 16): it runs the four
// services as two replicas each against a 3-node JetStream cluster and a
// flaky GitHub simulator, drives PR lifecycles with scripted reviewers and
// a scripted agent, injects faults (kill -9 of services, biased toward
// dangerous windows; a NATS node killed and restarted; leader step-downs;
// a skewed clock; a process paused past its lease), and then checks the
// invariants of RELIABILITY.md against the event stream, the simulator's
// record of every write and the git repositories. It exits 1 on any
// violation, with a report.
//
//	go run ./cmd/chaos -short            # CI: about 20 lifecycles
//	go run ./cmd/chaos -prs 200 -repos 6 # the figures
//	go run ./cmd/chaos bench-publish     # BENCHMARKS.md: publish-ack latency
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// faultKinds are the -faults names.
var faultKinds = []string{"kill", "github", "cluster", "skew", "stop"}

type options struct {
	prs, repos    int
	seed          int64
	faults        map[string]bool
	durationLimit time.Duration
	short         bool
	keep          bool
	githubRate    float64
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "nats-node" {
		if err := natsNodeMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "chaos nats-node:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bench-publish" {
		if err := benchPublish(context.Background(), 2000); err != nil {
			fmt.Fprintln(os.Stderr, "chaos bench-publish:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if rep != nil {
		rep.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if len(rep.violations) > 0 {
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	prs := fs.Int("prs", 60, "PR lifecycles to run")
	repos := fs.Int("repos", 4, "repositories the PRs are spread over")
	seed := fs.Int64("seed", 0, "seed of every random choice (0: from the clock; printed)")
	faults := fs.String("faults", strings.Join(faultKinds, ","), "faults to inject: any of "+strings.Join(faultKinds, ",")+", or none")
	limit := fs.Duration("duration-limit", 0, "bound for every PR to reach merged, escalated or closed (default 4m with -short, else 2m + 2s per PR)")
	short := fs.Bool("short", false, "CI mode: 20 lifecycles over 3 repositories, unless -prs and -repos say otherwise")
	keep := fs.Bool("keep", false, "keep the run's directory (logs, repositories, NATS stores); a failed run keeps it anyway")
	rate := fs.Float64("github-fault-rate", 0.1, "share of GitHub requests answered with a fault when github faults are on")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{prs: *prs, repos: *repos, seed: *seed, short: *short, keep: *keep, durationLimit: *limit, githubRate: *rate, faults: map[string]bool{}}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.short {
		if !set["prs"] {
			o.prs = 20
		}
		if !set["repos"] {
			o.repos = 3
		}
	}
	if o.durationLimit == 0 {
		o.durationLimit = 2*time.Minute + time.Duration(o.prs)*2*time.Second
		if o.short {
			o.durationLimit = 4 * time.Minute
		}
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000_007
	}
	if *faults != "none" {
		for _, f := range strings.Split(*faults, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(faultKinds, f) {
				return o, fmt.Errorf("-faults: unknown fault %q (want %s)", f, strings.Join(faultKinds, ","))
			}
			o.faults[f] = true
		}
	}
	if o.prs < 1 || o.repos < 1 {
		return o, errors.New("-prs and -repos must be at least 1")
	}
	return o, nil
}

// buildServices builds the four service binaries once into dir.
func buildServices(ctx context.Context, root, dir string) (map[string]string, error) {
	bins := map[string]string{}
	args := []string{"build", "-o", dir + "/"}
	for _, s := range services {
		args = append(args, "./services/"+s+"/cmd/"+s)
		bins[s] = filepath.Join(dir, s)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build services: %w\n%s", err, out)
	}
	return bins, nil
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
