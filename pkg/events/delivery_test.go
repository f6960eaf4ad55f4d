package events

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMsg is a delivered message that records how it was settled.
type fakeMsg struct {
	jetstream.Msg
	subject string
	data    []byte
	header  nats.Header
	md      jetstream.MsgMetadata

	mu         sync.Mutex
	acks       int
	naks       []time.Duration
	terms      []string
	inProgress int
}

func newFakeMsg(t *testing.T, d Data, subject string, delivered uint64) *fakeMsg {
	t.Helper()
	e, err := New("test", d, time.Now())
	require.NoError(t, err)
	m, err := Message(e)
	require.NoError(t, err)
	if subject == "" {
		subject = m.Subject
	}
	m.Header.Set("X-Trace", "t1")
	return &fakeMsg{subject: subject, data: m.Data, header: m.Header, md: jetstream.MsgMetadata{
		NumDelivered: delivered, Sequence: jetstream.SequencePair{Stream: 17}, Timestamp: time.Now().Add(-time.Second),
	}}
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { md := m.md; return &md, nil }
func (m *fakeMsg) Data() []byte                              { return m.data }
func (m *fakeMsg) Subject() string                           { return m.subject }
func (m *fakeMsg) Headers() nats.Header                      { return m.header }

func (m *fakeMsg) DoubleAck(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acks++
	return nil
}

func (m *fakeMsg) NakWithDelay(d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.naks = append(m.naks, d)
	return nil
}

func (m *fakeMsg) TermWithReason(r string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.terms = append(m.terms, r)
	return nil
}

func (m *fakeMsg) InProgress() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inProgress++
	return nil
}

func (m *fakeMsg) heartbeats() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inProgress
}

// fakeDLQ stores dead letters, or refuses them.
type fakeDLQ struct {
	refuse bool
	mu     sync.Mutex
	stored []*nats.Msg
	// opts counts each publish's options (the message id).
	opts []int
}

func (p *fakeDLQ) PublishMsg(_ context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if p.refuse {
		return nil, errors.New("nats: no response from stream")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stored, p.opts = append(p.stored, m), append(p.opts, len(opts))
	return &jetstream.PubAck{}, nil
}

// recorder is a ConsumeObserver and LagObserver that lists its calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(s string)               { r.mu.Lock(); defer r.mu.Unlock(); r.calls = append(r.calls, s) }
func (r *recorder) Panicked(_ string, t Type)  { r.add("panicked " + string(t)) }
func (r *recorder) DeadLetters(string, uint64) {}
func (r *recorder) Delivered(_ string, t Type, n uint64) {
	r.add("delivered " + string(t) + " #" + string(rune('0'+n)))
}
func (r *recorder) Handled(_ string, t Type, outcome string, _ time.Duration) {
	r.add("handled " + string(t) + " " + outcome)
}
func (r *recorder) Started(_ string, t Type, lag time.Duration) {
	if lag > 0 {
		r.add("started " + string(t))
	}
}

// retryAtErr is an error that knows when retrying can succeed.
type retryAtErr struct{ at time.Time }

func (r retryAtErr) Error() string      { return "rate limited" }
func (r retryAtErr) RetryAt() time.Time { return r.at }

var approval = &ReviewApproved{Base: Base{PR: testPR, HeadSHA: "abc"}, Status: StatusApproved}

// testDelivery is a delivery of raw with a test configuration.
func testDelivery(t *testing.T, raw jetstream.Msg, stopping context.Context, js Publisher, obs ConsumeObserver) *delivery {
	t.Helper()
	c := ConsumerConfig{
		Durable: "unit", Types: Types, AckWait: 30 * time.Millisecond, MaxDeliver: 3, MaxInterrupted: 2,
		Backoff: []time.Duration{time.Second, time.Minute}, MaxDefer: time.Minute, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}.withDefaults()
	if stopping == nil {
		stopping = t.Context()
	}
	if js == nil {
		js = &fakeDLQ{}
	}
	return newDelivery(t.Context(), stopping, js, c, c.Logger, raw)
}

func TestDelivery_DecodeRefusesWhatItsSubjectDoesNotSay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		subject string
		garbage bool
		wantErr bool
	}{
		{name: "the subject's event", wantErr: false},
		{name: "an approval on an escalation's subject", subject: Subject(testPR, TypeEscalated), wantErr: true},
		{name: "not an event", garbage: true, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := newFakeMsg(t, approval, tc.subject, 1)
			if tc.garbage {
				raw.data = []byte("{")
			}
			d := testDelivery(t, raw, nil, nil, nil)
			msg, err := d.decode()
			if tc.wantErr {
				require.Error(t, err)
				assert.Empty(t, d.typ, "an undecoded message has no type")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, TypeReviewApproved, d.typ)
			assert.Equal(t, approval, msg.Data)
			assert.Equal(t, uint64(17), msg.Seq)
		})
	}
}

func TestDelivery_AdmitBoundsInterruptedDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		delivered uint64
		wantErr   bool
	}{
		{name: "first delivery", delivered: 1},
		{name: "past MaxDeliver, interrupted", delivered: 4},
		{name: "the last interrupted delivery allowed", delivered: 5},
		{name: "one more: the message kills its process", delivered: 6, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := testDelivery(t, newFakeMsg(t, approval, "", tc.delivered), nil, nil, nil).admit()
			if tc.wantErr {
				require.ErrorContains(t, err, "not handled in 5 deliveries")
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestDelivery_RunHeartbeatsWhileTheHandlerWorks(t *testing.T) {
	t.Parallel()
	raw := newFakeMsg(t, approval, "", 1)
	d := testDelivery(t, raw, nil, nil, nil)
	_, err := d.run(func(context.Context, *Msg) error {
		require.Eventually(t, func() bool { return raw.heartbeats() >= 2 }, 5*time.Second, time.Millisecond)
		return nil
	}, &Msg{})
	require.NoError(t, err)
}

func TestDelivery_RunRecoversAPanic(t *testing.T) {
	t.Parallel()
	obs := &recorder{}
	d := testDelivery(t, newFakeMsg(t, approval, "", 1), nil, nil, obs)
	d.typ = TypeReviewApproved
	_, err := d.run(func(context.Context, *Msg) error { panic("boom") }, &Msg{})
	var p panicError
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "boom", p.value)
	assert.NotEmpty(t, p.stack)
	d.reportPanic(err)
	d.reportPanic(errors.New("an ordinary failure"))
	assert.Equal(t, []string{"panicked PRReviewApproved"}, obs.calls)
}

func TestDelivery_RunWaitsForAKnownRetryTime(t *testing.T) {
	t.Parallel()
	soon := func() error { return retryAtErr{at: time.Now().Add(20 * time.Millisecond)} }
	tests := []struct {
		name string
		// errs are the handler's results, call by call.
		errs      []func() error
		stopped   bool
		wantCalls int
		wantErr   bool
		wantDefer bool
	}{
		{name: "success", errs: []func() error{nil}, wantCalls: 1},
		{name: "an error without a retry time", errs: []func() error{func() error { return errors.New("down") }}, wantCalls: 1, wantErr: true},
		{name: "a permanent error with a retry time", errs: []func() error{func() error { return Permanent(soon()) }}, wantCalls: 1, wantErr: true},
		{name: "a retry time past MaxDefer", errs: []func() error{func() error { return retryAtErr{at: time.Now().Add(time.Hour)} }}, wantCalls: 1, wantErr: true},
		{name: "a retry time gone by", errs: []func() error{func() error { return retryAtErr{at: time.Now().Add(-time.Second)} }}, wantCalls: 1, wantErr: true},
		{name: "waited for, then success", errs: []func() error{soon, soon, nil}, wantCalls: 3},
		{name: "shutdown during the wait", errs: []func() error{func() error { return retryAtErr{at: time.Now().Add(time.Minute - time.Second)} }}, stopped: true, wantCalls: 1, wantErr: true, wantDefer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stopping, stop := context.WithCancel(t.Context())
			defer stop()
			if tc.stopped {
				stop()
			}
			d := testDelivery(t, newFakeMsg(t, approval, "", 1), stopping, nil, nil)
			calls := 0
			until, err := d.run(func(context.Context, *Msg) error {
				calls++
				if f := tc.errs[min(calls, len(tc.errs))-1]; f != nil {
					return f()
				}
				return nil
			}, &Msg{})
			assert.Equal(t, tc.wantCalls, calls)
			assert.Equal(t, tc.wantErr, err != nil, "err: %v", err)
			assert.Equal(t, tc.wantDefer, !until.IsZero())
		})
	}
}

func TestDelivery_SettleAcksNaksOrDeadLetters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		delivered uint64
		err       error
		deferFor  time.Duration
		want      string
		wantAcks  int
		wantNak   time.Duration
		wantTerm  bool
	}{
		{name: "success acks", delivered: 1, want: HandledAck, wantAcks: 1},
		{name: "a first failure naks with the first backoff", delivered: 1, err: errors.New("down"), want: HandledRetry, wantNak: time.Second},
		{name: "a second failure naks with the second", delivered: 2, err: errors.New("down"), want: HandledRetry, wantNak: time.Minute},
		{name: "the last delivery's failure dead-letters", delivered: 3, err: errors.New("down"), want: HandledDeadLetter, wantTerm: true},
		{name: "a permanent error dead-letters at once", delivered: 1, err: Permanent(errors.New("no such repository")), want: HandledDeadLetter, wantTerm: true},
		{name: "a wait cut by shutdown hands the message back for its retry time", delivered: 3, err: retryAtErr{}, deferFor: time.Hour, want: HandledRetry, wantNak: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := newFakeMsg(t, approval, "", tc.delivered)
			var deferredUntil time.Time
			if tc.deferFor > 0 {
				deferredUntil = time.Now().Add(tc.deferFor)
			}
			got := testDelivery(t, raw, nil, nil, nil).settle(tc.err, deferredUntil)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantAcks, raw.acks)
			if tc.wantNak > 0 {
				require.Len(t, raw.naks, 1)
				assert.InDelta(t, tc.wantNak, raw.naks[0], float64(10*time.Second))
			} else {
				assert.Empty(t, raw.naks)
			}
			assert.Equal(t, tc.wantTerm, len(raw.terms) == 1)
		})
	}
}

func TestDelivery_DeadLetterKeepsTheMessageUnlessTheCopyIsStored(t *testing.T) {
	t.Parallel()
	t.Run("stored", func(t *testing.T) {
		t.Parallel()
		raw, dlq := newFakeMsg(t, approval, "", 3), &fakeDLQ{}
		got := testDelivery(t, raw, nil, dlq, nil).deadLetter(errors.New("github is down"))
		assert.Equal(t, HandledDeadLetter, got)
		require.Len(t, dlq.stored, 1)
		m := dlq.stored[0]
		assert.Equal(t, DLQSubject("unit"), m.Subject)
		assert.Equal(t, []int{1}, dlq.opts, "published with its message id")
		assert.Equal(t, "github is down", m.Header.Get(HeaderDLQReason))
		assert.Equal(t, raw.subject, m.Header.Get(HeaderDLQSubject))
		assert.Equal(t, "3", m.Header.Get(HeaderDLQDeliveries))
		assert.Equal(t, "unit", m.Header.Get(HeaderDLQConsumer))
		assert.Equal(t, "t1", m.Header.Get("X-Trace"), "the original headers travel along")
		assert.Empty(t, m.Header.Get("Nats-Msg-Id"), "but not the original publish's instructions")
		assert.Equal(t, raw.data, m.Data)
		assert.Equal(t, []string{"github is down"}, raw.terms)
	})
	t.Run("refused while shutting down", func(t *testing.T) {
		t.Parallel()
		stopping, stop := context.WithCancel(t.Context())
		stop()
		raw := newFakeMsg(t, approval, "", 3)
		got := testDelivery(t, raw, stopping, &fakeDLQ{refuse: true}, nil).deadLetter(errors.New("github is down"))
		assert.Equal(t, HandledRetry, got)
		assert.Empty(t, raw.terms, "not terminated: the server redelivers it")
		assert.Equal(t, []time.Duration{time.Second}, raw.naks)
	})
}

func TestDelivery_HandleReportsEachDeliveryToTheObserver(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		subject   string
		delivered uint64
		handler   Handler
		want      []string
	}{
		{name: "acked", delivered: 1, handler: func(context.Context, *Msg) error { return nil },
			want: []string{"delivered PRReviewApproved #1", "started PRReviewApproved", "handled PRReviewApproved ack"}},
		{name: "a redelivery has no lag", delivered: 2, handler: func(context.Context, *Msg) error { return errors.New("down") },
			want: []string{"delivered PRReviewApproved #2", "handled PRReviewApproved retry"}},
		{name: "a forgery has no type", subject: Subject(testPR, TypeMerged), delivered: 1,
			want: []string{"delivered  #1", "handled  dead_letter"}},
		{name: "past the interrupted deliveries the handler does not run", delivered: 6,
			want: []string{"delivered PRReviewApproved #6", "handled PRReviewApproved dead_letter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs := &recorder{}
			h := tc.handler
			if h == nil {
				h = func(context.Context, *Msg) error { t.Error("the handler ran"); return nil }
			}
			testDelivery(t, newFakeMsg(t, approval, tc.subject, tc.delivered), nil, nil, obs).handle(h)
			assert.Equal(t, tc.want, obs.calls)
		})
	}
}
