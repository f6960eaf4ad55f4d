package github

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// TestAllot: a replica's share of each limit is an equal part among the
// live replicas, and no more than the others' claims leave; a gone
// replica's claim counts for its limit's window (concurrency: none; the
// points and content creation of the minute: a minute; of the hour: an
// hour).
func TestAllot(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	all := func(v float64) Shares { return Shares{v, v, v, v} }
	alive := func(c Shares) shareEntry { return shareEntry{Expires: now.Add(10 * time.Second), Claims: c} }
	goneFor := func(d time.Duration, c Shares) shareEntry { return shareEntry{Expires: now.Add(-d), Claims: c} }
	tests := []struct {
		name    string
		entries map[string]shareEntry
		want    Shares
	}{
		{name: "alone: every limit whole", want: all(1)},
		{name: "its own earlier entry does not count", entries: map[string]shareEntry{"me": alive(all(1))}, want: all(1)},
		{name: "two, the other at its half", entries: map[string]shareEntry{"b": alive(all(0.5))}, want: all(0.5)},
		{name: "three", entries: map[string]shareEntry{"b": alive(all(1.0 / 3)), "c": alive(all(1.0 / 3))}, want: all(1.0 / 3)},
		{
			name:    "joining one that held everything: nothing until it shrinks its claims",
			entries: map[string]shareEntry{"b": alive(all(1))}, want: all(0),
		},
		{
			name:    "the other shrank its share but used three quarters of the minute's points",
			entries: map[string]shareEntry{"b": alive(Shares{0.5, 0.75, 0.5, 0.5})}, want: Shares{0.5, 0.25, 0.5, 0.5},
		},
		{
			name:    "one gone 10 s ago: its concurrency is free, the rest still counts",
			entries: map[string]shareEntry{"b": goneFor(10*time.Second, all(0.5))}, want: Shares{1, 0.5, 0.5, 0.5},
		},
		{
			name:    "one gone 2 minutes ago: only its content creation of the hour still counts",
			entries: map[string]shareEntry{"b": goneFor(2*time.Minute, all(0.5))}, want: Shares{1, 1, 1, 0.5},
		},
		{name: "one gone 2 hours ago counts no more", entries: map[string]shareEntry{"b": goneFor(2*time.Hour, all(0.5))}, want: all(1)},
		{
			name:    "a live one and a gone one: half of what is live, less the gone one's claim",
			entries: map[string]shareEntry{"b": alive(all(0.5)), "c": goneFor(2*time.Minute, all(0.5))}, want: Shares{0.5, 0.5, 0.5, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := allot("me", tt.entries, now)
			assert.InDelta(t, tt.want.Concurrency, got.Concurrency, 1e-9, "concurrency")
			assert.InDelta(t, tt.want.Points, got.Points, 1e-9, "points")
			assert.InDelta(t, tt.want.CreatesMinute, got.CreatesMinute, 1e-9, "creates a minute")
			assert.InDelta(t, tt.want.CreatesHour, got.CreatesHour, 1e-9, "creates an hour")
		})
	}
}

// cutKV is a KV a test can cut off, as a replica loses NATS when it dies.
type cutKV struct {
	kvlease.CASKV
	cut atomic.Bool
}

var errCut = errors.New("connection lost")

func (k *cutKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.cut.Load() {
		return nil, errCut
	}
	return k.CASKV.Get(ctx, key)
}

// TestShareBudget_ReplicasHoldTheInstallationsBudget: three replicas, each
// with its own budget and NATS connection, share one installation budget
// through the KV record. Hammered at once, their requests in flight never
// exceed the installation's concurrency and the points they spend on one
// endpoint within the minute never exceed its points; each gets its part.
// When one replica dies (cut off, its entry never renewed), the others
// take its concurrency within a TTL and a renewal, but not its points,
// which GitHub counts for the minute.
func TestShareBudget_ReplicasHoldTheInstallationsBudget(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	const (
		concurrency = 12
		points      = 60
		ttl         = 600 * time.Millisecond
	)
	type replica struct {
		b    *Budget
		kv   *cutKV
		stop func()
	}
	var replicas []replica
	for i := range 3 {
		c := natstest.Connect(t, conn)
		kv, err := kvlease.EnsureBucket(t.Context(), c.JS, "PRLOOP_TEST_BUDGET", "test", 1)
		require.NoError(t, err)
		r := replica{b: NewBudget(BudgetOptions{Concurrency: concurrency, EndpointPointsPerMinute: points}), kv: &cutKV{CASKV: kv}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			ShareBudget(ctx, r.kv, r.b, ShareOptions{Holder: "r" + string(rune('a'+i)), TTL: ttl, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
		r.stop = func() { cancel(); <-done }
		t.Cleanup(r.stop)
		replicas = append(replicas, r)
	}
	limits := func(r replica) (int, int) { c, p, _, _ := r.b.Limits(); return c, p }
	require.Eventually(t, func() bool {
		for _, r := range replicas {
			if c, p := limits(r); c != concurrency/3 || p != points/3 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "each replica gets a third")

	// Hammer: 3 × 20 requests at once on one endpoint, each held 20 ms.
	var inFlight, peak, admitted atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range replicas {
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					release, err := r.b.acquire(ctx, "GET", "GET /repos/{owner}/{repo}/pulls", PriorityUrgent)
					if err != nil {
						return
					}
					admitted.Add(1)
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(20 * time.Millisecond) // a request's time at GitHub
					inFlight.Add(-1)
					release()
				}
			}()
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int64(concurrency), "requests in flight across the replicas")
	assert.Equal(t, int64(points), admitted.Load(), "the minute's points of the endpoint, all spent, none more")
	for _, r := range replicas {
		assert.Len(t, r.b.PointsPerMinute(), 1)
		assert.Equal(t, points/3, r.b.PointsPerMinute()["GET /repos/{owner}/{repo}/pulls"], "each its third")
	}

	// Replica a dies: cut off from NATS, never renewed. Its entry as the
	// record holds it says until when its concurrency is its own.
	replicas[0].kv.cut.Store(true)
	died := time.Now()
	rec, err := replicas[1].kv.Get(t.Context(), BudgetShareKey)
	require.NoError(t, err)
	var entries map[string]shareEntry
	require.NoError(t, json.Unmarshal(rec.Value(), &entries))
	expires := entries["ra"].Expires
	require.False(t, expires.IsZero(), "replica a's entry in %s", rec.Value())
	var takenAt time.Time
	require.Eventually(t, func() bool {
		c1, _ := limits(replicas[1])
		c2, _ := limits(replicas[2])
		takenAt = time.Now()
		return c1 == concurrency/2 && c2 == concurrency/2
	}, 10*time.Second, 10*time.Millisecond, "the others take its concurrency")
	t.Logf("concurrency taken over %s after the death, %s after its entry expired (TTL %s)",
		takenAt.Sub(died).Round(time.Millisecond), takenAt.Sub(expires).Round(time.Millisecond), ttl)
	// Its concurrency is its own until its entry expires. (No upper bound
	// beyond the poll's: under load a renewal round may come late, and the
	// bound would measure the machine, not the rule.)
	assert.False(t, takenAt.Before(expires), "the others waited for the dead replica's entry to expire at %s", expires)
	_, p1 := limits(replicas[1])
	assert.Equal(t, points/3, p1, "its points of the minute still count: GitHub counts them for a minute")
	require.Eventually(t, func() bool { c0, _ := limits(replicas[0]); return c0 == 0 }, 10*time.Second, 10*time.Millisecond,
		"the cut-off replica stops once its entry expired unrenewed")
}

// TestClaim: a replica claims the larger of its share and its usage, but
// of the hour's content creation only its usage and what a minute's share
// allows, so that a crashed replica does not hold its whole share of the
// hour for an hour.
func TestClaim(t *testing.T) {
	t.Parallel()
	const minuteToHour = float64(CreatesPerMinute) / CreatesPerHour // 0.16
	tests := []struct {
		name string
		f, u Shares
		want Shares
	}{
		{name: "idle: its share, and a minute's creation of the hour", f: Shares{0.5, 0.5, 0.5, 0.5}, want: Shares{0.5, 0.5, 0.5, 0.08}},
		{name: "busy beyond a share it just lost", f: Shares{0.5, 0.5, 0.5, 0.5}, u: Shares{0.9, 0.8, 0.7, 0.6}, want: Shares{0.9, 0.8, 0.7, 0.6}},
		{name: "the hour's claim stops at the share", f: Shares{1, 1, 1, 0.2}, u: Shares{0, 0, 0, 0.1}, want: Shares{1, 1, 1, 0.2}},
		{name: "leaving: its usage only", u: Shares{0, 0.3, 0.1, 0.2}, want: Shares{0, 0.3, 0.1, 0.2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := claim(tt.f, tt.u, minuteToHour)
			assert.InDelta(t, tt.want.Concurrency, got.Concurrency, 1e-9, "concurrency")
			assert.InDelta(t, tt.want.Points, got.Points, 1e-9, "points")
			assert.InDelta(t, tt.want.CreatesMinute, got.CreatesMinute, 1e-9, "creates a minute")
			assert.InDelta(t, tt.want.CreatesHour, got.CreatesHour, 1e-9, "creates an hour")
		})
	}
}
