package github

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
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

// TestClient_SearchIssuesPartitionsPastTheCap: GitHub shows at most 1,000
// results of a query ("REST API endpoints for search"); an organisation
// with 1,050 matching PRs is read whole, in partitions by creation time,
// each PR once.
func TestClient_SearchIssuesPartitionsPastTheCap(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	other, err := e.sim.CreateRepo(e.repo.Owner, "other", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	want := map[string]bool{}
	for i := range 7 { // 150 PRs a second, in two repositories
		for _, r := range []ghref.Repo{e.repo, other} {
			prs, err := e.sim.OpenPRs(r, 75, "agent")
			require.NoError(t, err)
			for _, p := range prs {
				want[p.Key()] = true
			}
		}
		e.sim.Advance(time.Duration(i+1) * time.Second)
	}
	q := "is:pr is:open user:" + e.repo.Owner + " author:agent"

	res, err := e.client.SearchIssues(t.Context(), q, 0)
	require.NoError(t, err)
	assert.Equal(t, 1050, res.Total)
	assert.False(t, res.Incomplete)
	got := map[string]bool{}
	for _, it := range res.Items {
		r, err := it.Repo()
		require.NoError(t, err)
		got[r.PR(it.Number).Key()] = true
	}
	assert.Len(t, res.Items, 1050, "each PR once")
	assert.Equal(t, want, got)
	assert.Equal(t, 12, res.Requests, "ten pages to the cap, then the 150 of the oldest second (read twice) and the rest: two more")

	res, err = e.client.SearchIssues(t.Context(), q, 10)
	require.NoError(t, err)
	assert.Len(t, res.Items, 1000)
	assert.True(t, res.Incomplete, "cut short by its bound")
}

// TestSearchPartition decides where a search goes on after a partition.
func TestSearchPartition(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	items := func(n int, oldest time.Time) []SearchItem {
		out := make([]SearchItem, n)
		if n > 0 {
			out[n-1].CreatedAt = oldest
		}
		return out
	}
	tests := []struct {
		name     string
		p        SearchResult
		until    time.Time
		wantNext time.Time
		wantMore bool
	}{
		{name: "read to its end", p: SearchResult{Items: items(40, t0), Total: 40}},
		{name: "past the cap: on from the oldest second", p: SearchResult{Items: items(1000, t0.Add(500*time.Millisecond)), Total: 1200}, wantNext: t0, wantMore: true},
		{name: "cut short by its requests", p: SearchResult{Items: items(300, t0), Total: 1200}, wantMore: true},
		{name: "stuck in one second", p: SearchResult{Items: items(1000, t0), Total: 1100}, until: t0, wantMore: true},
		{name: "a later partition moves on", p: SearchResult{Items: items(1000, t0), Total: 1100}, until: t0.Add(time.Hour), wantNext: t0, wantMore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, more := searchPartition(tt.p, tt.until)
			assert.Equal(t, tt.wantMore, more)
			assert.True(t, tt.wantNext.Equal(next), "next %s, want %s", next, tt.wantNext)
		})
	}
}
