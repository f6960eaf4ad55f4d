// Package app runs prloop services: it owns the process lifecycle that every
// service binary and the all-in-one binary share. Load and validate config,
// connect to NATS (or embed it), ensure the streams and the state bucket,
// serve health endpoints and metrics, run the services until SIGINT or
// SIGTERM, then shut down within a bounded grace period: stop consumers,
// wait for in-flight work, drain NATS.
//
// The HTTP server (PRLOOP_HTTP_ADDR) serves /healthz (the process is alive),
// /readyz (NATS connected, the stream and every service's consumer present,
// GitHub reachable; 503 with the failed checks otherwise) and /metrics
// (Prometheus, from the process's one registry, Runtime.Registry).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/natsx"
)

// Service is a long-running part of prloop. Run blocks until ctx is done or
// the service fails, and returns only after its in-flight work has finished
// or been abandoned for redelivery.
type Service interface {
	Run(ctx context.Context) error
}

// Config is a service configuration: validatable, with the shared settings.
type Config interface {
	config.Validator
	Shared() config.Common
}

// Runtime holds what services are built from.
type Runtime struct {
	Name   string
	Log    *slog.Logger
	Conn   *natsx.Conn
	JS     jetstream.JetStream
	Common config.Common
	// Registry holds the process's metrics, served on /metrics: the Go and
	// process collectors, the GitHub clients' and whatever the services
	// register (package metrics). The all-in-one binary's services share it.
	Registry *prometheus.Registry
	// Now is the clock the poller judges review timeouts by; nil is
	// time.Now. prloop demo moves it forward to show a review timeout
	// without waiting for one.
	Now func() time.Time

	ghMetrics *metrics.GitHub
	// budget is the process's one share of GitHub's secondary limits,
	// which every client NewGitHub builds draws on.
	budgetOnce sync.Once
	budget     *github.Budget
	// stopBudget, when PRLOOP_GITHUB_SHARED_BUDGET is set, stops renewing
	// the process's entry in the installation's budget and marks it gone;
	// Serve calls it after the services stopped, Close if Serve never ran.
	stopBudget func()

	mu       sync.Mutex
	checks   []check
	ghChecks map[string]bool         // API URLs with a readiness check
	access   map[string]accessResult // by API URL and credentials source (checkGitHub)
	mux      *http.ServeMux
	httpAddr string
}

type check struct {
	name string
	fn   func(ctx context.Context) error
}

// AddReadyCheck adds a readiness check served by /readyz.
func (rt *Runtime) AddReadyCheck(name string, fn func(ctx context.Context) error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.checks = append(rt.checks, check{name: name, fn: fn})
}

// Handle registers an HTTP handler on the service's HTTP server.
func (rt *Runtime) Handle(pattern string, h http.Handler) { rt.mux.Handle(pattern, h) }

// GitHubCheckTTL is how long a successful GitHub readiness check is
// trusted, so that /readyz probes do not each send a request; a failed one
// is trusted for GitHubCheckRetry.
const (
	GitHubCheckTTL   = 30 * time.Second
	GitHubCheckRetry = 5 * time.Second
)

// GitHubOptions are the client options for a GitHub client the runtime
// watches: its log, and its requests counted in the process's metrics.
func (rt *Runtime) GitHubOptions() github.Options {
	return github.Options{Logger: rt.Log, Observer: rt.ghMetrics}
}

// NewGitHub builds a GitHub client from cfg with GitHubOptions and the
// process's one github.Budget (the first cfg sizes it), checks its
// credentials once per API (a 401, or a scope or App permission the
// service's features need missing, is an error wrapping
// github.ErrCredentials; see CheckCredentials) and watches it
// (WatchGitHub).
func (rt *Runtime) NewGitHub(ctx context.Context, cfg github.Config) (*github.Client, error) {
	opts := rt.GitHubOptions()
	if cfg.Concurrency > 0 {
		// Every service reads the same PRLOOP_GITHUB_CONCURRENCY.
		var err error
		rt.budgetOnce.Do(func() {
			rt.budget = github.NewBudget(github.BudgetOptions{
				Concurrency: cfg.Concurrency, EndpointPointsPerMinute: cfg.PointsPerMinute, Observer: rt.ghMetrics,
			})
			if cfg.SharedBudget && rt.JS != nil {
				err = rt.joinBudget(ctx)
			}
		})
		if err != nil {
			return nil, err
		}
		opts.Budget = rt.budget
	}
	c, err := github.New(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := rt.checkGitHub(ctx, c); err != nil {
		return nil, err
	}
	rt.WatchGitHub(c)
	return c, nil
}

// joinBudget makes the process's budget a share of the installation's
// (PRLOOP_GITHUB_SHARED_BUDGET) and keeps it renewed from then on, not
// from Serve: a start-up longer than the entry's TTL must not let it lapse
// while the process holds its share (the others would count it gone and
// take its part).
func (rt *Runtime) joinBudget(ctx context.Context) error {
	kv, err := kvlease.EnsureBucket(ctx, rt.JS, github.BudgetBucket, "prloop's GitHub request budget, shared by its processes", rt.Common.StreamReplicas)
	if err != nil {
		return err
	}
	share, err := github.JoinBudget(ctx, kv, rt.budget, github.ShareOptions{Log: rt.Log.With("part", "github budget")})
	if err != nil {
		return err
	}
	renew, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); share.Run(renew) }()
	rt.stopBudget = sync.OnceFunc(func() { cancel(); <-done })
	return nil
}

// SelfLogin returns prloop's own GitHub login: configured (PRLOOP_GITHUB_LOGIN)
// when set, else the token's user as GitHub reports it. prloop's own
// comments and reactions must never count as reviews; when the login cannot
// be found out the service still starts, with a warning saying what to set.
func (rt *Runtime) SelfLogin(ctx context.Context, c *github.Client, configured string) string {
	if configured != "" {
		return configured
	}
	login, err := c.CurrentUser(ctx)
	if err != nil {
		rt.Log.Warn("cannot tell prloop's own login; set PRLOOP_GITHUB_LOGIN so its own comments never count as reviews", "err", err)
		return ""
	}
	return login
}

// WatchGitHub exports c's rate limits and counters on /metrics, and makes
// /readyz check that GitHub answers c (Client.Ping, a free GET /rate_limit,
// at most once per GitHubCheckTTL). Clients of the same API share one
// check: the all-in-one binary has one client per service.
func (rt *Runtime) WatchGitHub(c *github.Client) {
	rt.ghMetrics.Watch(c)
	rt.mu.Lock()
	if rt.ghChecks == nil {
		rt.ghChecks = map[string]bool{}
	}
	seen := rt.ghChecks[c.BaseURL()]
	rt.ghChecks[c.BaseURL()] = true
	rt.mu.Unlock()
	if !seen {
		rt.AddReadyCheck("github", CachedCheck(GitHubCheckTTL, GitHubCheckRetry, c.Ping))
	}
}

// CachedCheck wraps a readiness check that costs something (a request to
// GitHub) so that it runs at most once per ok after a success and once per
// failed after a failure; callers meanwhile get the last result. Concurrent
// callers wait for the one check in flight.
func CachedCheck(ok, failed time.Duration, fn func(ctx context.Context) error) func(ctx context.Context) error {
	var mu sync.Mutex
	var last error
	var until time.Time
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Before(until) {
			return last
		}
		err := fn(ctx)
		switch {
		case err == nil:
			until = time.Now().Add(ok)
		case ctx.Err() != nil:
			return err // the caller gave up: says nothing about the next one
		default:
			until = time.Now().Add(failed)
		}
		last = err
		return last
	}
}

// HTTPAddr returns the address the HTTP server listens on (the port picked
// when PRLOOP_HTTP_ADDR asked for port 0), or "" before Serve started it.
func (rt *Runtime) HTTPAddr() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.httpAddr
}

// ConsumerReady is a readiness check that the durable consumer exists.
func (rt *Runtime) ConsumerReady(durable string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := rt.JS.Consumer(ctx, events.StreamName, durable)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", durable, err)
		}
		return nil
	}
}

// BuildFunc builds the services to run from the runtime. ctx is cancelled
// on shutdown; builders may use it for start-up requests.
type BuildFunc func(ctx context.Context, rt *Runtime) ([]Service, error)

// Main is a service binary's main: it runs Run with the process's signals
// and exits non-zero with the error on stderr when Run fails. A service
// binary requires PRLOOP_NATS_URL (ErrNoNATSURL): only prloop run and demo
// embed a server, and a service that embedded its own would consume a
// private stream nobody else publishes to, yet pass /readyz.
func Main(name string, cfg Config, build BuildFunc) {
	if err := run(context.Background(), name, cfg, os.Stderr, build, true); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// ErrNoNATSURL says a service binary was started without PRLOOP_NATS_URL.
var ErrNoNATSURL = errors.New("PRLOOP_NATS_URL is not set")

// Run loads cfg from the environment, starts the runtime and the services
// build returns, and runs them until ctx is done, SIGINT or SIGTERM arrives,
// or a service fails. It returns nil after a graceful shutdown. Without
// PRLOOP_NATS_URL it embeds a NATS server (prloop run).
func Run(ctx context.Context, name string, cfg Config, logOut io.Writer, build BuildFunc) error {
	return run(ctx, name, cfg, logOut, build, false)
}

// run is Run; needURL refuses to embed a NATS server.
func run(ctx context.Context, name string, cfg Config, logOut io.Writer, build BuildFunc, needURL bool) error {
	if needURL {
		// A service binary: a misspelt setting would be ignored silently.
		// prloop run makes the same check itself, before anything starts.
		if err := config.CheckEnv(os.Environ(), config.Known); err != nil {
			return err
		}
	}
	if err := config.Load(cfg); err != nil {
		return err
	}
	common := cfg.Shared()
	if needURL && common.NATSURL == "" {
		return fmt.Errorf("%w: the %s binary connects to the NATS server the other services share (e.g. PRLOOP_NATS_URL=nats://nats:4222); only prloop run and prloop demo embed one", ErrNoNATSURL, name)
	}
	log := logging.New(logOut, common.LogLevel, common.LogFormat).With("service", name)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	rt, err := Start(ctx, name, common, log)
	if err != nil {
		return err
	}
	services, err := build(ctx, rt)
	if err != nil {
		_ = rt.Close(context.Background())
		return fmt.Errorf("start %s: %w", name, err)
	}
	return rt.Serve(ctx, services...)
}

// Start connects to NATS and ensures the streams and the state bucket.
func Start(ctx context.Context, name string, common config.Common, log *slog.Logger) (*Runtime, error) {
	conn, err := natsx.Connect(ctx, natsx.Options{
		URL: common.NATSURL, CredsFile: common.NATSCredsFile, DataDir: common.DataDir,
		Port: common.NATSPort, Name: "prloop-" + name, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if conn.Server != nil {
		// Anyone may watch; publishing takes the key, which stays in its
		// file (never in the environment the coding agent inherits).
		log.Info("embedded nats ready", "url", conn.URL, "data_dir", common.DataDir,
			"observe", "nats -s "+conn.URL+" sub 'pr.>'",
			"key", conn.CredsFile,
			"publish", "nats -s "+conn.URL+" --nkey "+conn.CredsFile+" …, or PRLOOP_NATS_CREDS_FILE="+conn.CredsFile+" prloop status")
	} else {
		log.Info("connected to nats", "url", conn.NC.ConnectedUrlRedacted())
	}
	if err := events.EnsureStreams(ctx, conn.JS, common.Streams()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	reg := metrics.NewRegistry()
	rt := &Runtime{
		Name: name, Log: log, Conn: conn, JS: conn.JS, Common: common, mux: http.NewServeMux(),
		Registry: reg, ghMetrics: metrics.NewGitHub(reg),
	}
	if skew := common.TestClockSkew; skew != 0 {
		log.Warn("clock skewed for a test", "skew", skew)
		rt.Now = func() time.Time { return time.Now().Add(skew) }
	}
	rt.AddReadyCheck("nats", func(context.Context) error {
		if !conn.NC.IsConnected() {
			return errors.New("nats not connected")
		}
		return nil
	})
	rt.AddReadyCheck("stream", func(ctx context.Context) error {
		_, err := conn.JS.Stream(ctx, events.StreamName)
		return err
	})
	return rt, nil
}

// Serve runs the services and the HTTP server until ctx is done or a service
// fails, then shuts everything down within the grace period.
func (rt *Runtime) Serve(ctx context.Context, services ...Service) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	httpErr := make(chan error, 1)
	srv, err := rt.startHTTP(httpErr)
	if err != nil {
		_ = rt.Close(context.Background())
		return err
	}

	errs := make(chan error, len(services))
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
				cancel()
			}
		}()
	}
	go rt.logWhenReady(ctx, len(services))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-httpErr:
		cancel()
	}
	rt.Log.Info("shutting down", "grace", rt.Common.ShutdownGrace)
	deadline := time.Now().Add(rt.Common.ShutdownGrace + time.Second)
	sctx, scancel := context.WithDeadline(context.Background(), deadline)
	defer scancel()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		rt.Log.Warn("services did not stop within the grace period; their unacked work will be redelivered")
	}
	if srv != nil {
		_ = srv.Shutdown(sctx)
	}
	close(errs)
	for err := range errs {
		runErr = errors.Join(runErr, err)
	}
	if err := rt.Close(sctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if runErr == nil {
		rt.Log.Info("stopped")
	}
	return runErr
}

// Close marks the process's share of the GitHub budget gone, drains NATS
// and stops the embedded server.
func (rt *Runtime) Close(ctx context.Context) error {
	if rt.stopBudget != nil {
		rt.stopBudget()
	}
	return rt.Conn.Close(ctx)
}

func (rt *Runtime) startHTTP(errc chan<- error) (*http.Server, error) {
	if rt.Common.HTTPAddr == "" {
		return nil, nil
	}
	rt.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	rt.mux.HandleFunc("GET /readyz", rt.serveReady)
	rt.mux.Handle("GET /metrics", metrics.Handler(rt.Registry))
	ln, err := net.Listen("tcp", rt.Common.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on PRLOOP_HTTP_ADDR=%s: %w", rt.Common.HTTPAddr, err)
	}
	rt.mu.Lock()
	rt.httpAddr = ln.Addr().String()
	rt.mu.Unlock()
	srv := &http.Server{Handler: rt.mux, ReadHeaderTimeout: 10 * time.Second}
	rt.Log.Info("http server listening", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	return srv, nil
}

// logWhenReady logs "ready" once every readiness check passes, so the line
// means what /readyz means.
func (rt *Runtime) logWhenReady(ctx context.Context, services int) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if len(rt.failedChecks(ctx)) == 0 {
			rt.Log.Info("ready", "services", services)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (rt *Runtime) failedChecks(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rt.mu.Lock()
	checks := append([]check(nil), rt.checks...)
	rt.mu.Unlock()
	var failed []string
	for _, c := range checks {
		if err := c.fn(ctx); err != nil {
			failed = append(failed, c.name+": "+err.Error())
		}
	}
	return failed
}

func (rt *Runtime) serveReady(w http.ResponseWriter, r *http.Request) {
	failed := rt.failedChecks(r.Context())
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, f := range failed {
			_, _ = io.WriteString(w, f+"\n")
		}
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}
