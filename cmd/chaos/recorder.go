package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// seen is one event read from the stream.
type seen struct {
	seq  uint64
	id   string
	typ  events.Type
	data events.Data
	raw  []byte
}

// recorder reads every event of the PRLOOP stream with an ordered
// consumer, which resumes by itself across node loss. (eventstest's
// Recorder needs a testing.TB.)
type recorder struct {
	mu        sync.Mutex
	all       []seen
	malformed []string
	cc        jetstream.ConsumeContext
}

func startRecorder(ctx context.Context, js jetstream.JetStream) (*recorder, error) {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("record events: %w", err)
	}
	r := &recorder{}
	r.cc, err = cons.Consume(func(m jetstream.Msg) {
		e, d, err := events.Decode(m.Data())
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.malformed = append(r.malformed, fmt.Sprintf("%s: %v", m.Subject(), err))
			return
		}
		var seq uint64
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		r.all = append(r.all, seen{seq: seq, id: e.ID(), typ: events.Type(e.Type()), data: d, raw: append([]byte(nil), m.Data()...)})
	})
	if err != nil {
		return nil, fmt.Errorf("record events: %w", err)
	}
	return r, nil
}

func (r *recorder) stop() { r.cc.Stop() }

func (r *recorder) events() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.all...)
}

// of returns the events about pr, in stream order.
func (r *recorder) of(pr ghref.PR) []seen {
	var out []seen
	for _, e := range r.events() {
		if e.data.Ref().Same(pr) {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) count(pr ghref.PR, t events.Type) int {
	n := 0
	for _, e := range r.of(pr) {
		if e.typ == t {
			n++
		}
	}
	return n
}

// ended reports whether the PR was merged or closed: nothing more
// happens to it on GitHub.
func (r *recorder) ended(pr ghref.PR) bool {
	return r.count(pr, events.TypeMerged) > 0 || r.count(pr, events.TypeClosed) > 0
}

// terminal returns the PR's first terminal event type, or "".
func (r *recorder) terminal(pr ghref.PR) events.Type {
	for _, e := range r.of(pr) {
		switch e.typ {
		case events.TypeMerged, events.TypeEscalated, events.TypeClosed:
			return e.typ
		}
	}
	return ""
}
