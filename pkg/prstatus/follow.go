package prstatus

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Stream is the part of JetStream a Follower reads with.
type Stream interface {
	Stream(ctx context.Context, stream string) (jetstream.Stream, error)
	OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error)
}

var _ Stream = (jetstream.JetStream)(nil)

// Follower keeps a Board up to date with the event stream: it reads every
// event from the stream's start with an ordered consumer (which needs a
// NATS user allowed to create ephemeral consumers: the cli user, or a
// service's), then each new one as it comes. Read the board through View.
type Follower struct {
	mu    sync.RWMutex
	board *Board
	// caughtUp is closed once the events present at the start are applied.
	caughtUp chan struct{}
	once     sync.Once
	log      *slog.Logger
	// OnApply, if set, is called after each event is applied, outside the
	// lock, with the PR it was about (for writers of the line).
	OnApply func(pr ghref.PR)
}

// NewFollower returns a follower of an empty board.
func NewFollower(log *slog.Logger) *Follower {
	return &Follower{board: NewBoard(), caughtUp: make(chan struct{}), log: log}
}

// View calls fn with the board, read-locked: fn must not keep it.
func (f *Follower) View(fn func(b *Board)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.board)
}

// CaughtUp is closed once the events that were on the stream when Run
// started have been applied.
func (f *Follower) CaughtUp() <-chan struct{} { return f.caughtUp }

// Run follows the stream until ctx ends. Undecodable messages are skipped
// with a log line: a bad event must not stop the page or the status.
func (f *Follower) Run(ctx context.Context, js Stream) error {
	// Caught up means: every event on the stream when Run began is
	// applied. The stream's last sequence says which that is; a new
	// ordered consumer's pending count can read 0 before it has counted.
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return fmt.Errorf("follow the event stream: %w", err)
	}
	sinfo, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("follow the event stream: %w", err)
	}
	last := sinfo.State.LastSeq
	if last == 0 {
		f.once.Do(func() { close(f.caughtUp) })
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"pr.>"}})
	if err != nil {
		return fmt.Errorf("follow the event stream: %w", err)
	}
	// One long-lived pull: an ordered consumer's Next makes a new consumer
	// (and deletes the last) for every message.
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("follow the event stream: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("follow the event stream: %w", err)
		}
		f.apply(msg)
		// Caught up once the last message present at the start is applied
		// (or skipped), or nothing is left to read.
		if md, err := msg.Metadata(); err == nil && (md.Sequence.Stream >= last || md.NumPending == 0) {
			f.once.Do(func() { close(f.caughtUp) })
		}
	}
}

// Fact reports whether an event of type t from source is one the board
// folds: an event of a publisher of the table in pkg/events (events.
// PublishedBy) that the table does not give it is a test, not a fact about
// a PR. Sources the table does not list (tests, tools) are taken as they
// come; NATS permissions decide what they may publish.
func Fact(source string, t events.Type) bool {
	for _, p := range events.Publishers() {
		if source == events.Source(p) {
			return slices.Contains(events.PublishedBy(p), t)
		}
	}
	return true
}

func (f *Follower) apply(msg jetstream.Msg) {
	ce, d, err := events.Decode(msg.Data())
	if err != nil {
		f.log.Warn("skipping an event that does not decode", "subject", msg.Subject(), "err", err)
		return
	}
	if !Fact(ce.Source(), d.EventType()) {
		// 'prloop emit-test' publishes a PRReviewPending as the CLI to show
		// the pipe works: not a PR to show, nor one to write a status on.
		f.log.Debug("skipping an event its source does not publish", "subject", msg.Subject(), "source", ce.Source())
		return
	}
	f.mu.Lock()
	others := f.board.apply(d, ce.Time())
	f.mu.Unlock()
	if f.OnApply != nil {
		if !events.RepoLevel(d.EventType()) {
			f.OnApply(d.Ref())
		}
		// A queue's freeze changes the line of every PR queued there.
		for _, pr := range others {
			f.OnApply(pr)
		}
	}
}
