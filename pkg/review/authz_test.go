package review

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// fakeGitHub answers permission lookups from roles, or fails while down.
type fakeGitHub struct {
	mu    sync.Mutex
	roles map[string]string
	down  bool
	calls int
}

func (f *fakeGitHub) lookup(_ context.Context, _ ghref.Repo, login string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return "", errors.New("get permission: 502 bad gateway")
	}
	if r, ok := f.roles[login]; ok {
		return r, nil
	}
	return "none", nil
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// TestAuthorization_FailedLookupNeverFlipsAVerdict shows that a lookup
// that fails after the cache's TTL serves the last known answer, and that
// one with no known answer makes the evaluation unknown rather than
// unauthorized.
func TestAuthorization_FailedLookupNeverFlipsAVerdict(t *testing.T) {
	t.Parallel()
	const ttl, maxStale = time.Hour, 24 * time.Hour
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	approved := Signals{Reactions: []Reaction{react(alice, "+1", after)}}
	tests := []struct {
		name string
		// warm is looked up while GitHub answers, then the clock moves on by
		// wait and GitHub goes down.
		warm       bool
		aliceRole  string
		wait       time.Duration
		wantStatus events.Status
		wantErr    bool
		wantStale  bool
		wantCalls  int
	}{
		{name: "fresh answer: no lookup", warm: true, aliceRole: "write", wait: ttl / 2, wantStatus: events.StatusApproved, wantCalls: 1},
		{name: "expired approver stays an approver", warm: true, aliceRole: "write", wait: ttl + time.Minute, wantStatus: events.StatusApproved, wantStale: true, wantCalls: 2},
		{name: "expired non-approver stays one", warm: true, aliceRole: "read", wait: ttl + time.Minute, wantStatus: events.StatusPending, wantStale: true, wantCalls: 2},
		{name: "never looked up: unknown, not unauthorized", aliceRole: "write", wantErr: true, wantCalls: 1},
		{name: "too old to stand in: unknown", warm: true, aliceRole: "write", wait: ttl + maxStale, wantErr: true, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := &fakeGitHub{roles: map[string]string{"alice": tt.aliceRole}}
			clock := &fakeClock{now: t0}
			a := NewAuthorization(nil, gh.lookup, ttl, maxStale)
			a.now = clock.Now
			if tt.warm {
				perms := a.For(t.Context(), repo, nil)
				Evaluate(approved, head, emojiOnly, perms.Authorized)
				require.NoError(t, perms.Err())
			}
			clock.Advance(tt.wait)
			gh.down = true

			var logs bytes.Buffer
			perms := a.For(t.Context(), repo, slog.New(slog.NewTextHandler(&logs, nil)))
			v := Evaluate(approved, head, emojiOnly, perms.Authorized)
			assert.Equal(t, tt.wantCalls, gh.calls, "lookups")
			if tt.wantErr {
				require.ErrorIs(t, perms.Err(), ErrPermissionUnknown)
				assert.ErrorContains(t, perms.Err(), "alice")
				return
			}
			require.NoError(t, perms.Err())
			assert.Equal(t, tt.wantStatus, v.Status)
			if tt.wantStale {
				assert.Contains(t, logs.String(), "using the last known answer")
			} else {
				assert.Empty(t, logs.String())
			}
		})
	}
}

// TestAuthorization_CacheIsBounded shows that answers too old to serve are
// evicted and that the cache never holds more than its cap.
func TestAuthorization_CacheIsBounded(t *testing.T) {
	t.Parallel()
	const ttl, maxStale = time.Minute, time.Hour
	tests := []struct {
		name    string
		size    int
		logins  int
		step    time.Duration // between lookups
		wantMax int
	}{
		{name: "cap holds many reviewers", size: 100, logins: 1000, wantMax: 100},
		{name: "old answers evicted", size: 10000, logins: 500, step: time.Minute, wantMax: int((ttl+maxStale)/time.Minute) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := &fakeGitHub{roles: map[string]string{}}
			clock := &fakeClock{now: t0}
			a := NewAuthorization(nil, gh.lookup, ttl, maxStale)
			a.now, a.size = clock.Now, tt.size
			repo := ghref.Repo{Owner: "acme", Name: "widgets"}
			for i := range tt.logins {
				a.For(t.Context(), repo, nil).Authorized(fmt.Sprintf("user%d", i))
				require.LessOrEqual(t, a.Len(), tt.wantMax, "after %d lookups", i+1)
				clock.Advance(tt.step)
			}
			assert.Equal(t, tt.logins, gh.calls)
		})
	}
}
