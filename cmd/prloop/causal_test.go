package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/logging"
)

// causalPRs is how many PRs the causal-order test drives at once: enough
// that the poller probes the repository while fixes are being pushed.
const causalPRs = 10

// TestLoop_EventsOfAPRReadInCausalOrder runs the four services in one
// process, as `prloop run` does, on many PRs at once, each reviewed, fixed
// by a scripted agent (which only commits: prloop pushes), approved and
// merged, with the poller probing every second throughout. It then reads
// the stream and checks, per PR, that the events read in causal order:
//
//   - PRFeedbackAddressed for a fix precedes every event about the fix's
//     head (the poller must not announce "waiting for review on X" before
//     the feedback service announced that X is the fix);
//   - nothing about a PR follows its PRMerged;
//   - each PR is merged once, after an approval of the head it merged.
//
// Without the poller holding back a new head while its change request is
// addressed, the push-to-event window (the push, waiting for GitHub to show
// the new head, the state update) is long enough that some of the PRs see
// their fix's PRReviewPending first.
func TestLoop_EventsOfAPRReadInCausalOrder(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	// Merged PRs land on main one after another: each PR touches a file of
	// its own so that no merge conflicts with the next.
	prs := make([]ghref.PR, causalPRs)
	for i := range prs {
		branch := fmt.Sprintf("change-%d", i)
		_, err := sim.PushCommit(demo.Repo, branch, ghsim.DemoAgent, map[string]string{
			fmt.Sprintf("change%d.go", i): fmt.Sprintf("package main\n\nconst change%d = %d\n", i, i),
		}, "Add change "+branch)
		require.NoError(t, err)
		prs[i], err = sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Change " + branch, Head: branch, Author: ghsim.DemoAgent})
		require.NoError(t, err)
	}
	agent := writeAgent(t, dir, `#!/bin/sh
set -e
echo "// reviewed" >> "$(ls change*.go | head -n 1)"
git -c user.name=agent -c user.email=agent@example.com commit -qam "Address the review"
`)
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "emoji,reviews", "PRLOOP_FEEDBACK_CONCURRENCY": "4"})
	ctx, rt, _ := startLoop(t, "causal")

	// The reviewer: alice asks for a change on each PR's first head and
	// approves whatever head comes after it.
	log := followLoop(t, ctx, rt, func(d events.Data, first string) error {
		if d, ok := d.(*events.ReviewPending); ok {
			if d.HeadSHA == first {
				_, err := sim.AddIssueComment(d.PR, ghsim.DemoReviewer, "Please mark this change as reviewed.")
				return err
			}
			_, err := sim.AddReaction(d.PR, ghsim.DemoReviewer, "+1")
			return err
		}
		return nil
	})

	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range prs {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "causal")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return log.count(events.TypeMerged) == causalPRs }, 4*time.Minute, 100*time.Millisecond,
		"not every PR was merged:\n%s", log)

	for _, pr := range prs {
		evs := log.of(pr)
		var addressed, merged int
		firstSeen := map[string]uint64{} // head → seq of the first event about it
		for _, e := range evs {
			if _, ok := firstSeen[e.head]; !ok && e.head != "" {
				firstSeen[e.head] = e.seq
			}
			switch d := e.data.(type) {
			case *events.FeedbackAddressed:
				addressed++
				assert.Equal(t, e.seq, firstSeen[d.HeadSHA], "%s: an event about the fix %s came before its PRFeedbackAddressed:\n%s", pr, d.HeadSHA, log.lines(pr))
			case *events.Merged:
				merged++
				assert.Equal(t, e.seq, evs[len(evs)-1].seq, "%s: nothing follows PRMerged:\n%s", pr, log.lines(pr))
			}
		}
		assert.Equal(t, 1, addressed, "%s: one fix:\n%s", pr, log.lines(pr))
		assert.Equal(t, 1, merged, "%s: merged once:\n%s", pr, log.lines(pr))
	}
}

// writeAgent writes a scripted coding agent below dir and returns its path.
func writeAgent(t *testing.T, dir, script string) string {
	t.Helper()
	agent := filepath.Join(dir, "agent", "agent.sh")
	require.NoError(t, os.Mkdir(filepath.Dir(agent), 0o755))
	require.NoError(t, os.WriteFile(agent, []byte(script), 0o755))
	return agent
}

// setLoopEnv sets the environment startLoop reads for a loop on the
// simulator at api with the demo's users, the scripted agent, quick polls
// and no checks; extra adds or overrides settings.
func setLoopEnv(t *testing.T, dir, api string, demo ghsim.Demo, agent string, extra map[string]string) {
	t.Helper()
	env := map[string]string{
		"PRLOOP_GITHUB_API_URL": api, "GITHUB_TOKEN": demo.Tokens[ghsim.DemoPrloop], "GH_TOKEN": "",
		"PRLOOP_GITHUB_LOGIN": ghsim.DemoPrloop, "PRLOOP_REPOS": "", "PRLOOP_REVIEWERS": ghsim.DemoReviewer,
		"PRLOOP_POLL_INTERVAL": "1s", "PRLOOP_REVIEW_TIMEOUT": "0",
		"PRLOOP_DATA_DIR": filepath.Join(dir, "nats"), "PRLOOP_NATS_URL": "", "PRLOOP_NATS_PORT": "-1",
		"PRLOOP_HTTP_ADDR": "127.0.0.1:0", "PRLOOP_WORKSPACE_DIR": filepath.Join(dir, "work"),
		"PRLOOP_AGENT_CMD": "sh " + agent, "PRLOOP_AGENT_READONLY_PATHS": filepath.Dir(agent), "PRLOOP_AGENT_TIMEOUT": "30s", "PRLOOP_AGENT_BACKOFF": "1s",
		"PRLOOP_MERGE_POLL_INTERVAL": "1s", "PRLOOP_REQUIRE_CHECKS": "false",
		"PRLOOP_LOG_LEVEL": "error",
	}
	maps.Copy(env, extra)
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// followLoop records the stream's events, in order, until the test ends,
// and calls on with each (and its PR's first head) as it comes: the
// scripted reviewer. An error from on is recorded with the events, so
// that a test waiting for what the reviewer's action would cause says why
// it never came.
func followLoop(t *testing.T, ctx context.Context, rt *app.Runtime, on func(d events.Data, first string) error) *causalLog {
	t.Helper()
	log := &causalLog{heads: map[string]string{}}
	cons, err := rt.JS.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		if _, d, err := events.Decode(m.Data()); err == nil {
			if err := on(d, log.add(meta.Sequence.Stream, d)); err != nil {
				log.failed(d.Ref(), err)
			}
		}
	})
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	return log
}

// startLoop runs the four services in this process, as `prloop run` does,
// with the settings of the environment, until the test ends; the context
// ends with them.
func startLoop(t *testing.T, name string, clock ...func() time.Time) (context.Context, *app.Runtime, []app.Service) {
	t.Helper()
	cfg := &allConfig{}
	require.NoError(t, cfg.Validate())
	ctx, cancel := context.WithCancel(context.Background())
	// The services' log is shown only when the test fails, after they
	// stopped (cleanups run last-in first-out): the events say what
	// happened, the log says why.
	logs := &tailLog{max: loopLogLines}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the services' last %d log lines:\n%s", loopLogLines, logs)
		}
	})
	rt, err := app.Start(ctx, name, cfg.Shared(), logging.New(logs, "info", "text"))
	require.NoError(t, err)
	if len(clock) > 0 {
		rt.Now = clock[0] // the poller's, as the demo moves it
	}
	services, err := buildServices(ctx, rt, cfg)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx, services...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-served:
		case <-time.After(20 * time.Second):
			t.Error("services did not stop within 20s")
		}
	})
	return ctx, rt, services
}

// startLoopSim serves a real-clock GitHub simulator with the demo seeded,
// its repositories below dir, until the test ends.
func startLoopSim(t *testing.T, dir string) (*ghsim.Sim, *httptest.Server, ghsim.Demo) {
	t.Helper()
	sim, err := ghsim.New(ghsim.Options{Dir: filepath.Join(dir, "github"), RealClock: true,
		Logger: logging.New(io.Discard, "error", "json")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	demo, err := ghsim.SeedDemo(sim)
	require.NoError(t, err)
	return sim, srv, demo
}

// loopLogLines is how much of the services' log a failed loop test shows.
const loopLogLines = 400

// tailLog keeps the last max lines written to it.
type tailLog struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(string(p)) {
		l.lines = append(l.lines, strings.TrimSuffix(line, "\n"))
	}
	if over := len(l.lines) - l.max; over > 0 {
		l.lines = slices.Delete(l.lines, 0, over)
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// causalLog records the stream's events in stream order, and what the
// scripted reviewer failed to do.
type causalLog struct {
	mu       sync.Mutex
	all      []causalEvent
	heads    map[string]string // each PR's first head
	failures []string
}

// failed records a reviewer action on pr that failed.
func (l *causalLog) failed(pr ghref.PR, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf("%s: %v", pr, err))
}

type causalEvent struct {
	seq  uint64
	head string
	data events.Data
}

// add records one event and returns its PR's first head.
func (l *causalLog) add(seq uint64, d events.Data) (first string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	head := d.(interface{ Head() string }).Head()
	l.all = append(l.all, causalEvent{seq: seq, head: head, data: d})
	key := d.Ref().String()
	if _, ok := l.heads[key]; !ok && head != "" {
		l.heads[key] = head
	}
	return l.heads[key]
}

func (l *causalLog) count(t events.Type) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.all {
		if e.data.EventType() == t {
			n++
		}
	}
	return n
}

func (l *causalLog) of(pr ghref.PR) []causalEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []causalEvent
	for _, e := range l.all {
		if e.data.Ref().Same(pr) {
			out = append(out, e)
		}
	}
	return out
}

func (l *causalLog) lines(pr ghref.PR) string {
	var b strings.Builder
	for _, e := range l.of(pr) {
		fmt.Fprintf(&b, "  %4d %s\n", e.seq, eventLine(time.Time{}, e.data, false))
	}
	return b.String()
}

func (l *causalLog) String() string {
	l.mu.Lock()
	prs := map[string]ghref.PR{}
	for _, e := range l.all {
		prs[e.data.Ref().String()] = e.data.Ref()
	}
	l.mu.Unlock()
	var b strings.Builder
	for _, pr := range prs {
		b.WriteString(l.lines(pr))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failures {
		fmt.Fprintf(&b, "  the reviewer failed: %s\n", f)
	}
	return b.String()
}
