package escalator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/services/escalator"
)

const routeCreateComment = "POST /repos/{owner}/{repo}/issues/{number}/comments"

// TestEscalator_LabelsCommentsAndPublishes: one request gives the label,
// one comment that says why, what was tried and what to do, mentions the
// configured people, a recorded escalation and PREscalated.
func TestEscalator_LabelsCommentsAndPublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(config(func(c *escalator.Config) { c.Mentions = []string{"alice", "acme/maintainers"} }))
	e.request(events.ReasonMaxFixCycles, "1", func(d *events.EscalationRequested) { d.MissingReviewers = []string{"copilot"} })

	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
	assert.Equal(t, events.ReasonMaxFixCycles, esc.Reason)
	assert.Equal(t, events.SeverityBlocking, esc.Severity)
	assert.Equal(t, e.head, esc.HeadSHA)
	assert.Equal(t, []string{"label", "comment", "mention"}, esc.Actions)
	assert.Empty(t, esc.Detail)

	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, []string{escalator.DefaultLabel}, info.Labels)
	comments := e.comments()
	require.Len(t, comments, 1)
	body := comments[0]
	for _, s := range []string{
		escalator.Marker(events.ReasonMaxFixCycles, e.head, 0), "reason `max_fix_cycles`", "severity **blocking**",
		"Fix cycles pushed by prloop: 3", "agent exited with status 1", "` copilot `",
		"react 👍", "Remove the `human-review-required` label", "cc @alice @acme/maintainers",
	} {
		assert.Contains(t, body, s)
	}
	e.waitSettled(1) // the escalation is recorded after PREscalated, then acked
	assert.Contains(t, e.record().Done, events.ReasonMaxFixCycles)
}

// TestEscalator_OnceUnderRedeliveryAndRestart: the same request published
// twice with different ids to two replicas, and again after both were
// replaced, escalates once; a different reason (a review timeout)
// escalates again, once.
func TestEscalator_OnceUnderRedeliveryAndRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop1, stop2 := e.start(config()), e.start(config())
	e.request(events.ReasonMaxFixCycles, "1")
	e.request(events.ReasonMaxFixCycles, "2")
	e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor)
	e.waitSettled(2)
	stop1()
	stop2()

	e.start(config())
	e.request(events.ReasonMaxFixCycles, "3")
	e.waitSettled(3)
	assert.Equal(t, 1, e.escalationComments(events.ReasonMaxFixCycles))
	assert.Equal(t, 1, e.sim.Stats().ByRoute[routeCreateComment])

	_, _, err := e.emit.Emit(t.Context(), &events.ReviewTimeout{
		Base: events.Base{PR: e.pr, HeadSHA: e.head}, MissingReviewers: []string{"copilot"},
	}, "1")
	require.NoError(t, err)
	timeout := e.rec.WaitCount(t, e.pr, events.TypeEscalated, 2, waitFor).Data.(*events.Escalated)
	assert.Equal(t, events.ReasonReviewTimeout, timeout.Reason)
	assert.Equal(t, events.SeverityWarning, timeout.Severity)
	e.waitSettled(4)
	assert.Equal(t, 1, e.escalationComments(events.ReasonReviewTimeout))
	assert.Equal(t, 2, e.sim.Stats().ByRoute[routeCreateComment])
	assert.Equal(t, 2, e.rec.Count(e.pr, events.TypeEscalated))
	assert.Len(t, e.record().Done, 2)
	assert.Equal(t, 1.0, e.metric("prloop_escalations_total", "reason", "max_fix_cycles", "severity", "blocking"))
	assert.Equal(t, 1.0, e.metric("prloop_escalations_total", "reason", "review_timeout", "severity", "warning"))
	assert.Equal(t, 2.0, e.metric("prloop_escalations_total"), "once per PR and reason")
	deliveries := e.metric("prloop_consumer_deliveries_total", "consumer", "escalator")
	redeliveries := e.metric("prloop_consumer_redeliveries_total", "consumer", "escalator")
	assert.Equal(t, 4.0, deliveries-redeliveries, "four requests, each delivered once more per redelivery (a claim held by the other replica)")
}

// TestEscalator_CommentFromBeforeACrashIsNotRepeated: a comment with the
// marker is already there (posted just before a crash, never recorded);
// the escalator finishes the escalation without posting another.
func TestEscalator_CommentFromBeforeACrashIsNotRepeated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.sim.AddIssueComment(e.pr, simtest.Login, escalator.Marker(events.ReasonMergeConflict, e.head, 0)+"\nposted before the crash")
	require.NoError(t, err)
	e.start(config())
	e.request(events.ReasonMergeConflict, "1")

	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
	assert.Equal(t, []string{"label", "comment"}, esc.Actions)
	assert.Equal(t, 1, e.escalationComments(events.ReasonMergeConflict))
	assert.Zero(t, e.sim.Stats().ByRoute[routeCreateComment])
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, []string{escalator.DefaultLabel}, info.Labels)
}

// TestEscalator_WebhookDownStillLabelsAndComments: a webhook that cannot be
// reached is retried and given up on; the label and comment are there and
// PREscalated says the webhook failed, without revealing its URL.
func TestEscalator_WebhookDownStillLabelsAndComments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/services/T000/B000/secret-token"
	dead.Close()
	e.start(config(func(c *escalator.Config) { c.WebhookURL = github.Secret(deadURL) }))
	e.request(events.ReasonChecksFailed, "1")

	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
	assert.Equal(t, []string{"label", "comment"}, esc.Actions)
	assert.Contains(t, esc.Detail, "webhook failed")
	assert.NotContains(t, esc.Detail, "secret-token")
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, []string{escalator.DefaultLabel}, info.Labels)
	assert.Equal(t, 1, e.escalationComments(events.ReasonChecksFailed))
	assert.Equal(t, 1.0, e.metric("prloop_escalation_webhook_deliveries_total", "result", "failed"))
	assert.Zero(t, e.metric("prloop_escalation_webhook_deliveries_total", "result", "ok"))
}

// TestEscalator_WebhookRetriesAfter500: a webhook answering 500 once gets
// the Slack-compatible JSON summary again and takes it.
func TestEscalator_WebhookRetriesAfter500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu     sync.Mutex
		bodies [][]byte
		keys   []string
		types  []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, b)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		types = append(types, r.Header.Get("Content-Type"))
		if len(bodies) == 1 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(hook.Close)
	e.start(config(func(c *escalator.Config) {
		c.WebhookURL, c.Mentions = github.Secret(hook.URL+"/hook"), []string{"alice"}
	}))
	e.request(events.ReasonFeedbackFailed, "1")

	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
	assert.Equal(t, []string{"label", "comment", "mention", "webhook"}, esc.Actions)
	assert.Equal(t, 1.0, e.metric("prloop_escalation_webhook_deliveries_total", "result", "ok"), "one delivery, retried inside")
	assert.Zero(t, e.metric("prloop_escalation_webhook_deliveries_total", "result", "failed"))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2, "one failed attempt, one retry")
	assert.Equal(t, bodies[0], bodies[1], "the retry sends the same summary")
	assert.Equal(t, keys[0], keys[1])
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, "application/json", types[1])
	var got map[string]any
	require.NoError(t, json.Unmarshal(bodies[1], &got))
	assert.Contains(t, got["text"], "acme/widgets#1")
	assert.Contains(t, got["text"], "feedback_failed")
	assert.Contains(t, got["text"], "cc @alice")
	assert.Equal(t, "feedback_failed", got["reason"])
	assert.Equal(t, "blocking", got["severity"])
	assert.Equal(t, "acme/widgets", got["repository"])
	assert.EqualValues(t, 1, got["number"])
	assert.EqualValues(t, 3, got["fix_cycle"])
	assert.Equal(t, "agent exited with status 1", got["last_error"])
	assert.Equal(t, e.head, got["head_sha"])
	assert.Equal(t, escalator.DefaultLabel, got["label"])
}

// TestEscalator_AgainAfterTheLabelWasRemoved: once a human removed the
// label (the poller then starts a new escalation epoch, says so with
// PREscalationResolved and publishes requests of the new epoch), the same
// failure on the same head escalates again: a second
// label, comment, webhook call and PREscalated, each once, however often
// each request is delivered. And an escalation whose label was removed
// before the escalator recorded it is not recorded: it would suppress the
// next one.
func TestEscalator_AgainAfterTheLabelWasRemoved(t *testing.T) {
	t.Parallel()
	const routeAddLabels = "POST /repos/{owner}/{repo}/issues/{number}/labels"
	tests := []struct {
		name string
		// resumeEarly resumes while the first escalation's webhook is
		// still being delivered, before the escalator records it.
		resumeEarly bool
	}{
		{name: "label removed after the escalation was recorded"},
		{name: "label removed before the escalation was recorded", resumeEarly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			// resume is the human's and then the poller's part.
			resume := func() {
				t.Helper()
				require.NoError(t, e.Client(t).RemoveLabel(t.Context(), e.pr, escalator.DefaultLabel))
				e.resolve(1)
			}
			var (
				mu    sync.Mutex
				keys  []string
				first = make(chan struct{})
				hold  = make(chan struct{})
			)
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				if n == 1 && tt.resumeEarly {
					close(first)
					<-hold
				}
				_, _ = io.WriteString(w, "ok")
			}))
			t.Cleanup(hook.Close)
			e.start(config(func(c *escalator.Config) {
				// The first call is held until the escalator has learned of
				// the resolution, which takes as long as the machine is
				// slow: no attempt may time out meanwhile and be sent again.
				c.WebhookURL, c.WebhookTimeout = github.Secret(hook.URL), 2*waitFor
			}))

			e.request(events.ReasonChecksFailed, "1")
			if tt.resumeEarly {
				<-first
				resume()
				close(hold)
			}
			firstEsc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
			assert.Zero(t, firstEsc.Epoch)
			delivered := 2 // the request and the resolution
			if tt.resumeEarly {
				e.waitSettled(delivered)
				assert.Empty(t, e.record().Done, "no record for an escalation a human already resolved")
			} else {
				e.request(events.ReasonChecksFailed, "1b") // the request once more
				e.waitSettled(delivered)
				assert.Contains(t, e.record().Done, events.ReasonChecksFailed)
				resume()
				delivered++
			}

			epoch1 := func(d *events.EscalationRequested) { d.Epoch = 1 }
			e.request(events.ReasonChecksFailed, "2", epoch1) // the same failure, minutes later
			e.request(events.ReasonChecksFailed, "2b", epoch1)
			second := e.rec.WaitCount(t, e.pr, events.TypeEscalated, 2, waitFor).Data.(*events.Escalated)
			assert.Equal(t, 1, second.Epoch)
			e.waitSettled(delivered + 2)
			assert.Equal(t, 2, e.rec.Count(e.pr, events.TypeEscalated))
			assert.Equal(t, 2, e.escalationComments(events.ReasonChecksFailed))
			assert.Equal(t, 2, e.sim.Stats().ByRoute[routeCreateComment])
			assert.Equal(t, 2, e.sim.Stats().ByRoute[routeAddLabels])
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			assert.Equal(t, []string{escalator.DefaultLabel}, info.Labels)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, keys, 2, "one webhook call per escalation")
			assert.NotEqual(t, keys[0], keys[1])
		})
	}
}

// TestEscalator_RequestOfAResolvedEpochIsIgnored: a request of epoch 0
// delivered after a human resolved the escalation (PREscalationResolved
// with epoch 1) is old news: no label, no comment, no PREscalated. A
// request of the new epoch still escalates, once.
func TestEscalator_RequestOfAResolvedEpochIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(config())
	e.resolve(1)
	e.request(events.ReasonChecksFailed, "old")
	e.waitSettled(2)
	assert.Zero(t, e.rec.Count(e.pr, events.TypeEscalated))
	assert.Zero(t, e.escalationComments(events.ReasonChecksFailed))
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Empty(t, info.Labels)
	assert.Empty(t, e.record().Done)

	e.request(events.ReasonChecksFailed, "new", func(d *events.EscalationRequested) { d.Epoch = 1 })
	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
	assert.Equal(t, 1, esc.Epoch)
	e.waitSettled(3)
	assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeEscalated))
}

// TestEscalator_EpochComesFromTheRequest: with no record of the PR at all,
// a request of epoch 1 escalates in epoch 1 (PREscalated, the comment's
// marker, the record), once however often it is delivered; and a review
// timeout carries its epoch the same way.
func TestEscalator_EpochComesFromTheRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		reason events.Reason
		// ask publishes the request of epoch 1; id tells publishes apart.
		ask func(e *env, id string)
	}{
		{name: "escalation request", reason: events.ReasonMaxFixCycles, ask: func(e *env, id string) {
			e.request(events.ReasonMaxFixCycles, id, func(d *events.EscalationRequested) { d.Epoch = 1 })
		}},
		{name: "review timeout", reason: events.ReasonReviewTimeout, ask: func(e *env, id string) {
			e.emitEvent(&events.ReviewTimeout{Base: events.Base{PR: e.pr, HeadSHA: e.head}, Epoch: 1}, id)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(config())
			tt.ask(e, "1")
			tt.ask(e, "1b")
			esc := e.rec.Wait(t, e.pr, events.TypeEscalated, waitFor).Data.(*events.Escalated)
			assert.Equal(t, 1, esc.Epoch)
			assert.Equal(t, tt.reason, esc.Reason)
			e.waitSettled(2)
			assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeEscalated))
			comments := e.comments()
			require.Len(t, comments, 1)
			assert.True(t, strings.HasPrefix(comments[0], escalator.Marker(tt.reason, e.head, 1)), comments[0])
			assert.Equal(t, 1, e.record().Done[tt.reason].Epoch)
		})
	}
}

// TestEscalator_ForgetsClosedPRs: the escalator's record of a PR goes when
// it learns the PR was closed or merged, and the bucket's key count goes
// back down to none; a dry run's PRMerged (nothing merged) keeps it.
func TestEscalator_ForgetsClosedPRs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(e *env) events.Data
		gone bool
	}{
		{name: "closed", gone: true, end: func(e *env) events.Data {
			return &events.Closed{Base: events.Base{PR: e.pr, HeadSHA: e.head}}
		}},
		{name: "merged", gone: true, end: func(e *env) events.Data {
			return &events.Merged{Base: events.Base{PR: e.pr, HeadSHA: e.head}, MergeSHA: e.head}
		}},
		{name: "a dry run's merge", end: func(e *env) events.Data {
			return &events.Merged{Base: events.Base{PR: e.pr, HeadSHA: e.head}, DryRun: true}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start(config())
			e.request(events.ReasonChecksFailed, "1")
			e.waitSettled(1)
			assert.Equal(t, []string{escalator.RecordKey(e.pr)}, e.keys(), "the record; the claim is released")

			e.emitEvent(tt.end(e), "end")
			e.waitSettled(2)
			if !tt.gone {
				assert.Len(t, e.keys(), 1)
				return
			}
			assert.Empty(t, e.keys())
			assert.Empty(t, e.record().Done)
		})
	}
}

// TestEscalator_RetriesOnItsOwnBackoff: PRLOOP_ESCALATION_RETRY_BACKOFF
// sets the waits between tries of a failing escalation. GitHub refuses the
// label three times; with 10 ms waits the fourth delivery escalates at
// once, where the default waits (1 s, 5 s, 30 s) would take 36 s.
func TestEscalator_RetriesOnItsOwnBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: "/labels$", Kind: ghsim.FaultForbidden, Times: 3})
	e.start(config(func(c *escalator.Config) { c.RetryBackoff = []time.Duration{10 * time.Millisecond} }))
	e.request(events.ReasonMaxFixCycles, "1")

	esc := e.rec.Wait(t, e.pr, events.TypeEscalated, 15*time.Second).Data.(*events.Escalated)
	assert.Equal(t, events.ReasonMaxFixCycles, esc.Reason)
	assert.Equal(t, 3, e.sim.FaultCounts()[ghsim.FaultForbidden], "the label was refused three times first")
}
