package poller_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
)

// TestPoller_MetricsFollowALifecycle watches a PR to approval and reads the
// poller's metrics back: one transition per published event, by type; the
// watch request consumed and acked; evaluations by trigger; unchanged and
// changed probes; and a failing probe counted as an error.
func TestPoller_MetricsFollowALifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(e.config())
	e.watchPending()
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "bob", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)

	value := func(name string, labels ...string) func() float64 {
		return func() float64 { return metricstest.Value(e.reg, name, labels...) }
	}
	approved := value("prloop_transitions_total", "type", "PRReviewApproved")
	require.Eventually(t, func() bool { return approved() == 1 }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 1.0, value("prloop_transitions_total", "type", "PRReviewPending")())
	assert.Equal(t, 2.0, value("prloop_transitions_total")(), "nothing else was published")
	assert.Equal(t, float64(e.rec.Count(e.pr, events.TypeReviewApproved)), approved())

	assert.Equal(t, 1.0, value("prloop_consumer_deliveries_total", "consumer", "poller", "type", "PRWatchRequested")())
	assert.Equal(t, 1.0, value("prloop_consumer_handled_total", "consumer", "poller", "type", "PRWatchRequested", "outcome", "ack")())
	assert.Zero(t, value("prloop_consumer_redeliveries_total")())
	assert.GreaterOrEqual(t, value("prloop_poller_evaluations_total", "trigger", "kick", "result", "ok")(), 1.0, "the watch request kicked")
	assert.GreaterOrEqual(t, value("prloop_poller_evaluations_total", "trigger", "probe", "result", "ok")(), 1.0, "the probe saw the reaction")
	assert.GreaterOrEqual(t, value("prloop_poller_probes_total", "result", "changed")(), 1.0)
	unchanged := value("prloop_poller_probes_total", "result", "unchanged")
	require.Eventually(t, func() bool { return unchanged() >= 2 }, waitFor, 10*time.Millisecond, "quiet probes are unchanged")
	assert.Zero(t, value("prloop_poller_probes_total", "result", "error")())

	e.sim.InjectFault(ghsim.Fault{Method: http.MethodGet, Path: "/pulls$", Kind: ghsim.FaultForbidden})
	failed := value("prloop_poller_probes_total", "result", "error")
	require.Eventually(t, func() bool { return failed() == 1 }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 2.0, value("prloop_transitions_total")(), "a failed probe publishes nothing")
}
