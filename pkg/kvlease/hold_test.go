package kvlease_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/kvlease"
)

// TestLease_Hold: the work's context ends when the lease is lost, and
// release frees the lease even after the caller's context ended (a
// shutdown), so the next holder need not wait out the TTL.
func TestLease_Hold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// end ends the work: cancel the caller's context, or lose the lease.
		end       func(t *testing.T, cancel context.CancelFunc, kv kvlease.KV)
		wantCause error
	}{
		{
			name:      "caller's context cancelled",
			end:       func(_ *testing.T, cancel context.CancelFunc, _ kvlease.KV) { cancel() },
			wantCause: context.Canceled,
		},
		{
			name: "lease lost",
			end: func(t *testing.T, _ context.CancelFunc, kv kvlease.KV) {
				require.NoError(t, kv.Delete(t.Context(), "lock.h"))
			},
			wantCause: kvlease.ErrLost,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kv := bucket(t)
			opts := kvlease.Options{TTL: 300 * time.Millisecond}
			l, err := kvlease.Acquire(t.Context(), kv, "lock.h", "replica-a", opts)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wctx, release := l.Hold(ctx)
			require.NoError(t, wctx.Err())

			tt.end(t, cancel, kv)
			require.Eventually(t, func() bool { return wctx.Err() != nil }, 10*time.Second, 5*time.Millisecond)
			assert.ErrorIs(t, context.Cause(wctx), tt.wantCause)
			release()

			// Free at once, well within the TTL: released, not expired.
			_, ok, err := kvlease.Peek(t.Context(), kv, "lock.h")
			require.NoError(t, err)
			assert.False(t, ok, "the lease was released")
			_, err = kvlease.Acquire(t.Context(), kv, "lock.h", "replica-b", kvlease.Options{TTL: time.Hour})
			require.NoError(t, err, "the next holder takes it")
		})
	}
}

// TestUpdate: the compare-and-set loop loses no concurrent write, leaves
// the key alone on ErrUnchanged, and gives up with ErrContended.
func TestUpdate(t *testing.T) {
	t.Parallel()
	incr := func(cur []byte, _ uint64) ([]byte, error) {
		var n int
		if cur != nil {
			if err := json.Unmarshal(cur, &n); err != nil {
				return nil, err
			}
		}
		return json.Marshal(n + 1)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, kv kvlease.KV) (want int)
	}{
		{
			name: "concurrent writers all count",
			run: func(t *testing.T, kv kvlease.KV) int {
				const writers = 8
				var wg sync.WaitGroup
				for range writers {
					wg.Go(func() {
						_, err := kvlease.Update(t.Context(), kv, "n", 100, incr)
						assert.NoError(t, err)
					})
				}
				wg.Wait()
				return writers
			},
		},
		{
			name: "unchanged leaves the key",
			run: func(t *testing.T, kv kvlease.KV) int {
				_, err := kvlease.Update(t.Context(), kv, "n", 3, incr)
				require.NoError(t, err)
				_, err = kvlease.Update(t.Context(), kv, "n", 3, func([]byte, uint64) ([]byte, error) {
					return nil, kvlease.ErrUnchanged
				})
				require.ErrorIs(t, err, kvlease.ErrUnchanged)
				return 1
			},
		},
		{
			name: "contended every time",
			run: func(t *testing.T, kv kvlease.KV) int {
				calls := 0
				_, err := kvlease.Update(t.Context(), kv, "n", 3, func(cur []byte, rev uint64) ([]byte, error) {
					calls++
					// Another writer gets in between this read and its write.
					_, err := kvlease.Update(t.Context(), kv, "n", 1, incr)
					require.NoError(t, err)
					return incr(cur, rev)
				})
				require.ErrorIs(t, err, kvlease.ErrContended)
				assert.Equal(t, 3, calls)
				return 3
			},
		},
		{
			name: "fn's error is returned as it is",
			run: func(t *testing.T, kv kvlease.KV) int {
				boom := errors.New("boom")
				_, err := kvlease.Update(t.Context(), kv, "n", 3, func([]byte, uint64) ([]byte, error) { return nil, boom })
				require.Equal(t, boom, err)
				return 0
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kv := bucket(t)
			want := tt.run(t, kv)
			var got int
			if e, err := kv.Get(t.Context(), "n"); err == nil {
				require.NoError(t, json.Unmarshal(e.Value(), &got))
			}
			assert.Equal(t, want, got)
		})
	}
}
