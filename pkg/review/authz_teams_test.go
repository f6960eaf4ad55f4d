package review

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// fakeTeams answers team memberships from members ("org/slug" to logins),
// or fails while down.
type fakeTeams struct {
	mu      sync.Mutex
	members map[string][]string
	down    bool
	calls   int
}

func (f *fakeTeams) lookup(_ context.Context, org, slug, login string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return false, errors.New("team membership: 502 bad gateway")
	}
	for _, m := range f.members[org+"/"+slug] {
		if m == login {
			return true, nil
		}
	}
	return false, nil
}

// TestAuthorization_PolicyReviewers checks a repository's reviewer list:
// logins, "@org/team" teams looked up and cached like permissions, and an
// empty list meaning write permission.
func TestAuthorization_PolicyReviewers(t *testing.T) {
	t.Parallel()
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	tests := []struct {
		name      string
		reviewers []string
		login     string
		down      bool // GitHub fails every lookup after warming
		warm      bool
		wait      time.Duration
		want      bool
		wantErr   bool
	}{
		{name: "listed login", reviewers: []string{"Alice", "@acme/core"}, login: "alice", want: true},
		{name: "team member", reviewers: []string{"alice", "@acme/core"}, login: "bob", want: true},
		{name: "team names are case-insensitive", reviewers: []string{"@ACME/Core"}, login: "bob", want: true},
		{name: "not listed, not in the team, even with write permission", reviewers: []string{"alice", "@acme/core"}, login: "writer", want: false},
		{name: "empty list: write permission", reviewers: []string{}, login: "writer", want: true},
		{name: "empty list: no write permission", reviewers: []string{}, login: "bob", want: false},
		{name: "failed membership within max stale: the last answer", reviewers: []string{"@acme/core"}, login: "bob", warm: true, down: true, wait: 2 * time.Hour, want: true},
		{name: "failed membership with no answer: unknown, never no", reviewers: []string{"@acme/core"}, login: "bob", down: true, want: false, wantErr: true},
		{name: "failed membership too old: unknown", reviewers: []string{"@acme/core"}, login: "bob", warm: true, down: true, wait: 30 * time.Hour, want: false, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := &fakeGitHub{roles: map[string]string{"writer": "write"}}
			teams := &fakeTeams{members: map[string][]string{"acme/core": {"bob"}}}
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			a := NewAuthorization([]string{"operator"}, gh.lookup, time.Hour, 24*time.Hour).WithTeams(teams.lookup)
			a.now = clock.Now
			if tt.warm {
				require.True(t, a.ForReviewers(t.Context(), repo, tt.reviewers, nil).Authorized(tt.login))
			}
			clock.Advance(tt.wait)
			teams.down = tt.down
			p := a.ForReviewers(t.Context(), repo, tt.reviewers, nil)
			assert.Equal(t, tt.want, p.Authorized(tt.login))
			if tt.wantErr {
				require.ErrorIs(t, p.Err(), ErrPermissionUnknown)
			} else {
				require.NoError(t, p.Err())
			}
			assert.False(t, a.For(t.Context(), repo, nil).Authorized(tt.login) && tt.login != "operator", "For keeps the operator's list")
		})
	}
}

// TestAuthorization_TeamMembershipCached shows a membership is asked once
// while fresh.
func TestAuthorization_TeamMembershipCached(t *testing.T) {
	t.Parallel()
	teams := &fakeTeams{members: map[string][]string{"acme/core": {"bob"}}}
	a := NewAuthorization(nil, nil, time.Hour, time.Hour).WithTeams(teams.lookup)
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	for range 3 {
		assert.True(t, a.ForReviewers(t.Context(), repo, []string{"@acme/core"}, nil).Authorized("bob"))
	}
	assert.Equal(t, 1, teams.calls)
}
