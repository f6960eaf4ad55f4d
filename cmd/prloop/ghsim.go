package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/logging"
)

func runGHSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop ghsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to serve the simulated GitHub API on (port 0 picks a free one)")
	dir := fs.String("dir", "", "directory for the simulator's git repositories (default: a temporary directory removed on exit)")
	seed := fs.Bool("seed", true, "create the demo repository demo/widgets with one PR and tokens for its users")
	maxPerPage := fs.Int("max-per-page", 100, "largest page of any list, whatever per_page a client asks for (GitHub's cap is 100; a small one makes lists cross page boundaries)")
	faultRate := fs.Float64("fault-rate", 0, "share of requests (0 to 1) answered with a random fault: 500, 502, 429 and 403 secondary limits with Retry-After, timeouts, truncated or non-JSON bodies, an empty pull request, failing permission lookups, writes whose answer is lost (0.1 is a flaky GitHub)")
	faultSeed := fs.Int64("fault-seed", 1, "seed of the random faults")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: prloop ghsim [-addr 127.0.0.1:PORT] [-dir DIR] [-seed=false] [-max-per-page N] [-fault-rate R]\n\nServes a GitHub simulator backed by real git repositories, for tests and\ndemos without a token or network. Point prloop at it with\nPRLOOP_GITHUB_API_URL=<the printed URL> and GITHUB_TOKEN=<a printed token>.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *faultRate < 0 || *faultRate > 1 {
		return fmt.Errorf("-fault-rate %v: want between 0 and 1", *faultRate)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	gitDir := *dir
	if gitDir == "" {
		d, err := os.MkdirTemp("", "prloop-ghsim-")
		if err != nil {
			return fmt.Errorf("create simulator directory: %w", err)
		}
		defer os.RemoveAll(d)
		gitDir = d
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another -addr)", *addr, err)
	}
	url := "http://" + ln.Addr().String()
	sim, err := ghsim.New(ghsim.Options{Dir: gitDir, RealClock: true, BaseURL: url, MaxPerPage: *maxPerPage, FaultRate: *faultRate, FaultSeed: *faultSeed, Logger: logging.New(stderr, "warn", "auto")})
	if err != nil {
		ln.Close()
		return err
	}
	defer sim.Close()
	fmt.Fprintf(stdout, "GitHub simulator listening on %s (repositories in %s)\n", url, gitDir)
	if *seed {
		d, err := ghsim.SeedDemo(sim)
		if err != nil {
			ln.Close()
			return err
		}
		fmt.Fprintf(stdout, "seeded %s with PR %s; tokens:\n", d.Repo, d.PR)
		logins := make([]string, 0, len(d.Tokens))
		for l := range d.Tokens {
			logins = append(logins, l)
		}
		sort.Strings(logins)
		for _, l := range logins {
			fmt.Fprintf(stdout, "  %-12s %s\n", l, d.Tokens[l])
		}
	}

	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve simulator: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop simulator: %w", err)
	}
	return nil
}
