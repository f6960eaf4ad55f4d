package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prloop/prloop/pkg/ctxtime"
)

// Headers set on dead-lettered messages, besides the original ones.
const (
	HeaderDLQReason     = "Prloop-Dlq-Reason"
	HeaderDLQSubject    = "Prloop-Dlq-Subject"
	HeaderDLQDeliveries = "Prloop-Dlq-Deliveries"
	HeaderDLQConsumer   = "Prloop-Dlq-Consumer"
)

// Handler processes one event. Returning nil acks it; returning an error
// redelivers it with backoff until MaxDeliver, then dead-letters it; an error
// wrapped with Permanent dead-letters it at once. A panic is recovered and
// treated as an error. The context is cancelled only when the consumer's
// shutdown grace period runs out.
type Handler func(ctx context.Context, m *Msg) error

// Msg is one delivered event.
type Msg struct {
	Event cloudevents.Event
	Data  Data
	// Delivered counts deliveries of this message, 1 on the first.
	Delivered uint64
	// Seq is the message's stream sequence: events that arrived earlier have
	// lower ones, so it orders events first come, first served.
	Seq uint64
	raw jetstream.Msg
}

// InProgress tells JetStream the handler is still working, resetting the ack
// timer. Consume already does this periodically; call it for extra safety
// before a step that may be long.
func (m *Msg) InProgress() error { return m.raw.InProgress() }

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as one retrying cannot fix: the message goes to the
// dead-letter subject at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// ConsumerConfig describes a durable consumer and how to run its handler.
type ConsumerConfig struct {
	// Durable names the consumer; by convention the service name.
	Durable string
	// Types are the event types it receives.
	Types []Type
	// Concurrency bounds handlers running at once. Default 1.
	Concurrency int
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default 30s; Consume heartbeats with InProgress every AckWait/3.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries a failing handler sees before the
	// message is dead-lettered. Default 6. Consume decides this itself:
	// the server's consumer redelivers without limit (see EnsureConsumer),
	// so a message handed back at shutdown before its dead-letter copy was
	// stored comes back instead of being dropped.
	MaxDeliver int
	// Backoff are the redelivery delays after a handler error, by delivery
	// count; the last repeats. Default 1s, 5s, 30s, 2m, 5m.
	Backoff []time.Duration
	// MaxAckPending bounds the messages delivered and not yet acked, across
	// every replica of the consumer. Default max(64, 4*Concurrency); 1
	// delivers strictly one at a time, in stream order.
	MaxAckPending int
	// Grace is how long shutdown waits for running handlers before cancelling
	// their context. Default 8s.
	Grace time.Duration
	// Logger receives one line per failure. Default slog.Default().
	Logger *slog.Logger
	// Observer, if set, is told about every delivery and how its handling
	// ended, so metrics can be attached without this package knowing them.
	Observer ConsumeObserver
	// MaxInterrupted bounds the deliveries past MaxDeliver that a message
	// may get when earlier ones never finished: the handler's process
	// died or was cut off (a kill, an eviction, a deploy) before it acked,
	// nak'ed or dead-lettered the message. Past MaxDeliver+MaxInterrupted
	// deliveries the message is dead-lettered without running the handler
	// again, so that a message that kills its process cannot crash-loop
	// the service; up to there, a process dying is not the message's
	// fault. Default 3*MaxDeliver.
	MaxInterrupted int
	// MaxDefer bounds how long one delivery may wait for the retry time a
	// handler's error names (see RetryAt). Default DefaultMaxDefer.
	MaxDefer time.Duration
}

// DefaultMaxDefer is ConsumerConfig.MaxDefer's default: a little over an
// hour, the longest GitHub's primary rate limit takes to reset.
const DefaultMaxDefer = 65 * time.Minute

// RetryAt reports the earliest moment at which retrying err can succeed,
// when err (or an error it wraps) knows one: a GitHub rate limit knows when
// it resets (github.RateLimitError). Consume waits for that moment within
// the same delivery instead of counting another failed delivery: a spent
// quota is no fault of the event, and counting it would send every event of
// an hour-long outage to the dead-letter stream.
func RetryAt(err error) (time.Time, bool) {
	var r interface{ RetryAt() time.Time }
	if !errors.As(err, &r) {
		return time.Time{}, false
	}
	at := r.RetryAt()
	return at, !at.IsZero()
}

// LagObserver, when a ConsumeObserver implements it too, is told how long
// each event waited between being stored in the stream and its handler
// starting, on its first delivery (a redelivery also waited out a backoff).
type LagObserver interface {
	Started(durable string, t Type, lag time.Duration)
}

// Outcomes of handling one delivery, as ConsumeObserver.Handled reports them.
const (
	// HandledAck: the handler succeeded and the message was acked.
	HandledAck = "ack"
	// HandledRetry: the handler failed and the message will be redelivered.
	HandledRetry = "retry"
	// HandledDeadLetter: the message went to the dead-letter subject
	// (permanent error, MaxDeliver reached, or undecodable).
	HandledDeadLetter = "dead_letter"
)

// ConsumeObserver is told about each delivery Consume receives. t is empty
// for a message that did not decode. Implementations must be safe for
// concurrent use and fast.
type ConsumeObserver interface {
	// Panicked is called when the handler panicked on a delivery (the
	// panic is recovered and handled as an error).
	Panicked(durable string, t Type)
	// DeadLetters reports how many messages the consumer's dead-letter
	// subject holds now: at start, after each dead letter, and every
	// DLQRefresh (a replay removes them from elsewhere).
	DeadLetters(durable string, n uint64)
	// Delivered is called before the handler runs; delivered counts
	// deliveries of the message, so more than 1 is a redelivery.
	Delivered(durable string, t Type, delivered uint64)
	// Handled is called once the message was acked, nak'ed or
	// dead-lettered (HandledAck, HandledRetry, HandledDeadLetter), with the
	// handler's running time.
	Handled(durable string, t Type, outcome string, d time.Duration)
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 6
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute}
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = max(64, 4*c.Concurrency)
	}
	if c.MaxInterrupted <= 0 {
		c.MaxInterrupted = 3 * c.MaxDeliver
	}
	if c.MaxDefer <= 0 {
		c.MaxDefer = DefaultMaxDefer
	}
	if c.Grace <= 0 {
		c.Grace = 8 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// JetStreamConsumer lists what Consume needs of jetstream.JetStream.
type JetStreamConsumer interface {
	Publisher
	CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error)
}

var _ JetStreamConsumer = (jetstream.JetStream)(nil)

// EnsureConsumer creates or updates the durable pull consumer for cfg on the
// event stream.
func EnsureConsumer(ctx context.Context, js JetStreamConsumer, cfg ConsumerConfig) (jetstream.Consumer, error) {
	c := cfg.withDefaults()
	if c.Durable == "" || len(c.Types) == 0 {
		return nil, fmt.Errorf("ensure consumer: durable name and event types are required")
	}
	filters := make([]string, 0, len(c.Types))
	for _, t := range c.Types {
		filters = append(filters, FilterSubject(t))
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:        c.Durable,
		Description:    "prloop " + c.Durable,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.AckWait,
		// Unlimited: the server stops redelivering after its MaxDeliver
		// whatever happened to the last delivery, so a dead-letter publish
		// that failed on it would lose the message. Consume counts
		// deliveries itself and dead-letters at c.MaxDeliver; a failed
		// dead-letter publish naks, and the next delivery tries again.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: c.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", c.Durable, err)
	}
	return cons, nil
}

// Consume runs h for every event the durable consumer receives, until ctx is
// done. It then stops fetching, waits up to Grace for running handlers (which
// still ack or nak their messages), and returns nil. It returns an error only
// when the consumer cannot be created; a shutdown while it is being
// created is a shutdown, not an error.
func Consume(ctx context.Context, js JetStreamConsumer, cfg ConsumerConfig, h Handler) error {
	c := cfg.withDefaults()
	cons, err := EnsureConsumer(ctx, js, c)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	log := c.Logger.With("consumer", c.Durable)
	log.Info("consumer ready", "stream", StreamName, "types", c.Types, "concurrency", c.Concurrency)

	// Handlers outlive ctx by up to Grace so in-flight work can finish.
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

	w := worker{js: js, c: c, log: log, h: h, hctx: hctx, recount: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for range c.Concurrency {
		wg.Go(func() { w.run(ctx, cons) })
	}
	wg.Go(func() { countDeadLetters(ctx, js, c, log, w.recount) })
	<-ctx.Done()
	drain(&wg, c, log, cancelHandlers)
	return nil
}

// drain waits for the running handlers after shutdown, up to Grace, and
// then cancels their context and waits for them to return.
func drain(wg *sync.WaitGroup, c ConsumerConfig, log *slog.Logger, cancelHandlers context.CancelFunc) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.Grace):
		log.Warn("shutdown grace ran out; cancelling running handlers", "grace", c.Grace)
		cancelHandlers()
		<-done
	}
}

// worker fetches messages and hands each to a delivery, one at a time;
// Consume runs Concurrency of them.
type worker struct {
	js  JetStreamConsumer
	c   ConsumerConfig
	log *slog.Logger
	h   Handler
	// hctx is the handlers' context, which outlives the consumer's by up
	// to Grace.
	hctx context.Context
	// recount asks countDeadLetters to count again after a dead letter.
	recount chan struct{}
}

// run handles messages until ctx is done, creating the consumer again
// when it was deleted.
func (w worker) run(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		msg, err := next(ctx, cons)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				if cons2, err2 := EnsureConsumer(ctx, w.js, w.c); err2 == nil {
					cons = cons2
				}
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				w.log.Warn("fetch failed; retrying", "err", err)
				_ = ctxtime.Sleep(ctx, time.Second)
			}
			continue
		}
		if newDelivery(w.hctx, ctx, w.js, w.c, w.log, msg).handle(w.h) == HandledDeadLetter {
			select {
			case w.recount <- struct{}{}:
			default:
			}
		}
	}
}

// next fetches one message, with a short pull expiry so a stopped worker
// leaves no long-lived pull request behind on the server.
func next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cons.Next(jetstream.FetchContext(fctx))
}

// DLQRefresh is how often Consume recounts its consumer's dead letters for
// ConsumeObserver.DeadLetters.
const DLQRefresh = time.Minute

// StreamLookup is the part of jetstream.JetStream that finds a stream, as
// counting dead letters needs it.
type StreamLookup interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

var _ StreamLookup = (jetstream.JetStream)(nil)

// countDeadLetters reports the consumer's dead letters to the observer at
// start, on every signal on recount and every DLQRefresh, until ctx is done.
func countDeadLetters(ctx context.Context, js JetStreamConsumer, c ConsumerConfig, log *slog.Logger, recount <-chan struct{}) {
	sg, ok := js.(StreamLookup)
	if c.Observer == nil || !ok {
		return
	}
	t := time.NewTicker(DLQRefresh)
	defer t.Stop()
	for {
		if n, err := CountDeadLetters(ctx, sg, c.Durable); err == nil {
			c.Observer.DeadLetters(c.Durable, n)
		} else if ctx.Err() == nil {
			log.Debug("count dead letters", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-recount:
		case <-t.C:
		}
	}
}

// DLQSubject is the subject the consumer named durable dead-letters to.
func DLQSubject(durable string) string { return DLQPrefix + "." + durable }

// CountDeadLetters returns how many messages the dead-letter stream holds
// for the consumer named durable.
func CountDeadLetters(ctx context.Context, js StreamLookup, durable string) (uint64, error) {
	s, err := js.Stream(ctx, DLQStreamName)
	if err != nil {
		return 0, fmt.Errorf("count dead letters of %s: %w", durable, err)
	}
	subject := DLQSubject(durable)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("count dead letters of %s: %w", durable, err)
	}
	return info.State.Subjects[subject], nil
}

// panicError is a recovered handler panic, with the stack it unwound.
type panicError struct {
	value any
	stack []byte
}

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.value) }

// safeCall runs h, turning a panic into a panicError: a handler that panics
// on one message must not take the process (and every other message in
// flight) down with it, nor lose the message.
func safeCall(ctx context.Context, h Handler, m *Msg) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError{value: r, stack: debug.Stack()}
		}
	}()
	return h(ctx, m)
}

// checkSubject refuses an event whose body is not about what its subject
// says: NATS permissions are granted per subject (a service may publish only
// its own types, deploy/nats/nats.conf), so a body claiming another type on a
// subject its publisher may use is a forgery, not an event.
func checkSubject(subject string, d Data) error {
	pr, t, err := ParseSubject(subject)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if t != d.EventType() || !pr.Same(d.Ref()) {
		return fmt.Errorf("%w: a %s event about %s on subject %s", ErrMalformed, d.EventType(), d.Ref(), subject)
	}
	return nil
}

func heartbeat(m jetstream.Msg, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
