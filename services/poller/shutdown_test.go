package poller_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// slowRestore is a state store whose List lasts until shutdown, as a
// restore from a slow or unreachable NATS does.
type slowRestore struct {
	poller.Store
	listing chan struct{}
	once    sync.Once
}

func (s *slowRestore) List(ctx context.Context) ([]state.PR, error) {
	s.once.Do(func() { close(s.listing) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// countedKicks counts subscriptions: the first thing Run starts after
// the restore.
type countedKicks struct{ subscribed atomic.Int32 }

func (k *countedKicks) Publish(ghref.PR) error { return nil }
func (k *countedKicks) Subscribe(context.Context, func(ghref.PR)) error {
	k.subscribed.Add(1)
	return nil
}

var _ poller.KickBus = (*countedKicks)(nil)

// TestPoller_ShutdownDuringRestoreStartsNothing: a shutdown while the
// poller restores its watched PRs is a clean stop, and nothing of the
// running poller starts with the cancelled context.
func TestPoller_ShutdownDuringRestoreStartsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store := &slowRestore{Store: e.store, listing: make(chan struct{})}
	kicks := &countedKicks{}
	s := poller.New(e.config(), poller.Deps{
		GitHub: e.client, Store: store, JS: e.conn.JS, Log: quiet(), Self: "prloop-bot",
		Kicks: kicks, Metrics: metrics.NewPoller(e.reg),
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-store.listing:
	case <-time.After(waitFor):
		t.Fatal("the poller never restored its watched PRs")
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a shutdown is not an error")
	case <-time.After(waitFor):
		t.Fatal("the poller did not stop")
	}
	assert.Zero(t, kicks.subscribed.Load(), "nothing starts after a shutdown during restore")
}
