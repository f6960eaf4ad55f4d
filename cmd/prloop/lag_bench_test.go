package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// lags collects, per consumer, how long events waited between being stored
// and their handler starting (events.LagObserver).
type lags struct {
	mu  sync.Mutex
	got map[string][]time.Duration
}

var (
	_ events.ConsumeObserver = (*lags)(nil)
	_ events.LagObserver     = (*lags)(nil)
)

func (l *lags) Started(durable string, _ events.Type, lag time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[durable] = append(l.got[durable], lag)
}

func (l *lags) count(durable string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got[durable])
}

func (*lags) Panicked(string, events.Type)                       {}
func (*lags) DeadLetters(string, uint64)                         {}
func (*lags) Delivered(string, events.Type, uint64)              {}
func (*lags) Handled(string, events.Type, string, time.Duration) {}

// quantile returns the q-quantile of d (sorted in place).
func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// BenchmarkConsumerLag_EventToHandlerStart publishes a mix of every event
// type, one after another as the services do, to the embedded server
// (fsync on every write), with the four services' durable consumers
// (their own connections, their own type filters, the Consume they run)
// consuming; it reports each consumer's event-to-handler-start latency,
// p50 and p99, measured from the moment the stream stored the event.
//
//	go test -run '^$' -bench BenchmarkConsumerLag -benchtime 2000x ./cmd/prloop
func BenchmarkConsumerLag_EventToHandlerStart(b *testing.B) {
	conn := natstest.Start(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	services := map[string][]events.Type{
		poller.Name: poller.Types, feedback.Name: feedback.Types, merger.Name: merger.Types, escalator.Name: escalator.Types,
	}
	obs := &lags{got: map[string][]time.Duration{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	for name, types := range services {
		c := natstest.Connect(b, conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = events.Consume(ctx, c.JS, events.ConsumerConfig{
				Durable: name, Types: types, Logger: quiet, Concurrency: 2, Observer: obs,
			}, func(context.Context, *events.Msg) error { return nil })
		}()
	}
	want := map[string]int{}
	em := events.NewEmitter(conn.JS, "bench")
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	b.ResetTimer()
	for i := range b.N {
		t := events.Types[i%len(events.Types)]
		_, _, err := em.Emit(ctx, sampleOf(t, pr), strconv.Itoa(i))
		require.NoError(b, err)
		for name, types := range services {
			if slices.Contains(types, t) {
				want[name]++
			}
		}
	}
	require.Eventually(b, func() bool {
		for name := range services {
			if obs.count(name) < want[name] {
				return false
			}
		}
		return true
	}, time.Minute, 5*time.Millisecond)
	b.StopTimer()
	for name := range services {
		d := obs.got[name]
		if len(d) == 0 {
			continue // a run too short to reach this consumer's types
		}
		b.ReportMetric(float64(quantile(d, 0.5).Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(quantile(d, 0.99).Microseconds())/1000, name+"-p99-ms")
	}
}
