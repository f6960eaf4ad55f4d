package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/escalator"
)

// TestLoop_EscalatesAgainAfterTheLabelIsRemoved runs the four services in
// one process on a PR nobody reviews: the review timeout escalates (label,
// comment, webhook), a human removes the label, and the same failure recurs
// minutes later, well inside JetStream's duplicate window. It must bring the
// human in again: a second label, a second comment, a second webhook call,
// each exactly once. The human removes the label either at once, before a
// probe could see it, or only after the poller saw it.
func TestLoop_EscalatesAgainAfterTheLabelIsRemoved(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	const (
		label       = escalator.DefaultLabel
		routeLabels = "POST /repos/{owner}/{repo}/issues/{number}/labels"
		routeProbe  = "GET /repos/{owner}/{repo}/pulls"
	)
	tests := []struct {
		name string
		// atOnce removes the label as soon as it is on, before the
		// escalation is even announced.
		atOnce bool
	}{
		{name: "label removed at once", atOnce: true},
		{name: "label removed after the poller saw it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sim, srv, demo := startLoopSim(t, dir)
			_, err := sim.PushCommit(demo.Repo, "slow", ghsim.DemoAgent, map[string]string{"slow.go": "package main\n"}, "Add slow")
			require.NoError(t, err)
			pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Nobody reviews this", Head: "slow", Author: ghsim.DemoAgent})
			require.NoError(t, err)
			human, err := github.New(t.Context(), github.Config{APIURL: srv.URL, Token: github.Secret(demo.Tokens[ghsim.DemoReviewer])},
				github.Options{Logger: logging.New(io.Discard, "error", "json")})
			require.NoError(t, err)

			var (
				mu    sync.Mutex
				calls []string // the webhook's idempotency keys
			)
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls = append(calls, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				_, _ = io.WriteString(w, "ok")
			}))
			t.Cleanup(hook.Close)
			webhookCalls := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(calls)
			}

			for k, v := range map[string]string{
				"PRLOOP_GITHUB_API_URL": srv.URL, "GITHUB_TOKEN": demo.Tokens[ghsim.DemoPrloop], "GH_TOKEN": "",
				"PRLOOP_GITHUB_LOGIN": ghsim.DemoPrloop, "PRLOOP_REPOS": "", "PRLOOP_REVIEWERS": ghsim.DemoReviewer,
				"PRLOOP_REVIEW_PROTOCOLS": "emoji,reviews", "PRLOOP_POLL_INTERVAL": "1s", "PRLOOP_REVIEW_TIMEOUT": "2s",
				"PRLOOP_DATA_DIR": filepath.Join(dir, "nats"), "PRLOOP_NATS_URL": "", "PRLOOP_NATS_PORT": "-1",
				"PRLOOP_HTTP_ADDR": "127.0.0.1:0", "PRLOOP_WORKSPACE_DIR": filepath.Join(dir, "work"),
				"PRLOOP_AGENT_CMD": "true", "PRLOOP_ESCALATION_WEBHOOK_URL": hook.URL, "PRLOOP_LOG_LEVEL": "error",
			} {
				t.Setenv(k, v)
			}
			ctx, rt, _ := startLoop(t, "escalate-again")

			// hasLabel and escalated run in polls, off the test's goroutine:
			// they report a failed read as "not yet".
			hasLabel := func() bool {
				info, err := sim.PRInfo(pr)
				return err == nil && len(info.Labels) > 0
			}
			if tt.atOnce {
				// The human is quicker than the poller's next probe: the
				// label goes as soon as it is on.
				stop := make(chan struct{})
				removed := make(chan struct{})
				go func() {
					defer close(removed)
					for {
						select {
						case <-stop:
							return
						case <-time.After(5 * time.Millisecond):
						}
						if hasLabel() {
							_ = human.RemoveLabel(ctx, pr, label)
							return
						}
					}
				}()
				t.Cleanup(func() { close(stop); <-removed })
			}

			emit := events.NewEmitter(rt.JS, "test")
			_, _, err = emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "escalate-again")
			require.NoError(t, err)
			// escalated counts the PREscalated about the PR on the stream.
			escalated := func() int {
				subject := events.Subject(pr, events.TypeEscalated)
				stream, err := rt.JS.Stream(ctx, events.StreamName)
				if err != nil {
					return -1
				}
				info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
				if err != nil {
					return -1
				}
				return int(info.State.Subjects[subject])
			}
			require.Eventually(t, func() bool { return escalated() == 1 && webhookCalls() == 1 }, 30*time.Second, 20*time.Millisecond,
				"the review timeout was never escalated")

			if !tt.atOnce {
				require.Eventually(t, func() bool {
					kv, err := rt.JS.KeyValue(ctx, state.Bucket)
					if err != nil {
						return false
					}
					st, _, err := state.NewStore(kv).Get(ctx, pr)
					return err == nil && st.EscalationLabelSeen && len(st.Escalations) > 0
				}, 30*time.Second, 20*time.Millisecond, "the poller never saw the label")
				require.NoError(t, human.RemoveLabel(ctx, pr, label))
			}

			// The same failure recurs two seconds after the resume.
			if !assert.Eventually(t, func() bool { return escalated() == 2 && webhookCalls() == 2 && hasLabel() }, 30*time.Second, 20*time.Millisecond) {
				t.Fatalf("not escalated again after the label was removed: %d PREscalated, %d webhook calls, label on: %v",
					escalated(), webhookCalls(), hasLabel())
			}

			// Exactly once each: nothing more while the poller probes on.
			probes := sim.Stats().ByRoute[routeProbe]
			require.Eventually(t, func() bool { return sim.Stats().ByRoute[routeProbe] >= probes+3 }, 30*time.Second, 20*time.Millisecond)
			assert.Equal(t, 2, escalated())
			assert.Equal(t, 2, webhookCalls())
			assert.Equal(t, 2, sim.Stats().ByRoute[routeLabels])
			comments, err := human.ListIssueComments(ctx, pr, time.Time{})
			require.NoError(t, err)
			var markers []string
			for _, c := range comments {
				if strings.HasPrefix(c.GetBody(), "<!-- prloop:escalation reason=review_timeout") {
					markers = append(markers, strings.SplitN(c.GetBody(), "\n", 2)[0])
				}
			}
			assert.Len(t, markers, 2, "one comment per escalation: %v", markers)
			mu.Lock()
			defer mu.Unlock()
			assert.NotEqual(t, calls[0], calls[1], "each webhook call is its own escalation")
		})
	}
}
