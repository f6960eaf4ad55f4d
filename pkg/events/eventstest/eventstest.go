// Package eventstest records the events on prloop's stream for tests, so
// they can wait for an event and assert on the exact sequence per PR.
package eventstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Recorded is one event seen on the stream.
type Recorded struct {
	ID   string
	Type events.Type
	Data events.Data
	Seq  uint64
}

// Recorder reads every event on the stream, from the first, with an
// ordered consumer: it sees what any consumer would, in stream order.
type Recorder struct {
	mu  sync.Mutex
	all []Recorded
}

// Record starts a recorder that stops when the test ends.
func Record(t testing.TB, js jetstream.JetStream) *Recorder {
	t.Helper()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	r := &Recorder{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		e, d, err := events.Decode(m.Data())
		if err != nil {
			t.Errorf("malformed event on %s: %v", m.Subject(), err)
			return
		}
		var seq uint64
		if md != nil {
			seq = md.Sequence.Stream
		}
		r.mu.Lock()
		r.all = append(r.all, Recorded{ID: e.ID(), Type: events.Type(e.Type()), Data: d, Seq: seq})
		r.mu.Unlock()
	})
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	return r
}

// All returns every event recorded so far.
func (r *Recorder) All() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Recorded(nil), r.all...)
}

// For returns the events about pr, in order.
func (r *Recorder) For(pr ghref.PR) []Recorded {
	var out []Recorded
	for _, e := range r.All() {
		if e.Data.Ref().Same(pr) {
			out = append(out, e)
		}
	}
	return out
}

// Types returns the types of the events about pr, in order.
func (r *Recorder) Types(pr ghref.PR) []events.Type {
	var out []events.Type
	for _, e := range r.For(pr) {
		out = append(out, e.Type)
	}
	return out
}

// Count returns how many events of type t about pr were recorded.
func (r *Recorder) Count(pr ghref.PR, t events.Type) int {
	n := 0
	for _, e := range r.For(pr) {
		if e.Type == t {
			n++
		}
	}
	return n
}

// Last returns the last event of type t about pr, or false.
func (r *Recorder) Last(pr ghref.PR, t events.Type) (Recorded, bool) {
	evs := r.For(pr)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == t {
			return evs[i], true
		}
	}
	return Recorded{}, false
}

// WaitCount waits up to timeout until at least n events of type t about pr
// were recorded, and returns the last of them.
func (r *Recorder) WaitCount(t testing.TB, pr ghref.PR, typ events.Type, n int, timeout time.Duration) Recorded {
	t.Helper()
	require.Eventually(t, func() bool { return r.Count(pr, typ) >= n }, timeout, 10*time.Millisecond,
		"waited %s for %d %s event(s) about %s; saw %s", timeout, n, typ, pr, lazy(func() string { return r.describe(pr) }))
	e, _ := r.Last(pr, typ)
	return e
}

// Wait waits up to timeout for an event of type t about pr.
func (r *Recorder) Wait(t testing.TB, pr ghref.PR, typ events.Type, timeout time.Duration) Recorded {
	t.Helper()
	return r.WaitCount(t, pr, typ, 1, timeout)
}

func (r *Recorder) describe(pr ghref.PR) string {
	var parts []string
	for _, e := range r.For(pr) {
		parts = append(parts, string(e.Type))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// lazy defers building a message until it is printed.
type lazy func() string

func (l lazy) String() string { return l() }

var _ fmt.Stringer = lazy(nil)
