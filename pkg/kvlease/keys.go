package kvlease

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is a KV bucket whose key listings are exact.
//
// jetstream.KeyValue lists keys through a watcher (an ordered consumer that
// delivers the last message of every subject). With one value kept per key,
// a key updated while the watcher starts loses the message the watcher was
// about to deliver and is left out of the listing: about 2 listings in 100
// under a steady stream of updates to one key (TestBucket_ListsKeysUnderUpdates).
// prloop's keys are updated all the time (leases are renewed, queue entries
// rewritten), and a listing that drops a live lease or the first entry of a
// merge queue is wrong, not merely late. Bucket lists keys instead from the
// stream's subject index, which the server reads under one lock: every key
// that exists when the listing is taken is in it.
//
// A deleted key would stay in that index as its delete marker, one per PR
// ever queued or leased, so Bucket's Delete and Purge remove the marker
// once it is written. A key deleted while a listing is taken may still be
// listed; callers read every key they list and skip those not found, as
// they must for keys removed meanwhile anyway.
type Bucket struct {
	jetstream.KeyValue
	stream jetstream.Stream
}

var _ jetstream.KeyValue = (*Bucket)(nil)

// StreamGetter is the part of jetstream.JetStream that Exact needs.
type StreamGetter interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

var _ StreamGetter = (jetstream.JetStream)(nil)

// Exact returns kv with exact key listings (see Bucket).
func Exact(ctx context.Context, js StreamGetter, kv jetstream.KeyValue) (*Bucket, error) {
	st, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return nil, fmt.Errorf("open the stream of kv bucket %s: %w", kv.Bucket(), err)
	}
	return &Bucket{KeyValue: kv, stream: st}, nil
}

// Opener is the part of jetstream.JetStream that OpenBucket needs.
type Opener interface {
	StreamGetter
	KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error)
}

var _ Opener = (jetstream.JetStream)(nil)

// OpenBucket opens the existing bucket name with exact key listings.
func OpenBucket(ctx context.Context, js Opener, name string) (*Bucket, error) {
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open kv bucket %s: %w", name, err)
	}
	return Exact(ctx, js, kv)
}

// KeysMatching returns the keys matching any of filters (KV key patterns
// with the wildcards * and >; none means every key), sorted.
func (b *Bucket) KeysMatching(ctx context.Context, filters ...string) ([]string, error) {
	if len(filters) == 0 {
		filters = []string{">"}
	}
	prefix := "$KV." + b.Bucket() + "."
	seen := map[string]bool{}
	for _, f := range filters {
		info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(prefix+f))
		if err != nil {
			return nil, fmt.Errorf("list keys %s of kv bucket %s: %w", f, b.Bucket(), err)
		}
		for subj := range info.State.Subjects {
			if k, ok := strings.CutPrefix(subj, prefix); ok {
				seen[k] = true
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Keys returns every key exactly (see Bucket). Watch options are not
// supported.
func (b *Bucket) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	if len(opts) > 0 {
		return nil, fmt.Errorf("list keys of kv bucket %s: watch options are not supported", b.Bucket())
	}
	return b.KeysMatching(ctx)
}

// ListKeys lists every key exactly (see Bucket). Watch options are not
// supported.
func (b *Bucket) ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	if len(opts) > 0 {
		return nil, fmt.Errorf("list keys of kv bucket %s: watch options are not supported", b.Bucket())
	}
	return b.ListKeysFiltered(ctx)
}

// ListKeysFiltered lists the keys matching any of filters exactly (see
// Bucket).
func (b *Bucket) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	keys, err := b.KeysMatching(ctx, filters...)
	if err != nil {
		return nil, err
	}
	ch := make(chan string, len(keys))
	for _, k := range keys {
		ch <- k
	}
	close(ch)
	return keyList(ch), nil
}

// Delete deletes key (opts as jetstream.KeyValue.Delete) and then removes
// its delete marker, and with it the key's history: nothing of a deleted
// key stays in the bucket. Watchers running at the time still see the
// delete.
func (b *Bucket) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := b.KeyValue.Delete(ctx, key, opts...); err != nil {
		return err
	}
	b.dropMarker(ctx, key)
	return nil
}

// Purge purges key (opts as jetstream.KeyValue.Purge) and then removes its
// purge marker, as Delete does.
func (b *Bucket) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := b.KeyValue.Purge(ctx, key, opts...); err != nil {
		return err
	}
	b.dropMarker(ctx, key)
	return nil
}

// dropMarker removes key's messages up to and including its last one if
// that is a delete or purge marker. A value written after the marker is
// past the purged range and survives. Best effort: a marker left behind
// only costs a listing one Get.
func (b *Bucket) dropMarker(ctx context.Context, key string) {
	subj := "$KV." + b.Bucket() + "." + key
	m, err := b.stream.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return
	}
	if op := m.Header.Get("KV-Operation"); op != "DEL" && op != "PURGE" {
		return
	}
	_ = b.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(m.Sequence+1))
}

// keyList is a listing already complete.
type keyList <-chan string

func (l keyList) Keys() <-chan string { return l }
func (l keyList) Stop() error         { return nil }
