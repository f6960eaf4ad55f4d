package events_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

var pr = ghref.PR{Owner: "Acme", Repo: "socket.io", Number: 42}

func allTypes(pr ghref.PR) []events.Data {
	b := events.Base{PR: pr, HeadSHA: "abc123"}
	return []events.Data{
		&events.WatchRequested{Base: b}, &events.ReviewPending{Base: b, Status: events.StatusPending},
		&events.ReviewInProgress{Base: b, Status: events.StatusInProgress}, &events.FeedbackReceived{Base: b, Status: events.StatusChangesRequested},
		&events.FeedbackAddressed{Base: b, FixCycle: 1}, &events.ReviewApproved{Base: b, Status: events.StatusApproved},
		&events.ReviewTimeout{Base: b, Reason: events.ReasonReviewTimeout}, &events.MergeQueued{Base: b, Position: 1}, &events.MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci"}},
		&events.Merged{Base: b, MergeSHA: "m"}, &events.MergeFailed{Base: b, Reason: events.ReasonChecksFailed},
		&events.Closed{Base: b}, &events.EscalationRequested{Base: b, Reason: events.ReasonFeedbackFailed, Severity: events.SeverityBlocking},
		&events.Escalated{Base: b, Reason: events.ReasonFeedbackFailed, Severity: events.SeverityBlocking},
	}
}

// collector records what a handler saw.
type collector struct {
	mu  sync.Mutex
	ids []string
}

func (c *collector) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *collector) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// runConsumer runs Consume in the background until the test ends.
func runConsumer(t *testing.T, js events.JetStreamConsumer, cfg events.ConsumerConfig, h events.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- events.Consume(ctx, js, cfg, h) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("Consume did not return after cancel")
		}
	})
}

func TestConsume_EveryTypeOnceDespiteDuplicatePublish(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx := t.Context()
	em := events.NewEmitter(conn.JS, "test")

	var want []string
	for _, d := range allTypes(pr) {
		e, dup, err := em.Emit(ctx, d, "abc123", "1")
		require.NoError(t, err)
		require.False(t, dup)
		want = append(want, e.ID())
		// A retried publish of the same occurrence is dropped by JetStream.
		_, dup, err = em.Emit(ctx, d, "abc123", "1")
		require.NoError(t, err)
		require.True(t, dup, "second publish of %s should be a duplicate", d.EventType())
	}

	got := &collector{}
	var bad atomic.Int32
	runConsumer(t, conn.JS, events.ConsumerConfig{Durable: "all", Types: events.Types}, func(_ context.Context, m *events.Msg) error {
		if !m.Data.Ref().Same(pr) || m.Event.Type() != string(m.Data.EventType()) {
			bad.Add(1)
		}
		got.add(m.Event.ID())
		return nil
	})
	require.Eventually(t, func() bool { return len(got.list()) >= len(want) }, 10*time.Second, 20*time.Millisecond)

	// Nothing more arrives: the consumer has no pending or unacked messages.
	cons, err := conn.JS.Consumer(ctx, events.StreamName, "all")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, want, got.list())
	assert.Zero(t, bad.Load())
}

func TestConsume_FilterByType(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	em := events.NewEmitter(conn.JS, "test")
	for _, d := range allTypes(pr) {
		_, _, err := em.Emit(t.Context(), d, "x")
		require.NoError(t, err)
	}
	got := &collector{}
	runConsumer(t, conn.JS, events.ConsumerConfig{Durable: "merger", Types: []events.Type{events.TypeReviewApproved}}, func(_ context.Context, m *events.Msg) error {
		got.add(m.Event.Type())
		return nil
	})
	require.Eventually(t, func() bool { return len(got.list()) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"PRReviewApproved"}, got.list())
}

func TestConsume_RetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx := t.Context()
	_, _, err := events.NewEmitter(conn.JS, "test").Emit(ctx, &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}, "1")
	require.NoError(t, err)

	var calls atomic.Int32
	runConsumer(t, conn.JS, events.ConsumerConfig{
		Durable: "flaky", Types: []events.Type{events.TypeReviewApproved},
		MaxDeliver: 3, Backoff: []time.Duration{10 * time.Millisecond},
	}, func(context.Context, *events.Msg) error {
		calls.Add(1)
		return errors.New("github is down")
	})

	dlq := waitDLQ(t, conn.JS, "flaky")
	assert.Equal(t, int32(3), calls.Load(), "delivered MaxDeliver times")
	assert.Equal(t, "github is down", dlq.Header.Get(events.HeaderDLQReason))
	assert.Equal(t, "3", dlq.Header.Get(events.HeaderDLQDeliveries))
	assert.Equal(t, events.Subject(pr, events.TypeReviewApproved), dlq.Header.Get(events.HeaderDLQSubject))
}

func TestConsume_PermanentErrorDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr}}, "1")
	require.NoError(t, err)
	var calls atomic.Int32
	runConsumer(t, conn.JS, events.ConsumerConfig{Durable: "strict", Types: []events.Type{events.TypeReviewApproved}}, func(context.Context, *events.Msg) error {
		calls.Add(1)
		return events.Permanent(errors.New("PR belongs to no watched repo"))
	})
	dlq := waitDLQ(t, conn.JS, "strict")
	assert.Equal(t, int32(1), calls.Load())
	assert.Contains(t, dlq.Header.Get(events.HeaderDLQReason), "no watched repo")
}

func TestConsume_MalformedMessageDeadLettered(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	m := nats.NewMsg(events.Subject(pr, events.TypeReviewApproved))
	m.Data = []byte(`{"specversion":"1.0","type":"PRReviewApproved"`)
	_, err := conn.JS.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	var calls atomic.Int32
	runConsumer(t, conn.JS, events.ConsumerConfig{Durable: "robust", Types: []events.Type{events.TypeReviewApproved}}, func(context.Context, *events.Msg) error {
		calls.Add(1)
		return nil
	})
	dlq := waitDLQ(t, conn.JS, "robust")
	assert.Zero(t, calls.Load(), "handler never sees a malformed event")
	assert.Contains(t, dlq.Header.Get(events.HeaderDLQReason), "malformed event")
	assert.Equal(t, m.Data, dlq.Data)
}

func TestConsume_HeartbeatPreventsRedelivery(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.FeedbackReceived{Base: events.Base{PR: pr}}, "1")
	require.NoError(t, err)

	var calls atomic.Int32
	release := make(chan struct{})
	runConsumer(t, conn.JS, events.ConsumerConfig{
		// The heartbeat comes every AckWait/3: with 300 ms, two suites on
		// two cores delayed it past the ack wait. 2 s still shows it.
		Durable: "slow", Types: []events.Type{events.TypeFeedbackReceived}, Concurrency: 2,
		AckWait: 2 * time.Second,
	}, func(ctx context.Context, _ *events.Msg) error {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	// Hold the handler for several ack waits; without the InProgress
	// heartbeat JetStream would hand the message to the second worker.
	cons, err := conn.JS.Consumer(t.Context(), events.StreamName, "slow")
	require.NoError(t, err)
	deadline := time.Now().Add(6 * time.Second)
	redelivered := 0
	require.Eventually(t, func() bool {
		if info, err := cons.Info(t.Context()); err == nil {
			redelivered = max(redelivered, info.NumRedelivered)
		}
		return time.Now().After(deadline)
	}, 15*time.Second, 50*time.Millisecond)
	require.Zero(t, redelivered, "redelivered while the handler was working")
	close(release)
	require.Eventually(t, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumAckPending == 0
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, int32(1), calls.Load())
}

func waitDLQ(t *testing.T, js jetstream.JetStream, durable string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := t.Context()
	stream, err := js.Stream(ctx, events.DLQStreamName)
	require.NoError(t, err)
	var msg *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, events.DLQPrefix+"."+durable)
		if err != nil {
			return false
		}
		msg = m
		return true
	}, 15*time.Second, 20*time.Millisecond)
	return msg
}

// observed is a ConsumeObserver that records what it is told.
type observed struct {
	mu          sync.Mutex
	delivery    []string
	handled     []string
	panics      []string
	deadLetters map[string]uint64
	started     []string
}

func (o *observed) Panicked(durable string, t events.Type) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.panics = append(o.panics, fmt.Sprintf("%s %s", durable, t))
}

func (o *observed) DeadLetters(durable string, n uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deadLetters == nil {
		o.deadLetters = map[string]uint64{}
	}
	o.deadLetters[durable] = n
}

func (o *observed) dlq(durable string) (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, ok := o.deadLetters[durable]
	return n, ok
}

func (o *observed) panicked() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.panics...)
}

func (o *observed) Delivered(durable string, t events.Type, delivered uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delivery = append(o.delivery, fmt.Sprintf("%s %s #%d", durable, t, delivered))
}

func (o *observed) Handled(durable string, t events.Type, outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		outcome += " (negative duration)"
	}
	o.handled = append(o.handled, fmt.Sprintf("%s %s %s", durable, t, outcome))
}

func (o *observed) Started(durable string, t events.Type, lag time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = append(o.started, fmt.Sprintf("%s %s", durable, t))
	if lag < 0 || lag > time.Minute {
		o.started = append(o.started, fmt.Sprintf("lag %v out of range", lag))
	}
}

func (o *observed) lists() (delivery, handled []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.delivery...), append([]string(nil), o.handled...)
}

// TestConsume_ObserverSeesDeliveriesAndOutcomes: a handler that fails once
// and then succeeds shows as a delivery, a retry, a redelivery and an ack;
// an undecodable message as a dead letter of no type.
func TestConsume_ObserverSeesDeliveriesAndOutcomes(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr}}, "1")
	require.NoError(t, err)
	bad := nats.NewMsg(events.Subject(pr, events.TypeReviewApproved))
	bad.Data = []byte(`not json`)
	_, err = conn.JS.PublishMsg(t.Context(), bad)
	require.NoError(t, err)

	obs := &observed{}
	var calls atomic.Int32
	runConsumer(t, conn.JS, events.ConsumerConfig{
		Durable: "observed", Types: []events.Type{events.TypeReviewApproved},
		Backoff: []time.Duration{10 * time.Millisecond}, Observer: obs,
	}, func(context.Context, *events.Msg) error {
		if calls.Add(1) == 1 {
			return errors.New("github is down")
		}
		return nil
	})
	require.Eventually(t, func() bool { _, h := obs.lists(); return len(h) >= 3 }, 10*time.Second, 10*time.Millisecond)
	delivery, handled := obs.lists()
	// The undecodable message may come before or after the redelivery.
	assert.ElementsMatch(t, []string{"observed PRReviewApproved #1", "observed PRReviewApproved #2", "observed  #1"}, delivery)
	assert.ElementsMatch(t, []string{"observed PRReviewApproved retry", "observed PRReviewApproved ack", "observed  dead_letter"}, handled)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, []string{"observed PRReviewApproved"}, obs.started, "the lag of a first delivery, measured once")
}

// TestConsume_PanicIsRetriedThenDeadLettered: a handler that panics on one
// PR's event neither stops the consumer (the other PRs' events are handled)
// nor loses the event: it is retried and dead-lettered after MaxDeliver,
// with the panic as its reason, and counted.
func TestConsume_PanicIsRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	em := events.NewEmitter(conn.JS, "test")
	poison := ghref.PR{Owner: "acme", Repo: "poison", Number: 1}
	var want []string
	for i, p := range []ghref.PR{poison, {Owner: "acme", Repo: "fine", Number: 1}, {Owner: "acme", Repo: "fine", Number: 2}} {
		e, _, err := em.Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: p}}, strconv.Itoa(i))
		require.NoError(t, err)
		if i > 0 {
			want = append(want, e.ID())
		}
	}
	obs := &observed{}
	var poisonCalls atomic.Int32
	got := &collector{}
	runConsumer(t, conn.JS, events.ConsumerConfig{
		Durable: "panicky", Types: []events.Type{events.TypeReviewApproved},
		MaxDeliver: 3, Backoff: []time.Duration{10 * time.Millisecond}, Observer: obs,
	}, func(_ context.Context, m *events.Msg) error {
		if m.Data.Ref().Same(poison) {
			poisonCalls.Add(1)
			var nilMap map[string]int
			nilMap["boom"]++ // a real bug: assignment to a nil map
		}
		got.add(m.Event.ID())
		return nil
	})
	dlq := waitDLQ(t, conn.JS, "panicky")
	require.Eventually(t, func() bool { return len(got.list()) == len(want) }, 10*time.Second, 10*time.Millisecond)
	assert.ElementsMatch(t, want, got.list(), "the other events were handled")
	assert.Equal(t, int32(3), poisonCalls.Load(), "the panicking event was retried up to MaxDeliver")
	assert.Contains(t, dlq.Header.Get(events.HeaderDLQReason), "handler panicked: assignment to entry in nil map")
	assert.Equal(t, events.Subject(poison, events.TypeReviewApproved), dlq.Header.Get(events.HeaderDLQSubject))
	assert.Equal(t, []string{"panicky PRReviewApproved", "panicky PRReviewApproved", "panicky PRReviewApproved"}, obs.panicked())
	require.Eventually(t, func() bool { n, _ := obs.dlq("panicky"); return n == 1 }, 10*time.Second, 10*time.Millisecond,
		"the dead letter is counted")
}

// refusingDLQ is a JetStream whose first publishes to the dead-letter
// subjects fail, as when PRLOOP_DLQ is briefly unavailable.
type refusingDLQ struct {
	jetstream.JetStream
	refuse atomic.Int32
}

func (r *refusingDLQ) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if strings.HasPrefix(m.Subject, events.DLQPrefix+".") && r.refuse.Add(-1) >= 0 {
		return nil, errors.New("nats: no response from stream")
	}
	return r.JetStream.PublishMsg(ctx, m, opts...)
}

// TestConsume_DeadLetterPublishFailureKeepsTheMessage: when storing the
// dead letter fails for a moment, it is tried again, holding the message,
// until it is stored; the handler is not run again for a message it gave
// up on.
func TestConsume_DeadLetterPublishFailureKeepsTheMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		permanent bool
		refusals  int32
		// calls are the handler's runs, deliveries the delivery whose
		// dead letter was stored.
		calls      int32
		deliveries string
	}{
		{name: "retries exhausted", refusals: 3, calls: 2, deliveries: "2"},
		{name: "permanent error", permanent: true, refusals: 2, calls: 1, deliveries: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := natstest.Start(t)
			_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr}}, "1")
			require.NoError(t, err)
			js := &refusingDLQ{JetStream: conn.JS}
			js.refuse.Store(tc.refusals)
			var calls atomic.Int32
			runConsumer(t, js, events.ConsumerConfig{
				Durable: "unlucky", Types: []events.Type{events.TypeReviewApproved},
				MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond},
			}, func(context.Context, *events.Msg) error {
				if calls.Add(1); tc.permanent {
					return events.Permanent(errors.New("unknown repository"))
				}
				return errors.New("github is down")
			})
			dlq := waitDLQ(t, conn.JS, "unlucky")
			assert.Equal(t, tc.deliveries, dlq.Header.Get(events.HeaderDLQDeliveries))
			assert.Equal(t, events.Subject(pr, events.TypeReviewApproved), dlq.Header.Get(events.HeaderDLQSubject))
			assert.Less(t, js.refuse.Load(), int32(0), "every refusal was used")
			cons, err := conn.JS.Consumer(t.Context(), events.StreamName, "unlucky")
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				info, err := cons.Info(t.Context())
				return err == nil && info.NumAckPending == 0 && info.NumPending == 0
			}, 10*time.Second, 10*time.Millisecond, "the message was terminated once stored")
			assert.Equal(t, tc.calls, calls.Load(), "the handler did not run again once it gave up")
		})
	}
}

// retryLater is a handler error that knows when retrying can succeed, as a
// GitHub rate limit knows its reset.
type retryLater struct{ at time.Time }

func (r retryLater) Error() string      { return "rate limited until " + r.at.Format(time.RFC3339Nano) }
func (r retryLater) RetryAt() time.Time { return r.at }

// A spent GitHub quota is no fault of the event: the delivery waits for the
// known retry time instead of counting a failure, so an outage longer than
// the backoff sends nothing to the dead-letter stream (RELIABILITY.md, seed
// 31). A retry time past MaxDefer is an ordinary failure.
func TestConsume_KnownRetryTimeIsWaitedNotCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		wait       time.Duration
		failures   int32
		deadLetter bool
	}{
		{name: "within MaxDefer: waited in the delivery, then handled", wait: 30 * time.Millisecond, failures: 5},
		{name: "past MaxDefer: counted, dead-lettered at MaxDeliver", wait: time.Hour, failures: 100, deadLetter: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := natstest.Start(t)
			_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}, "1")
			require.NoError(t, err)

			var calls atomic.Int32
			var seen collector
			runConsumer(t, conn.JS, events.ConsumerConfig{
				Durable: "limited", Types: []events.Type{events.TypeReviewApproved},
				MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, MaxDefer: time.Minute,
			}, func(_ context.Context, m *events.Msg) error {
				seen.add(strconv.FormatUint(m.Delivered, 10))
				if calls.Add(1) <= tc.failures {
					return fmt.Errorf("get pull: %w", retryLater{at: time.Now().Add(tc.wait)})
				}
				return nil
			})

			if tc.deadLetter {
				waitDLQ(t, conn.JS, "limited")
				assert.Equal(t, []string{"1", "2"}, seen.list(), "each failure counted")
				return
			}
			require.Eventually(t, func() bool { return calls.Load() == tc.failures+1 }, 15*time.Second, 10*time.Millisecond)
			assert.Equal(t, []string{"1", "1", "1", "1", "1", "1"}, seen.list(), "every wait within the first delivery")
			require.Eventually(t, func() bool {
				cons, err := conn.JS.Consumer(t.Context(), events.StreamName, "limited")
				if err != nil {
					return false
				}
				info, err := cons.Info(t.Context())
				return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == 1
			}, 15*time.Second, 10*time.Millisecond, "acked")
			n, err := events.CountDeadLetters(t.Context(), conn.JS, "limited")
			require.NoError(t, err)
			assert.Zero(t, n, "nothing dead-lettered")
		})
	}
}

// TestConsume_InterruptedDeliveriesAreNotTheMessagesFault: deliveries whose
// process died in the handler (here: fetched and never answered) do not
// dead-letter a message that then succeeds, up to MaxInterrupted past
// MaxDeliver; past that the message is taken to kill its process and is
// dead-lettered without running the handler (a chaos run killed the
// escalator in the same escalation six times, and a good event went to
// the dead letters).
func TestConsume_InterruptedDeliveriesAreNotTheMessagesFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		died       int
		deadLetter bool
	}{
		{name: "past MaxDeliver, within MaxInterrupted: handled", died: 4},
		{name: "past MaxDeliver+MaxInterrupted: dead-lettered unrun", died: 5, deadLetter: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := natstest.Start(t)
			_, _, err := events.NewEmitter(conn.JS, "test").Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}, "1")
			require.NoError(t, err)
			cfg := events.ConsumerConfig{
				Durable: "killed", Types: []events.Type{events.TypeReviewApproved},
				MaxDeliver: 2, MaxInterrupted: 3, AckWait: 200 * time.Millisecond, Backoff: []time.Duration{10 * time.Millisecond},
			}
			cons, err := events.EnsureConsumer(t.Context(), conn.JS, cfg)
			require.NoError(t, err)
			for i := range tc.died {
				// A process that took the message and died: no answer, so
				// the server redelivers it after AckWait.
				m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
				require.NoError(t, err, "delivery %d", i+1)
				md, err := m.Metadata()
				require.NoError(t, err)
				require.Equal(t, uint64(i+1), md.NumDelivered)
			}
			var calls atomic.Int32
			var delivered atomic.Uint64
			runConsumer(t, conn.JS, cfg, func(_ context.Context, m *events.Msg) error {
				calls.Add(1)
				delivered.Store(m.Delivered)
				return nil
			})
			if tc.deadLetter {
				dlq := waitDLQ(t, conn.JS, "killed")
				assert.Equal(t, "6", dlq.Header.Get(events.HeaderDLQDeliveries))
				assert.Contains(t, dlq.Header.Get(events.HeaderDLQReason), "not handled in 5 deliveries")
				assert.Zero(t, calls.Load(), "the handler is not run again")
				return
			}
			require.Eventually(t, func() bool { return calls.Load() == 1 }, 15*time.Second, 10*time.Millisecond)
			assert.Equal(t, uint64(tc.died+1), delivered.Load())
			require.Eventually(t, func() bool {
				info, err := cons.Info(t.Context())
				return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == 1
			}, 15*time.Second, 10*time.Millisecond, "acked")
			n, err := events.CountDeadLetters(t.Context(), conn.JS, "killed")
			require.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

// A service stopped while its consumer is still being created is shut
// down, not failed: TestMerger_StaleApprovalNotMerged's replica was
// stopped within a second of starting and reported "ensure consumer
// merger: context canceled" as its error.
func TestConsume_ShutdownBeforeTheConsumerExistsIsNotAnError(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := events.Consume(ctx, conn.JS, events.ConsumerConfig{Durable: "merger", Types: []events.Type{events.TypeReviewApproved}},
		func(context.Context, *events.Msg) error { return nil })
	assert.NoError(t, err)
}
