package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/web"
	"github.com/prloop/prloop/services/poller"
)

// demoAgent is the demo's coding agent: a script that really edits the PR's
// code and commits, as Claude Code or Codex would; prloop checks the commit
// and pushes it (the agent has no credentials).
const demoAgent = `#!/bin/sh
# prloop demo agent: the review asked for empty names to be handled.
# The prompt is on stdin and in $PRLOOP_PROMPT_FILE.
set -e
cat > greet.go <<'GO'
package main

// greeting says hello to name, or to the world when name is empty.
func greeting(name string) string {
	if name == "" {
		name = "world"
	}
	return "hello " + name
}
GO
git add greet.go
git commit -q -m "Handle an empty name in greeting" # prloop gives the agent its git identity
`

// demoWorld is what the demo plays against.
type demoWorld struct {
	sim       *ghsim.Sim
	srv       *httptest.Server
	reviewed  ghref.PR // reviewed, fixed, approved, merged
	neglected ghref.PR // nobody reviews it: escalated
	dir       string
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "keep everything running afterwards and print the NATS and simulator URLs")
	limit := fs.Duration("timeout", 60*time.Second, "give up if the loop has not finished by then")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: prloop demo [-keep] [-timeout 60s]

Plays prloop's whole loop on this machine, with no token, no network and no
Docker: an embedded NATS server, a GitHub simulator with a demo repository
and two PRs, the four services, a scripted reviewer and a scripted coding
agent. One PR is reviewed, fixed by the agent, approved and squash-merged;
the other is never reviewed and is escalated to a human.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: prloop demo takes no arguments", errUsage)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "prloop-demo-")
	if err != nil {
		return fmt.Errorf("create demo directory: %w", err)
	}
	// A failed demo keeps its directory (the services' log, the simulator's
	// repositories) for whoever looks into it.
	failed := true
	defer func() {
		if failed {
			fmt.Fprintf(stdout, "kept %s for a look (the services' log is prloop.log)\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	w, err := newDemoWorld(dir)
	if err != nil {
		return err
	}
	defer w.close()

	logPath := filepath.Join(dir, "prloop.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create demo log: %w", err)
	}
	defer logFile.Close()
	if err := demoEnvironment(w); err != nil {
		return err
	}
	cfg := &allConfig{}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}
	log := logging.New(logFile, "info", "json")
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	rt, err := app.Start(runCtx, "demo", cfg.Shared(), log)
	if err != nil {
		return err
	}
	clock := &demoClock{}
	rt.Now = clock.Now
	services, err := buildServices(runCtx, rt, cfg)
	if err != nil {
		_ = rt.Close(context.Background())
		return err
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(runCtx, services...) }()

	color := isTerminal(stdout)
	fmt.Fprintf(stdout, "prloop demo: %s (reviewed by alice) and %s (nobody reviews it)\n", w.reviewed, w.neglected)
	fmt.Fprintf(stdout, "services log to %s\n", logPath)
	pageURL := demoPageURL(rt, served)
	if pageURL != "" {
		fmt.Fprintf(stdout, "web page: %s   (where each PR stands; -keep keeps it up)\n", pageURL)
	}
	fmt.Fprintln(stdout)

	play := &demoPlay{w: w, clock: clock, out: stdout, color: color, start: time.Now()}
	for _, s := range services {
		if ps, ok := s.(*poller.Service); ok && ps.StatusWriter() != nil {
			ps.StatusWriter().SetOnWrite(play.onStatus)
		}
	}
	cons, err := rt.JS.OrderedConsumer(runCtx, events.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	cc, err := cons.Consume(play.onMessage)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	// The coding agent that opened the PRs asks prloop to watch them, as
	// 'prloop watch' or any orchestrator would.
	emit := events.NewEmitter(rt.JS, "demo-agent")
	for _, pr := range []ghref.PR{w.reviewed, w.neglected} {
		if _, _, err := emit.Emit(runCtx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: ghsim.DemoAgent}, "demo"); err != nil {
			return err
		}
	}

	timer := time.NewTimer(*limit)
	defer timer.Stop()
	var result error
	select {
	case <-play.done():
	case <-timer.C:
		result = fmt.Errorf("the loop did not finish within %s; see %s", *limit, logPath)
	case <-ctx.Done():
		result = errors.New("interrupted")
	case err := <-served:
		result = fmt.Errorf("services stopped: %v", err)
	}
	if !*keep || result != nil {
		cc.Stop()
	}
	play.summary(result == nil)

	if *keep && result == nil {
		// Events keep printing: anything after the summary would be
		// something the summary does not explain.
		defer cc.Stop()
		fmt.Fprintf(stdout, "\nprloop keeps running; Ctrl-C stops it. Any further event is printed below.\n")
		fmt.Fprintf(stdout, "  NATS:      %s   (watch, read-only without credentials: nats -s %s sub 'pr.>')\n", rt.Conn.URL, rt.Conn.URL)
		fmt.Fprintf(stdout, "  NATS key:  %s   (to publish or read JetStream: nats -s %s --nkey %s …, or PRLOOP_NATS_URL=%s PRLOOP_NATS_CREDS_FILE=%s prloop status)\n",
			rt.Conn.CredsFile, rt.Conn.URL, rt.Conn.CredsFile, rt.Conn.URL, rt.Conn.CredsFile)
		fmt.Fprintf(stdout, "  simulator: %s   (alice's token: %s)\n", w.srv.URL, "alice-demo-token")
		if pageURL != "" {
			fmt.Fprintf(stdout, "  web page:  %s\n", pageURL)
		}
		fmt.Fprintf(stdout, "  explain:   PRLOOP_NATS_URL=%s PRLOOP_NATS_CREDS_FILE=%s PRLOOP_GITHUB_API_URL=%s GITHUB_TOKEN=%s prloop explain %s\n",
			rt.Conn.URL, rt.Conn.CredsFile, w.srv.URL, "alice-demo-token", w.neglected)
		<-ctx.Done()
	}
	cancelRun()
	select {
	case <-served:
	case <-time.After(15 * time.Second):
	}
	failed = result != nil
	if result == nil && !*keep {
		fmt.Fprint(stdout, demoNext)
	}
	return result
}

// demoNext is what to try after a demo that ended well.
const demoNext = `
Next:
  prloop demo -keep   the same, then keeps running: watch the events, the web page and prloop explain
  prloop run -sim     the services against a simulator you drive yourself, as the reviewer alice
  prloop run          against GitHub: GITHUB_TOKEN=… PRLOOP_REPOS=owner/repo (README: "Running it for real")
`

func newDemoWorld(dir string) (*demoWorld, error) {
	sim, err := ghsim.New(ghsim.Options{Dir: filepath.Join(dir, "github"), RealClock: true,
		Logger: logging.New(io.Discard, "error", "json")})
	if err != nil {
		return nil, err
	}
	w := &demoWorld{sim: sim, dir: dir, srv: httptest.NewServer(sim)}
	d, err := ghsim.SeedDemo(sim)
	if err != nil {
		w.close()
		return nil, err
	}
	w.reviewed = d.PR
	if _, err := sim.PushCommit(d.Repo, "add-farewell", ghsim.DemoAgent, map[string]string{
		"farewell.go": "package main\n\nfunc farewell(name string) string {\n\treturn \"bye \" + name\n}\n",
	}, "Add a farewell helper"); err != nil {
		w.close()
		return nil, err
	}
	w.neglected, err = sim.OpenPR(d.Repo, ghsim.PRInput{Title: "Add a farewell helper", Body: "Opened by a coding agent.", Head: "add-farewell", Author: ghsim.DemoAgent})
	if err != nil {
		w.close()
		return nil, err
	}
	// The agent's own directory: its sandbox sees it, and nothing else of
	// the demo's (the NATS key sits beside it).
	if err := os.Mkdir(filepath.Join(dir, "agent"), 0o755); err != nil {
		w.close()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "agent", "agent.sh"), []byte(demoAgent), 0o755); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *demoWorld) close() {
	w.srv.Close()
	_ = w.sim.Close()
}

// demoEnvironment configures the services for the demo through the same
// PRLOOP_* variables a user would set.
func demoEnvironment(w *demoWorld) error {
	for k, v := range demoEnv(w) {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("configure demo: %w", err)
		}
	}
	return nil
}

// demoEnv is the demo's configuration, as PRLOOP_* variables.
func demoEnv(w *demoWorld) map[string]string {
	return map[string]string{
		"PRLOOP_GITHUB_API_URL": w.srv.URL,
		"GITHUB_TOKEN":          "prloop-demo-token",
		"GH_TOKEN":              "",
		"PRLOOP_GITHUB_LOGIN":   ghsim.DemoPrloop,
		"PRLOOP_REPOS":          "", // the agent's orchestrator asks prloop to watch each PR

		"PRLOOP_REVIEWERS":            ghsim.DemoReviewer,
		"PRLOOP_REVIEW_PROTOCOLS":     "emoji,reviews",
		"PRLOOP_POLL_INTERVAL":        "1s",
		"PRLOOP_REVIEW_TIMEOUT":       demoReviewTimeout.String(),
		"PRLOOP_DATA_DIR":             filepath.Join(w.dir, "nats"),
		"PRLOOP_NATS_URL":             "",
		"PRLOOP_NATS_PORT":            "-1",
		"PRLOOP_HTTP_ADDR":            "127.0.0.1:0",
		"PRLOOP_SHUTDOWN_GRACE":       "5s",
		"PRLOOP_WORKSPACE_DIR":        filepath.Join(w.dir, "work"),
		"PRLOOP_AGENT_CMD":            "sh " + filepath.Join(w.dir, "agent", "agent.sh"),
		"PRLOOP_AGENT_READONLY_PATHS": filepath.Join(w.dir, "agent"),
		"PRLOOP_AGENT_TIMEOUT":        "30s",
		"PRLOOP_AGENT_BACKOFF":        "1s",
		"PRLOOP_MERGE_METHOD":         "squash",
		"PRLOOP_MERGE_POLL_INTERVAL":  "1s",
		"PRLOOP_DRY_RUN":              "false",
		"PRLOOP_POST_STATUS":          "true",
		"PRLOOP_STATUS_COALESCE":      "300ms",
	}
}

// demoReviewTimeout is the demo's review timeout, as a team might set it.
// The demo does not wait for it: once the reviewed PR is merged it moves
// the poller's clock forward by as much (demoClock), so the neglected PR
// times out then and the reviewed one never does, however slow the
// machine.
const demoReviewTimeout = time.Hour

// demoClock is the poller's clock in the demo: the wall clock, moved
// forward by skip.
type demoClock struct{ offset atomic.Int64 }

func (c *demoClock) Now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *demoClock) skip(d time.Duration) { c.offset.Add(int64(d)) }

// demoPlay shows the events and plays the reviewer.
type demoPlay struct {
	w     *demoWorld
	clock *demoClock
	out   io.Writer
	color bool
	start time.Time

	mu        sync.Mutex
	lines     int
	pendings  int
	eyes      int64
	merged    *events.Merged
	escalated *events.Escalated
	fixes     int
	finished  chan struct{}
	once      sync.Once
	status    string
	// lastStatus is prloop's latest commit status line per PR.
	lastStatus map[string]prstatus.Line
}

func (p *demoPlay) done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished == nil {
		p.finished = make(chan struct{})
	}
	return p.finished
}

func (p *demoPlay) onMessage(m jetstream.Msg) {
	_ = m.Ack()
	e, d, err := events.Decode(m.Data())
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.color && p.status != "" {
		fmt.Fprint(p.out, "\r\x1b[K")
	}
	fmt.Fprintln(p.out, eventLine(e.Time(), d, p.color))
	p.lines++
	p.react(d)
	if p.color {
		p.status = fmt.Sprintf("\x1b[2m… %s elapsed, %d events\x1b[0m", time.Since(p.start).Round(time.Second), p.lines)
		fmt.Fprint(p.out, p.status)
	}
	p.finish()
}

// onStatus prints each commit status prloop writes, as the simulator
// shows it on the PR's head.
func (p *demoPlay) onStatus(pr ghref.PR, _ string, l prstatus.Line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.color && p.status != "" {
		fmt.Fprint(p.out, "\r\x1b[K")
	}
	fmt.Fprintf(p.out, "%s  status  %s  %s\n", pr, l.State, l.Text)
	if p.lastStatus == nil {
		p.lastStatus = map[string]prstatus.Line{}
	}
	p.lastStatus[pr.Key()] = l
	if p.color && p.status != "" {
		fmt.Fprint(p.out, p.status)
	}
	p.finish()
}

// finish ends the play once both PRs reached their end and prloop's
// status on each says so (it follows the events by up to a coalescing
// window): nothing is left to print after the summary. p.mu is held.
func (p *demoPlay) finish() {
	final := p.lastStatus[p.w.reviewed.Key()].State == prstatus.Success && strings.HasPrefix(p.lastStatus[p.w.reviewed.Key()].Text, "merged") &&
		p.lastStatus[p.w.neglected.Key()].State == prstatus.Error
	if p.merged != nil && p.escalated != nil && final {
		p.once.Do(func() {
			if p.finished == nil {
				p.finished = make(chan struct{})
			}
			close(p.finished)
		})
	}
}

// react is the scripted reviewer (alice) on the reviewed PR, and the
// bookkeeping of how both PRs end.
func (p *demoPlay) react(d events.Data) {
	sim, pr := p.w.sim, p.w.reviewed
	if !d.Ref().Same(pr) {
		if esc, ok := d.(*events.Escalated); ok && d.Ref().Same(p.w.neglected) {
			p.escalated = esc
		}
		return
	}
	switch d := d.(type) {
	case *events.ReviewPending:
		p.pendings++
		if p.pendings == 1 {
			// alice starts reviewing.
			id, err := sim.AddReaction(pr, ghsim.DemoReviewer, "eyes")
			if err == nil {
				p.eyes = id
			}
		} else {
			// The fix is in: alice approves it.
			_, _ = sim.AddReaction(pr, ghsim.DemoReviewer, "+1")
		}
	case *events.ReviewInProgress:
		// alice leaves her review and stops reviewing.
		_, _ = sim.AddReviewComment(pr, ghsim.ReviewCommentInput{Login: ghsim.DemoReviewer, Path: "greet.go", Line: 4,
			Body: "An empty name gives \"hello \"; greet the world instead."})
		_, _ = sim.AddIssueComment(pr, ghsim.DemoReviewer, "Please also add a doc comment to greeting.")
		if p.eyes != 0 {
			_ = sim.RemoveReaction(pr, p.eyes)
		}
	case *events.FeedbackAddressed:
		p.fixes = d.FixCycle
	case *events.Merged:
		p.merged = d
		// Nobody reviews the other PR: let its review timeout pass.
		fmt.Fprintf(p.out, "… %s later, nobody has reviewed %s\n", demoReviewTimeout, p.w.neglected)
		p.clock.skip(demoReviewTimeout)
	}
}

func (p *demoPlay) summary(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.color && p.status != "" {
		fmt.Fprint(p.out, "\r\x1b[K")
	}
	fmt.Fprintf(p.out, "\nSummary (%s, %d events)\n", time.Since(p.start).Round(100*time.Millisecond), p.lines)
	if p.merged != nil {
		info, err := p.w.sim.PRInfo(p.w.reviewed)
		detail := ""
		if err == nil && info.Merged {
			detail = fmt.Sprintf("; main now ends in %s", info.MergeCommitSHA[:min(7, len(info.MergeCommitSHA))])
		}
		fmt.Fprintf(p.out, "  %s  reviewed → fixed by the agent (%d fix) → approved → squash-merged as %s%s\n",
			p.w.reviewed, p.fixes, p.merged.MergeSHA[:min(7, len(p.merged.MergeSHA))], detail)
	} else {
		fmt.Fprintf(p.out, "  %s  not merged\n", p.w.reviewed)
	}
	if p.escalated != nil {
		fmt.Fprintf(p.out, "  %s  nobody reviewed it → escalated (%s): %s\n", p.w.neglected, p.escalated.Reason, strings.Join(p.escalated.Actions, ", "))
	} else {
		fmt.Fprintf(p.out, "  %s  not escalated\n", p.w.neglected)
	}
	if ok {
		fmt.Fprintln(p.out, "Both PRs reached their end.")
	}
}

// demoPageURL waits, briefly, for the runtime's HTTP server to listen and
// returns the web page's URL ("" if it did not come up: the demo goes on).
func demoPageURL(rt *app.Runtime, served <-chan error) string {
	deadline := time.Now().Add(5 * time.Second)
	for rt.HTTPAddr() == "" && time.Now().Before(deadline) && len(served) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if addr := rt.HTTPAddr(); addr != "" {
		return web.URL(addr)
	}
	return ""
}
