package escalator_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app/apptest"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/services/escalator"
)

// waitFor bounds each wait: it catches a hang, it times nothing.
const waitFor = time.Minute

// env is an escalator test world: embedded NATS, the GitHub simulator with
// one open PR, the escalator's bucket and a recorder of every event.
type env struct {
	t *testing.T
	*simtest.World
	sim    *ghsim.Sim
	conn   *natsx.Conn
	claims *kvlease.Bucket
	rec    *eventstest.Recorder
	pr     ghref.PR
	head   string
	emit   *events.Emitter
	// reg holds the metrics of every replica.
	reg *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := simtest.Start(t, nil)
	head, err := w.Sim.PushCommit(w.Repo, "feat", "agent", map[string]string{"f.txt": "f\n"}, "Add f")
	require.NoError(t, err)
	pr, err := w.Sim.OpenPR(w.Repo, ghsim.PRInput{Title: "Add f", Head: "feat", Author: "agent"})
	require.NoError(t, err)
	conn := natstest.Start(t)
	_, err = escalator.EnsureClaims(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	claims, err := kvlease.OpenBucket(t.Context(), conn.JS, escalator.ClaimBucket)
	require.NoError(t, err)
	return &env{
		t: t, World: w, sim: w.Sim, conn: conn, claims: claims, rec: eventstest.Record(t, conn.JS),
		pr: pr, head: head, emit: events.NewEmitter(conn.JS, "test"), reg: metrics.NewRegistry(),
	}
}

// config is an escalator configuration for tests.
func config(mut ...func(*escalator.Config)) escalator.Config {
	cfg := escalator.Config{
		Label: escalator.DefaultLabel, WebhookRetries: 3, WebhookBackoff: 10 * time.Millisecond,
		WebhookTimeout: 2 * time.Second, ClaimTTL: 30 * time.Second, GitHubLogin: simtest.Login,
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// start runs an escalator replica with its own NATS connection and GitHub
// client until the returned stop is called or the test ends.
func (e *env) start(cfg escalator.Config) (stop func()) {
	e.t.Helper()
	conn := natstest.Connect(e.t, e.conn)
	claims, err := kvlease.OpenBucket(e.t.Context(), conn.JS, escalator.ClaimBucket)
	require.NoError(e.t, err)
	return apptest.Run(e.t, escalator.New(cfg, escalator.Deps{
		GitHub: e.Client(e.t), JS: conn.JS, Claims: claims, Webhook: escalator.WebhookOf(cfg),
		Log: slog.New(slog.DiscardHandler), Metrics: metrics.NewEscalator(e.reg),
	}))
}

// request publishes an escalation request; id tells apart publishes of the
// same request.
func (e *env) request(reason events.Reason, id string, mut ...func(*events.EscalationRequested)) {
	e.t.Helper()
	d := &events.EscalationRequested{
		Base: events.Base{PR: e.pr, HeadSHA: e.head}, Reason: reason, Severity: events.SeverityBlocking,
		FixCycle: 3, LastError: "agent exited with status 1", Actor: "feedback",
	}
	for _, m := range mut {
		m(d)
	}
	_, _, err := e.emit.Emit(e.t.Context(), d, string(reason), id)
	require.NoError(e.t, err)
}

// emitEvent publishes d with id parts parts, as another service would.
func (e *env) emitEvent(d events.Data, parts ...string) {
	e.t.Helper()
	_, _, err := e.emit.Emit(e.t.Context(), d, parts...)
	require.NoError(e.t, err)
}

// resolve is the poller's part when it sees the label gone: it announces
// the new escalation epoch. It returns once the escalator recorded it.
func (e *env) resolve(epoch int) {
	e.t.Helper()
	e.emitEvent(&events.EscalationResolved{Base: events.Base{PR: e.pr, HeadSHA: e.head}, Epoch: epoch}, events.EpochPart(epoch))
	require.Eventually(e.t, func() bool { return e.record().Resolved == epoch }, waitFor, 10*time.Millisecond,
		"the escalator never recorded the resolution of epoch %d", epoch)
}

// record reads the escalator's record of the PR (empty when there is none).
func (e *env) record() escalator.Record {
	e.t.Helper()
	var rec escalator.Record
	kv, err := e.claims.Get(e.t.Context(), escalator.RecordKey(e.pr))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec
	}
	require.NoError(e.t, err)
	require.NoError(e.t, json.Unmarshal(kv.Value(), &rec))
	return rec
}

// keys returns the keys in the escalator's bucket.
func (e *env) keys() []string {
	e.t.Helper()
	keys, err := e.claims.KeysMatching(e.t.Context())
	require.NoError(e.t, err)
	return keys
}

// metric reads a metric of the replicas (see metricstest.Value).
func (e *env) metric(name string, labels ...string) float64 {
	return metricstest.Value(e.reg, name, labels...)
}

// comments returns the bodies of the PR's conversation comments.
func (e *env) comments() []string {
	e.t.Helper()
	cs, err := e.Client(e.t).ListIssueComments(e.t.Context(), e.pr, time.Time{})
	require.NoError(e.t, err)
	var out []string
	for _, c := range cs {
		out = append(out, c.GetBody())
	}
	return out
}

// escalationComments counts the comments carrying an escalation marker for
// reason, of any epoch.
func (e *env) escalationComments(reason events.Reason) int {
	prefix := strings.TrimSuffix(escalator.Marker(reason, e.head, 0), " -->")
	n := 0
	for _, c := range e.comments() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// waitSettled waits until the escalator acked every event it received.
func (e *env) waitSettled(delivered int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		c, err := e.conn.JS.Consumer(e.t.Context(), events.StreamName, escalator.Name)
		if err != nil {
			return false
		}
		info, err := c.Info(e.t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream > 0 &&
			int(info.Delivered.Consumer) >= delivered
	}, waitFor, 10*time.Millisecond, "escalator never settled")
}
