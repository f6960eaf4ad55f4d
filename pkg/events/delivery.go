package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prloop/prloop/pkg/ctxtime"
)

// delivery is one message on its way through a consumer. handle runs its
// steps in order, one concern each: decode (and refuse a forged subject),
// admit (interrupted deliveries), run (heartbeat, recover, the wait for a
// known retry time), settle (ack, nak with backoff, dead letter) and the
// observer's reports (metrics) around them.
type delivery struct {
	c  ConsumerConfig
	js Publisher
	// ctx is the handler's; stopping is done when the consumer shuts
	// down, so a wait in a step hands the message back instead of going on.
	ctx, stopping context.Context
	log           *slog.Logger
	raw           jetstream.Msg
	// delivered counts deliveries of the message (1 on the first), seq is
	// its stream sequence, typ its event type once decoded ("" until then).
	delivered, seq uint64
	typ            Type
}

// newDelivery reads what the message's metadata says of its deliveries.
func newDelivery(ctx, stopping context.Context, js Publisher, c ConsumerConfig, log *slog.Logger, raw jetstream.Msg) *delivery {
	d := &delivery{c: c, js: js, ctx: ctx, stopping: stopping, log: log, raw: raw, delivered: 1}
	if md, err := raw.Metadata(); err == nil {
		d.delivered, d.seq = md.NumDelivered, md.Sequence.Stream
	}
	return d
}

// handle runs h on the delivery and acks, naks or dead-letters it; it
// returns the outcome (HandledAck, HandledRetry, HandledDeadLetter).
func (d *delivery) handle(h Handler) string {
	msg, err := d.decode()
	d.reportDelivered()
	if err == nil {
		err = d.admit()
	}
	if err != nil {
		return d.reportHandled(d.deadLetter(err), 0)
	}
	d.reportLag()
	start := time.Now()
	deferredUntil, err := d.run(h, msg)
	took := time.Since(start)
	d.reportPanic(err)
	return d.reportHandled(d.settle(err, deferredUntil), took)
}

// decode reads the event and refuses one whose body is not about what its
// subject says (checkSubject). On success the delivery knows its type and
// logs name the PR, type and id.
func (d *delivery) decode() (*Msg, error) {
	e, data, err := Decode(d.raw.Data())
	if err == nil {
		err = checkSubject(d.raw.Subject(), data)
	}
	if err != nil {
		return nil, err
	}
	d.typ = data.EventType()
	d.log = d.log.With("pr", data.Ref().String(), "type", e.Type(), "id", e.ID())
	return &Msg{Event: e, Data: data, Delivered: d.delivered, Seq: d.seq, raw: d.raw}, nil
}

// admit refuses a message delivered more than MaxDeliver+MaxInterrupted
// times. Deliveries past MaxDeliver come from handlers that never finished
// (a failing one is dead-lettered at MaxDeliver), or from a dead-letter
// stream unwritable for half a minute: this many mean the message kills
// its process, or that the stream stayed unwritable. Not running it again
// keeps it from crash-looping the service.
func (d *delivery) admit() error {
	if limit := d.c.MaxDeliver + d.c.MaxInterrupted; d.delivered > uint64(limit) {
		return fmt.Errorf("not handled in %d deliveries (its handler's process died in each, or its dead letter could not be stored)", limit)
	}
	return nil
}

// run calls h, heartbeating meanwhile so that JetStream does not redeliver
// a message still being worked on, with a panic recovered as an error. A
// known retry time (RetryAt) is waited for within this delivery, so that
// it never counts toward MaxDeliver; when the consumer stops during such a
// wait, run returns the time waited for as deferredUntil.
func (d *delivery) run(h Handler, msg *Msg) (deferredUntil time.Time, err error) {
	stop := heartbeat(d.raw, d.c.AckWait/3)
	defer stop()
	err = safeCall(d.ctx, h, msg)
	for err != nil && !IsPermanent(err) {
		at, ok := RetryAt(err)
		wait := time.Until(at)
		if !ok || wait <= 0 || wait > d.c.MaxDefer {
			return time.Time{}, err
		}
		d.log.Warn("handler must wait for a known retry time; this delivery waits (it counts as no failed delivery)", "err", err, "retry_in", wait.Round(time.Second), "delivered", d.delivered)
		if ctxtime.Sleep(d.stopping, wait) != nil {
			return at, err
		}
		err = safeCall(d.ctx, h, msg)
	}
	return time.Time{}, err
}

// settle ends the delivery by the handler's result: ack on success; hand
// the message back for when its retry time comes (deferredUntil, the
// consumer is stopping); dead-letter a permanent error or the last
// delivery's; otherwise nak with the backoff of this delivery.
func (d *delivery) settle(err error, deferredUntil time.Time) string {
	switch {
	case err == nil:
		// The ack gets its own deadline: the handler's context may already
		// be cancelled by shutdown, and finished work must still be acked.
		actx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 5*time.Second)
		defer cancel()
		if aerr := d.raw.DoubleAck(actx); aerr != nil {
			d.log.Warn("ack failed; the event will be redelivered", "err", aerr)
		}
		return HandledAck
	case !deferredUntil.IsZero():
		// Shutting down while waiting: the next replica (or this one,
		// restarted) takes the message when the wait is over.
		d.nak(max(time.Until(deferredUntil), 0))
		return HandledRetry
	case IsPermanent(err) || d.delivered >= uint64(d.c.MaxDeliver):
		return d.deadLetter(err)
	default:
		delay := d.c.Backoff[min(int(d.delivered), len(d.c.Backoff))-1]
		d.log.Warn("handler failed; will retry", "err", err, "delivered", d.delivered, "retry_in", delay)
		d.nak(delay)
		return HandledRetry
	}
}

// nak hands the message back to be redelivered after delay.
func (d *delivery) nak(delay time.Duration) {
	if err := d.raw.NakWithDelay(delay); err != nil {
		d.log.Warn("nak failed; the event will be redelivered after the ack wait", "err", err)
	}
}

// reportDelivered tells the observer of the delivery (typ is "" for a
// message that did not decode).
func (d *delivery) reportDelivered() {
	if d.c.Observer != nil {
		d.c.Observer.Delivered(d.c.Durable, d.typ, d.delivered)
	}
}

// reportLag tells a LagObserver how long a first delivery waited in the
// stream.
func (d *delivery) reportLag() {
	lo, ok := d.c.Observer.(LagObserver)
	if !ok || d.delivered != 1 {
		return
	}
	if md, err := d.raw.Metadata(); err == nil {
		lo.Started(d.c.Durable, d.typ, time.Since(md.Timestamp))
	}
}

// reportPanic logs a handler's recovered panic and tells the observer.
func (d *delivery) reportPanic(err error) {
	var p panicError
	if !errors.As(err, &p) {
		return
	}
	d.log.Error("handler panicked; handled as an error", "panic", p.value, "delivered", d.delivered, "stack", string(p.stack))
	if d.c.Observer != nil {
		d.c.Observer.Panicked(d.c.Durable, d.typ)
	}
}

// reportHandled tells the observer how the delivery ended, and returns
// the outcome.
func (d *delivery) reportHandled(outcome string, took time.Duration) string {
	if d.c.Observer != nil {
		d.c.Observer.Handled(d.c.Durable, d.typ, outcome, took)
	}
	return outcome
}

// deadLetter copies the message to prloop.dlq.<consumer> with the reason and
// terminates it, and returns HandledDeadLetter. If the copy cannot be
// stored, the message is nak'ed instead (it is never dropped without a
// trace) and HandledRetry is returned.
func (d *delivery) deadLetter(cause error) string {
	m := d.deadLetterMsg(cause)
	if !d.storeDeadLetter(m, cause) {
		return HandledRetry
	}
	d.log.Error("event dead-lettered", "subject", d.raw.Subject(), "dlq", m.Subject, "delivered", d.delivered, "err", cause)
	if err := d.raw.TermWithReason(cause.Error()); err != nil {
		d.log.Warn("terminate failed", "err", err)
	}
	return HandledDeadLetter
}

// deadLetterMsg is the dead-letter copy of the message: its body and
// headers, and why, from where, after how many deliveries and for which
// consumer.
func (d *delivery) deadLetterMsg(cause error) *nats.Msg {
	m := nats.NewMsg(DLQSubject(d.c.Durable))
	for k, v := range d.raw.Headers() {
		// Nats-* headers are publish instructions (message id, expected
		// stream …) meant for the original publish, not for this copy.
		if !strings.HasPrefix(k, "Nats-") {
			m.Header[k] = v
		}
	}
	m.Header.Set(HeaderDLQReason, cause.Error())
	m.Header.Set(HeaderDLQSubject, d.raw.Subject())
	m.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(d.delivered, 10))
	m.Header.Set(HeaderDLQConsumer, d.c.Durable)
	m.Data = d.raw.Data()
	return m
}

// storeDeadLetter publishes the dead letter m, once per stream sequence
// (its message id). A failed publish is tried again, holding the message,
// for up to half a minute: a passing failure (a NATS leader moving) leaves
// the handler not run again for a message it gave up on. A longer one, or
// shutdown, naks the message and reports false (the server redelivers
// without limit, see EnsureConsumer), so that a dead-letter stream that
// stays unwritable does not hold a handler slot for good.
func (d *delivery) storeDeadLetter(m *nats.Msg, cause error) bool {
	id := d.c.Durable + ":" + d.raw.Subject()
	if md, err := d.raw.Metadata(); err == nil {
		id = d.c.Durable + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	stop := heartbeat(d.raw, d.c.AckWait/3)
	defer stop()
	giveUp := time.Now().Add(30 * time.Second)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		// Each try has its own deadline: the handler's context may be
		// cancelled by shutdown, and a dead letter worth storing is worth
		// storing then too.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 5*time.Second)
		_, err := d.js.PublishMsg(pctx, m, jetstream.WithMsgID("dlq:"+id))
		cancel()
		if err == nil {
			return true
		}
		if time.Now().Add(wait).After(giveUp) {
			d.log.Error("dead-letter publish failed; leaving the message for redelivery", "err", err, "cause", cause)
			_ = d.raw.NakWithDelay(d.c.Backoff[len(d.c.Backoff)-1])
			return false
		}
		d.log.Error("dead-letter publish failed; trying again", "err", err, "cause", cause, "retry_in", wait)
		if ctxtime.Sleep(d.stopping, wait) != nil {
			d.log.Warn("shutting down before the dead letter was stored; leaving the message for redelivery")
			_ = d.raw.NakWithDelay(d.c.Backoff[0])
			return false
		}
	}
}
