package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_SearchIssuesReadsEveryPageWithinItsBound: a search of 150 PRs
// is two requests, each item naming its repository; bounded to one
// request, it is marked incomplete, so that a caller does not take the PRs
// it did not show as gone.
func TestClient_SearchIssuesReadsEveryPageWithinItsBound(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	_, err := e.sim.OpenPRs(e.repo, 150, "agent")
	require.NoError(t, err)
	q := "is:pr is:open user:" + e.repo.Owner + " author:agent"

	res, err := e.client.SearchIssues(t.Context(), q, 0)
	require.NoError(t, err)
	assert.Equal(t, 150, res.Total)
	assert.Len(t, res.Items, 150)
	assert.Equal(t, 2, res.Requests)
	assert.False(t, res.Incomplete)
	repo, err := res.Items[0].Repo()
	require.NoError(t, err)
	assert.Equal(t, e.repo, repo)
	assert.True(t, res.Items[0].IsPull())

	res, err = e.client.SearchIssues(t.Context(), q, 1)
	require.NoError(t, err)
	assert.Len(t, res.Items, 100)
	assert.True(t, res.Incomplete, "cut short by its bound")
}
