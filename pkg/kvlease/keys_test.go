package kvlease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// TestBucket_ListsKeysUnderUpdates lists a bucket 1,000 times while one of
// its keys is rewritten without pause, as a renewed lease or a merge-queue
// entry is. Every listing holds every key. (jetstream.KeyValue's own
// listing, run the same way, leaves the busy key out of about 2 in 100.)
func TestBucket_ListsKeysUnderUpdates(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	kv, err := kvlease.EnsureBucket(t.Context(), conn.JS, "KEYS", "keys test", 1)
	require.NoError(t, err)
	want := []string{"q.a.1", "q.a.2", "q.b.1", "replica.x", "replica.y"}
	for _, k := range want {
		_, err := kv.Put(t.Context(), k, []byte("v"))
		require.NoError(t, err)
	}
	for _, k := range []string{"gone", "purged"} {
		_, err = kv.Put(t.Context(), k, []byte("v"))
		require.NoError(t, err)
	}
	require.NoError(t, kv.Delete(t.Context(), "gone"))
	require.NoError(t, kv.Purge(t.Context(), "purged"))

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = kv.Put(ctx, "replica.x", fmt.Append(nil, i))
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	for i := range 1000 {
		l, err := kv.ListKeysFiltered(t.Context(), "q.*.*", "replica.*")
		require.NoError(t, err)
		var got []string
		for k := range l.Keys() {
			got = append(got, k)
		}
		_ = l.Stop()
		require.ElementsMatch(t, want, got, "listing %d", i)
	}

	all, err := kv.Keys(t.Context())
	require.NoError(t, err)
	assert.Equal(t, want, all, "sorted, and a deleted key leaves nothing behind")
	_, err = kv.Keys(t.Context(), jetstream.MetaOnly())
	assert.ErrorContains(t, err, "not supported")
}

// TestOpenBucket_MissingBucket names the bucket it could not open.
func TestOpenBucket_MissingBucket(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	_, err := kvlease.OpenBucket(t.Context(), conn.JS, "NOPE")
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
	assert.ErrorContains(t, err, "NOPE")
}

// TestBucket_DeleteKeepsALaterValue: removing a delete marker never removes
// a value written after it, and a deleted key can be created again.
func TestBucket_DeleteKeepsALaterValue(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	kv, err := kvlease.EnsureBucket(t.Context(), conn.JS, "KEYS", "keys test", 1)
	require.NoError(t, err)
	rev, err := kv.Create(t.Context(), "k", []byte("1"))
	require.NoError(t, err)
	require.NoError(t, kv.Delete(t.Context(), "k", jetstream.LastRevision(rev)))
	_, err = kv.Get(t.Context(), "k")
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
	_, err = kv.Update(t.Context(), "k", []byte("stale"), rev)
	require.Error(t, err, "an update at the deleted revision conflicts")

	_, err = kv.Create(t.Context(), "k", []byte("2"))
	require.NoError(t, err, "a deleted key can be created again")
	e, err := kv.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, "2", string(e.Value()))
	assert.Error(t, kv.Delete(t.Context(), "k", jetstream.LastRevision(rev)), "a delete at an old revision conflicts")
	e, err = kv.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, "2", string(e.Value()), "and leaves the value")
}
