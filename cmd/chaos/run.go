package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/benchrun"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/state"
)

var services = []string{"poller", "feedback", "merger", "escalator"}

// Logins in the simulated world.
const (
	owner    = "chaos"
	botLogin = "prloop-bot"
	reviewer = "alice"   // write access: her 👍 approves
	outsider = "mallory" // read access: her 👍 must never merge anything
	author   = "agent"   // opens the PRs
	human    = "dev"     // pushes to main, closes PRs by hand
	label    = "human-review-required"
)

// Lease TTLs of the services in the run: short, so that a paused process
// outlives its lease within a short run.
const leaseTTL = 6 * time.Second

// world is everything a run shares.
type world struct {
	o      options
	rng    *lockedRand
	dir    string
	token  string
	sim    *ghsim.Sim
	simURL string
	hooks  *hooks
	rec    *recorder
	nc     *nats.Conn
	js     jetstream.JetStream
	cl     *cluster
	procs  []*proc // service replicas
	rep    *report
	start  time.Time
}

// lockedRand is a seeded RNG safe for the workload's goroutines. The
// schedule still depends on timing, so a seed reproduces the choices, not
// the interleaving.
type lockedRand struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func (l *lockedRand) intn(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) float() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// between returns a duration in [lo, hi).
func (l *lockedRand) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(l.float()*float64(hi-lo))
}

func run(ctx context.Context, o options) (_ *report, err error) {
	rep := newReport(o)
	fmt.Printf("chaos: seed %d, %d PRs over %d repositories, faults %s\n", o.seed, o.prs, o.repos, rep.faultList())
	root, err := benchrun.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "prloop-chaos-")
	if err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	if o.keep {
		fmt.Println("chaos: run directory", dir)
	}
	// A failed run keeps its directory whatever -keep says: its logs and
	// records are the only way to find out why, and a rerun with the same
	// seed does not replay the same interleaving. This defer runs last, after
	// every process has stopped.
	defer func() {
		if o.keep {
			return
		}
		if err != nil || rep.violationCount() > 0 {
			fmt.Println("chaos: the run failed; its directory is kept for diagnosis:", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	for _, d := range []string{"bin", "logs", "nats", "github", "records", "agent", "work", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the suite's binary: %w", err)
	}
	step("building the services")
	bins, err := buildServices(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		return nil, err
	}
	w := &world{o: o, dir: dir, rep: rep, rng: &lockedRand{r: mrand.New(mrand.NewPCG(uint64(o.seed), 1))}}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	w.token = "ghp_chaos" + hex.EncodeToString(tok[:])

	step("starting the 3-node JetStream cluster")
	cl, err := startCluster(self, filepath.Join(dir, "nats"), filepath.Join(dir, "logs"))
	if err != nil {
		return nil, err
	}
	w.cl = cl
	defer stopAll(cl.nodes)
	nc, err := nats.Connect(cl.url(), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.RetryOnFailedConnect(true), nats.Name("chaos"))
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer nc.Close()
	if err := waitJetStream(ctx, nc); err != nil {
		return nil, err
	}
	w.nc = nc
	w.js, err = jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	// The suite creates the streams and the state bucket with 3 replicas
	// before any service, as an operator would; services only ensure what
	// exists. Right after the meta leader is elected the other peers may
	// not be known yet, and an R3 stream has too few: retry a while.
	for i := 0; ; i++ {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = events.EnsureStreams(sctx, w.js, events.StreamOptions{Replicas: 3})
		if err == nil {
			_, err = state.Ensure(sctx, w.js, 3)
		}
		cancel()
		if err == nil {
			break
		}
		if i == 30 {
			return nil, fmt.Errorf("create streams: %w", err)
		}
		sleep(ctx, time.Second)
	}

	step("starting the simulator")
	if err := w.startSim(); err != nil {
		return nil, err
	}
	defer w.sim.Close()
	w.rec, err = startRecorder(ctx, w.js)
	if err != nil {
		return nil, err
	}
	defer w.rec.stop()
	probe, err := startProbe(ctx, w.js)
	if err != nil {
		return nil, err
	}
	if err := w.writeAgent(); err != nil {
		return nil, err
	}
	step("starting two replicas of each service")
	w.startServices(bins)
	defer stopAll(w.procs)
	if err := w.waitReady(ctx, 90*time.Second); err != nil {
		return rep, err
	}

	step("running the workload")
	w.start = time.Now()
	scan := startCmdlineScan(w.token)
	fctx, stopFaults := context.WithCancel(ctx)
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() { defer fwg.Done(); w.injectFaults(fctx) }()
	lifecycles := w.runWorkload(ctx)
	stopFaults()
	fwg.Wait()
	rep.wall = time.Since(w.start)
	// Every process runs again, unpaused, before the checks read the end state.
	for _, p := range append(append([]*proc(nil), cl.nodes...), w.procs...) {
		p.pause(false)
		if p.pid() == 0 {
			_ = p.start()
		}
	}
	probe.stop()
	scan.stop()
	step("checking the invariants")
	w.check(ctx, lifecycles, probe, scan)
	return rep, nil
}

// startSim serves the simulator on loopback, in this process: it is the one
// part no fault kills, and in this process the checks read its record of
// every write and its repositories directly. The handler is wrapped by the
// hooks that tell the fault injector about dangerous windows.
func (w *world) startSim() error {
	rate := 0.0
	if w.o.faults["github"] {
		rate = w.o.githubRate
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the simulator: %w", err)
	}
	w.simURL = "http://" + ln.Addr().String()
	// The run compresses what a team's PRs do over days into minutes, all
	// on one token: GitHub's primary limit (5,000 requests an hour) is
	// scaled with the PRs, as 20 PRs use it up in a short run. The limit
	// itself is a fault of its own, not one this suite injects.
	limit := 5000 * max(1, w.o.prs/20)
	sim, err := ghsim.New(ghsim.Options{
		Dir: filepath.Join(w.dir, "github"), RealClock: true, BaseURL: w.simURL, FaultRate: rate, FaultSeed: w.o.seed,
		PrimaryLimit: limit,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		ln.Close()
		return err
	}
	w.sim = sim
	w.hooks = newHooks()
	sim.AddToken(w.token, botLogin)
	if err := w.setupRepos(); err != nil {
		ln.Close()
		return fmt.Errorf("set up repositories: %w", err)
	}
	srv := &http.Server{Handler: w.hooks.wrap(sim), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}

//go:embed agent.sh
var agentScript string

func (w *world) writeAgent() error {
	return os.WriteFile(filepath.Join(w.dir, "agent", "agent.sh"), []byte(agentScript), 0o755)
}

func (w *world) repoNames() []string {
	var out []string
	for i := 0; i < w.o.repos; i++ {
		out = append(out, fmt.Sprintf("%s/r%d", owner, i))
	}
	return out
}

// startServices starts two replicas of each service. The second poller's
// clock is skewed (PRLOOP_TEST_CLOCK_SKEW) when skew faults are on.
func (w *world) startServices(bins map[string]string) {
	agentDir, records := filepath.Join(w.dir, "agent"), filepath.Join(w.dir, "records")
	for _, s := range services {
		for i := 0; i < 2; i++ {
			name := fmt.Sprintf("%s-%d", s, i)
			env := []string{
				"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(w.dir, "data", name), "TMPDIR=" + os.TempDir(),
				"PRLOOP_NATS_URL=" + w.cl.url(), "PRLOOP_STREAM_REPLICAS=3",
				"PRLOOP_GITHUB_API_URL=" + w.simURL, "GITHUB_TOKEN=" + w.token, "PRLOOP_GITHUB_LOGIN=" + botLogin,
				"PRLOOP_GITHUB_REQUEST_TIMEOUT=5s", "PRLOOP_GITHUB_MAX_RATE_LIMIT_WAIT=1m",
				"PRLOOP_REPOS=" + strings.Join(w.repoNames(), ","), "PRLOOP_POLL_INTERVAL=1s",
				"PRLOOP_REVIEW_TIMEOUT=" + w.o.reviewTimeout().String(), "PRLOOP_MAX_FIX_CYCLES=2",
				"PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_LOG_FORMAT=json", "PRLOOP_SHUTDOWN_GRACE=3s",
				"PRLOOP_DATA_DIR=" + filepath.Join(w.dir, "data", name),
				"PRLOOP_AGENT_CMD=RECORD_DIR=" + records + " sh " + filepath.Join(agentDir, "agent.sh"),
				"PRLOOP_AGENT_READONLY_PATHS=" + agentDir, "PRLOOP_AGENT_WRITABLE_PATHS=" + records,
				"PRLOOP_WORKSPACE_DIR=" + filepath.Join(w.dir, "work", name),
				"PRLOOP_AGENT_BACKOFF=1s", "PRLOOP_AGENT_KILL_GRACE=1s", "PRLOOP_AGENT_TIMEOUT=1m",
				"PRLOOP_FEEDBACK_RETRY_BACKOFF=1s,2s,5s,10s,20s", "PRLOOP_FEEDBACK_ACK_WAIT=15s",
				"PRLOOP_FEEDBACK_LEASE_TTL=" + leaseTTL.String(), "PRLOOP_MERGE_LOCK_TTL=" + leaseTTL.String(),
				"PRLOOP_ESCALATION_CLAIM_TTL=" + leaseTTL.String(), "PRLOOP_ESCALATION_RETRY_BACKOFF=1s,2s,5s,10s,20s",
				"PRLOOP_MERGE_POLL_INTERVAL=1s", "PRLOOP_REQUIRED_CHECKS=" + ciContext,
				"PRLOOP_ESCALATION_WEBHOOK_URL=" + w.simURL + hookPath,
				"PRLOOP_ESCALATION_WEBHOOK_BACKOFF=500ms",
			}
			if s == "poller" && i == 1 && w.o.faults["skew"] {
				env = append(env, "PRLOOP_TEST_CLOCK_SKEW="+clockSkew.String())
			}
			p := &proc{name: name, kind: s, bin: bins[s], env: env, logs: filepath.Join(w.dir, "logs")}
			if err := p.start(); err != nil {
				w.rep.violate("setup", "", err.Error())
			}
			w.procs = append(w.procs, p)
		}
	}
}

// clockSkew is how far the skewed replica's clock runs ahead.
const clockSkew = 7 * time.Second

func (w *world) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, p := range w.procs {
		for !strings.Contains(p.logText(), `"msg":"ready"`) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never got ready:\n%s", p.name, tail(p.logText(), 2000))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stopAll stops the processes at once, each with SIGTERM and its grace.
func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.term(10 * time.Second) }()
	}
	wg.Wait()
}

var begun = time.Now()

// step prints where the run is, for a reader of CI's log.
func step(what string) {
	fmt.Printf("chaos: %6.1fs %s\n", time.Since(begun).Seconds(), what)
}
