package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_GetFileAndTeamMembership reads a file at a commit (the
// second read of the same commit is a conditional request GitHub answers
// 304) and team memberships.
func TestClient_GetFileAndTeamMembership(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	ctx := t.Context()
	sha, err := e.sim.PushCommit(e.repo, "main", "alice", map[string]string{".github/prloop.yml": "version: 1\n"}, "policy")
	require.NoError(t, err)

	f, err := e.client.GetFile(ctx, e.repo, ".github/prloop.yml", sha)
	require.NoError(t, err)
	assert.Equal(t, "version: 1\n", string(f.Data))
	assert.Len(t, f.SHA, 40)
	e.reset()
	again, err := e.client.GetFile(ctx, e.repo, ".github/prloop.yml", sha)
	require.NoError(t, err)
	assert.Equal(t, f, again)
	assert.Equal(t, 1, e.stats(t).ByRouteStatus["GET /repos/{owner}/{repo}/contents/{path...}"][304], "the same commit's file is a free 304")

	_, err = e.client.GetFile(ctx, e.repo, ".github/none.yml", sha)
	require.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, e.sim.SetTeamMember("acme", "core", "bob", "active"))
	require.NoError(t, e.sim.SetTeamMember("acme", "core", "carol", "pending"))
	for login, want := range map[string]bool{"bob": true, "carol": false, "dave": false} {
		got, err := e.client.IsTeamMember(ctx, "acme", "core", login)
		require.NoError(t, err, login)
		assert.Equal(t, want, got, login)
	}
}
