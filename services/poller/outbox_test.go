package poller_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// brokenStore is a state store whose writes fail while broken is set: the
// update function runs (as it does before a compare-and-set), and then the
// write is refused, as when JetStream cannot store it.
type brokenStore struct {
	*state.Store
	broken  atomic.Bool
	refused atomic.Int64
}

var _ poller.Store = (*brokenStore)(nil)

func (b *brokenStore) Update(ctx context.Context, pr ghref.PR, fn func(*state.PR) error) (state.PR, error) {
	if !b.broken.Load() {
		return b.Store.Update(ctx, pr, fn)
	}
	cur, _, err := b.Get(ctx, pr)
	if errors.Is(err, state.ErrNotFound) {
		cur, err = state.PR{PR: pr}, nil
	}
	if err != nil {
		return cur, err
	}
	next := cur
	if err := fn(&next); err != nil {
		return cur, err
	}
	b.refused.Add(1)
	return cur, errors.New("write state: injected failure")
}

// TestPoller_NoEventBeforeItsStateIsStored: the poller publishes an event
// only after the record it follows from is stored (see "Side effects" in
// package state). Before, it published from inside the compare-and-set
// function, so while the record could not be written the stream said
// "approved" and the poller's record did not: a later look that saw the
// approval gone found no change to announce.
func TestPoller_NoEventBeforeItsStateIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store := &brokenStore{Store: e.store}
	s := poller.New(e.config(), poller.Deps{
		GitHub: e.client, Store: store, JS: e.conn.JS, Log: quiet(), Self: "prloop-bot",
		Merged: poller.MergedByPrloop(e.conn.JS), Now: e.sim.Now, Metrics: metrics.NewPoller(e.reg),
	})
	e.run(s)
	e.watchPending()

	store.broken.Store(true)
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	// The poller decides "approved" again and again, and cannot store it.
	require.Eventually(t, func() bool { return store.refused.Load() >= 3 }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 0, e.rec.Count(e.pr, events.TypeReviewApproved), "an approval announced that the poller's record does not hold")

	store.broken.Store(false)
	approved := e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
	rec, _, err := e.store.Get(t.Context(), e.pr)
	require.NoError(t, err)
	assert.Equal(t, events.StatusApproved, rec.Status)
	assert.Equal(t, approved.ID, rec.LastEventID)
	require.Eventually(t, func() bool {
		rec, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && len(rec.Outbox) == 0
	}, waitFor, 10*time.Millisecond, "the outbox is emptied once its events are published")
}

// TestPoller_OutboxLeftByACrashIsPublishedAtStart: a poller that stored a
// decision and died before publishing its events leaves them in the
// record's outbox; the next poller publishes them before anything else.
func TestPoller_OutboxLeftByACrashIsPublishedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev, err := events.NewEmitter(e.conn.JS, poller.Name).Build(&events.ReviewInProgress{
		Base: events.Base{PR: e.pr, HeadSHA: "0123456789abcdef0123456789abcdef01234567"}, Status: events.StatusInProgress, Actor: "alice",
	}, "0123456789ab", "1")
	require.NoError(t, err)
	_, err = e.store.Update(t.Context(), e.pr, func(p *state.PR) error {
		p.Status, p.Transitions, p.Outbox = events.StatusInProgress, 1, append(p.Outbox, ev)
		return nil
	})
	require.NoError(t, err)

	e.start(e.config())
	got := e.rec.Wait(t, e.pr, events.TypeReviewInProgress, waitFor)
	assert.Equal(t, ev.ID(), got.ID)
	require.Eventually(t, func() bool {
		rec, _, err := e.store.Get(t.Context(), e.pr)
		return err == nil && len(rec.Outbox) == 0
	}, waitFor, 10*time.Millisecond)
}
