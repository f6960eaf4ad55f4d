package state_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/state"
)

var pr = ghref.PR{Owner: "acme", Repo: "socket.io", Number: 9}

func TestKey_ValidKVKey(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "pr.acme.socket=2eio.9", state.Key(pr))
}

func TestStore_GetMissing(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	store, err := state.Ensure(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	_, _, err = store.Get(t.Context(), pr)
	assert.ErrorIs(t, err, state.ErrNotFound)
}

func TestStore_UpdateIsCompareAndSet(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx := t.Context()
	// Two independent connections, as two services would have.
	s1, err := state.Ensure(ctx, conn.JS, 1)
	require.NoError(t, err)
	s2, err := state.Ensure(ctx, natstest.Connect(t, conn).JS, 1)
	require.NoError(t, err)

	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		store := s1
		if w%2 == 1 {
			store = s2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := store.Update(ctx, pr, func(p *state.PR) error {
					p.Transitions++
					return nil
				})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	got, rev, err := s1.Get(ctx, pr)
	require.NoError(t, err)
	assert.Equal(t, writers*each, got.Transitions, "no increment lost")
	assert.Equal(t, uint64(writers*each), rev)
	assert.True(t, got.PR.Same(pr))
}

func TestStore_UpdateNoChangeAndError(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx := t.Context()
	store, err := state.Ensure(ctx, conn.JS, 1)
	require.NoError(t, err)
	_, err = store.Update(ctx, pr, func(p *state.PR) error {
		p.Status = events.StatusInProgress
		p.Escalations = map[events.Reason]time.Time{events.ReasonReviewTimeout: time.Unix(1, 0).UTC()}
		return nil
	})
	require.NoError(t, err)
	_, rev1, err := store.Get(ctx, pr)
	require.NoError(t, err)

	got, err := store.Update(ctx, pr, func(p *state.PR) error {
		p.Status = events.StatusApproved // must not be stored
		delete(p.Escalations, events.ReasonReviewTimeout)
		return state.ErrNoChange
	})
	require.NoError(t, err)
	assert.Equal(t, events.StatusInProgress, got.Status)
	assert.True(t, got.Escalated(), "ErrNoChange returns the record as stored, untouched by fn")
	boom := errors.New("boom")
	_, err = store.Update(ctx, pr, func(p *state.PR) error { return boom })
	assert.ErrorIs(t, err, boom)

	cur, rev2, err := store.Get(ctx, pr)
	require.NoError(t, err)
	assert.Equal(t, rev1, rev2, "neither ErrNoChange nor an error writes")
	assert.Equal(t, events.StatusInProgress, cur.Status)
	assert.True(t, cur.Escalated())
}

func TestStore_List(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	ctx := t.Context()
	store, err := state.Ensure(ctx, conn.JS, 1)
	require.NoError(t, err)
	got, err := store.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
	for n := 1; n <= 3; n++ {
		_, err := store.Update(ctx, ghref.PR{Owner: "acme", Repo: "w", Number: n}, func(p *state.PR) error { p.FixCycle = n; return nil })
		require.NoError(t, err)
	}
	got, err = store.List(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func TestParseKey_RoundTrip(t *testing.T) {
	t.Parallel()
	got, err := state.ParseKey(state.Key(ghref.PR{Owner: "Acme", Repo: "Socket.IO", Number: 12}))
	require.NoError(t, err)
	assert.Equal(t, "acme/socket.io#12", got.String())
	for _, bad := range []string{"pr.acme.w", "x.acme.w.1", "pr.acme.w.zero", "pr.Acme.w.1"} {
		_, err := state.ParseKey(bad)
		assert.Error(t, err, bad)
	}
}
