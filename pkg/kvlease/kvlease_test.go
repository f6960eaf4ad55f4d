package kvlease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// clock is a settable clock shared by the holders of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	conn := natstest.Start(t)
	kv, err := conn.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "LEASES"})
	require.NoError(t, err)
	return kv
}

func TestLease_ExclusiveUntilExpiry(t *testing.T) {
	t.Parallel()
	kv := bucket(t)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := kvlease.Options{TTL: time.Minute, Now: clk.Now, Note: "merging #1"}

	a, err := kvlease.Acquire(t.Context(), kv, "lock.a", "replica-a", opts)
	require.NoError(t, err)
	_, err = kvlease.Acquire(t.Context(), kv, "lock.a", "replica-b", opts)
	require.ErrorIs(t, err, kvlease.ErrHeld)
	_, err = kvlease.Acquire(t.Context(), kv, "lock.a", "replica-a", opts)
	require.ErrorIs(t, err, kvlease.ErrHeld, "a lease is not re-entrant")

	rec, ok, err := kvlease.Peek(t.Context(), kv, "lock.a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "replica-a", rec.Holder)
	assert.Equal(t, "merging #1", rec.Note)

	clk.Advance(30 * time.Second)
	require.NoError(t, a.Renew(t.Context()))
	clk.Advance(45 * time.Second)
	_, err = kvlease.Acquire(t.Context(), kv, "lock.a", "replica-b", opts)
	require.ErrorIs(t, err, kvlease.ErrHeld, "renewal moved the expiry")

	clk.Advance(time.Minute)
	b, err := kvlease.Acquire(t.Context(), kv, "lock.a", "replica-b", opts)
	require.NoError(t, err, "an expired lease is taken over")
	require.ErrorIs(t, a.Renew(t.Context()), kvlease.ErrLost)
	require.NoError(t, a.Release(t.Context()), "releasing a lost lease does nothing")
	rec, ok, err = kvlease.Peek(t.Context(), kv, "lock.a")
	require.NoError(t, err)
	require.True(t, ok, "the loser's release must not delete the new holder's lease")
	assert.Equal(t, "replica-b", rec.Holder)

	require.NoError(t, b.Release(t.Context()))
	_, ok, err = kvlease.Peek(t.Context(), kv, "lock.a")
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = kvlease.Acquire(t.Context(), kv, "lock.a", "replica-a", opts)
	require.NoError(t, err, "a released lease is free")
}

func TestLease_KeepCancelsWhenLost(t *testing.T) {
	t.Parallel()
	kv := bucket(t)
	// A TTL a renewal every TTL/3 meets even with the machine very busy:
	// a renewal later than the TTL rightly loses the lease, and a 90 ms
	// TTL did under load, a 600 ms one with both cores 9 times over.
	const ttl = 2 * time.Second
	a, err := kvlease.Acquire(t.Context(), kv, "lock.k", "replica-a", kvlease.Options{TTL: ttl})
	require.NoError(t, err)
	ctx, stop := a.Keep(context.Background())
	defer stop()

	// Renewals keep the lease alive well past its TTL.
	start := time.Now()
	require.Eventually(t, func() bool { return time.Since(start) > 3*ttl }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, ctx.Err())
	_, err = kvlease.Acquire(t.Context(), kv, "lock.k", "replica-b", kvlease.Options{TTL: time.Minute})
	require.ErrorIs(t, err, kvlease.ErrHeld)

	// Someone deletes the key: the holder notices at its next renewal.
	require.NoError(t, kv.Delete(t.Context(), "lock.k"))
	require.Eventually(t, func() bool { return ctx.Err() != nil }, 10*time.Second, 5*time.Millisecond)
	assert.ErrorIs(t, context.Cause(ctx), kvlease.ErrLost)
}
