package kvlease

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnchanged may be returned by an Update function to leave the key as it
// is; Update then returns it (wrapped or not, as the function did).
var ErrUnchanged = errors.New("unchanged")

// ErrContended is wrapped by Update's error when other writers won the
// compare-and-set every time it tried.
var ErrContended = errors.New("written by others meanwhile")

// Update is the compare-and-set loop on one key: it reads the key's value
// (nil at revision 0 when there is none), applies fn, and writes fn's
// result with Create (no value before) or with Update at the revision read,
// so a concurrent write is never lost. When another writer got there first
// it reads again and re-applies fn, up to attempts times in all. fn may
// therefore run more than once and must be free of side effects. It
// returns the stored value's new revision.
func Update(ctx context.Context, kv CASKV, key string, attempts int, fn func(cur []byte, rev uint64) ([]byte, error)) (uint64, error) {
	for range max(attempts, 1) {
		var cur []byte
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", key, err)
		default:
			cur, rev = e.Value(), e.Revision()
		}
		next, err := fn(cur, rev)
		if err != nil {
			return rev, err
		}
		written, err := Put(ctx, kv, key, next, rev)
		if err == nil {
			return written, nil
		}
		if !IsConflict(err) {
			return 0, fmt.Errorf("write %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("write %s: %w", key, ctx.Err())
		}
	}
	return 0, fmt.Errorf("write %s: %w %d times", key, ErrContended, max(attempts, 1))
}

// Put stores value at key if the key is still at revision rev (0: absent),
// and returns the new revision; IsConflict tells when it was not.
func Put(ctx context.Context, kv CASKV, key string, value []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return kv.Create(ctx, key, value)
	}
	return kv.Update(ctx, key, value, rev)
}
