package ghsim_test

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// searchPath is GET /search/issues for q, sorted by updated, newest first.
func searchPath(q string, page int) string {
	v := url.Values{"q": {q}, "sort": {"updated"}, "order": {"desc"}, "per_page": {"100"}}
	if page > 0 {
		v.Set("page", strconv.Itoa(page))
	}
	return "/search/issues?" + v.Encode()
}

// TestContract_SearchIssuesFindsPRsByQualifier: "Search issues and pull
// requests" (https://docs.github.com/rest/search/search#search-issues-and-pull-requests)
// answers {total_count, incomplete_results, items}; each item is the issue
// form of a PR (pull_request set) with its reactions rollup, comment count,
// labels and updated_at, which is what a poller compares. Qualifiers
// ("Searching issues and pull requests", https://docs.github.com/search-github/searching-on-github/searching-issues-and-pull-requests):
// is:pr, is:open, org:/user:, repo:, author:, label:.
func TestContract_SearchIssuesFindsPRsByQualifier(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	other, err := e.sim.CreateRepo("acme", "tools", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	agentPRs, err := e.sim.OpenPRs(other, 3, "agent")
	require.NoError(t, err)
	_, err = e.sim.OpenPRs(other, 2, "someone")
	require.NoError(t, err)
	require.NoError(t, e.sim.ClosePR(agentPRs[2]))
	_, err = e.sim.AddReaction(agentPRs[0], "alice", "eyes")
	require.NoError(t, err)

	tests := []struct {
		name string
		q    string
		want int
	}{
		{name: "an organisation's open PRs by an author", q: "is:pr is:open org:acme author:agent", want: 2},
		{name: "user: is an owner too", q: "is:pr is:open user:acme author:agent", want: 2},
		{name: "closed ones too without is:open", q: "is:pr org:acme author:agent", want: 3},
		{name: "a repository", q: "is:pr is:open repo:acme/tools", want: 4},
		{name: "another owner", q: "is:pr is:open org:octo", want: 1},
		{name: "no plain issues in the simulator", q: "is:issue org:acme", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, e.srv, "GET", searchPath(tt.q, 0), tokBot, nil)
			require.Equal(t, 200, r.StatusCode, string(r.body))
			var got struct {
				TotalCount        int              `json:"total_count"`
				IncompleteResults bool             `json:"incomplete_results"`
				Items             []map[string]any `json:"items"`
			}
			r.json(t, &got)
			assert.Equal(t, tt.want, got.TotalCount)
			assert.Len(t, got.Items, tt.want)
			assert.False(t, got.IncompleteResults)
			assert.Equal(t, "search", r.Header.Get("X-RateLimit-Resource"))
			for _, it := range got.Items {
				assert.NotNil(t, it["pull_request"])
				assert.Contains(t, it, "reactions")
				assert.Contains(t, it, "comments")
				assert.Contains(t, it, "updated_at")
				assert.Contains(t, it, "score")
			}
		})
	}

	r := call(t, e.srv, "GET", searchPath("is:pr is:open org:acme author:agent", 0), tokBot, nil)
	var got struct {
		Items []struct {
			Number    int `json:"number"`
			Reactions struct {
				Eyes int `json:"eyes"`
			} `json:"reactions"`
		} `json:"items"`
	}
	r.json(t, &got)
	require.Len(t, got.Items, 2)
	eyes := map[int]int{}
	for _, it := range got.Items {
		eyes[it.Number] = it.Reactions.Eyes
	}
	assert.Equal(t, 1, eyes[agentPRs[0].Number], "the reactions rollup shows in the search result")

	r = call(t, e.srv, "GET", "/search/issues?q="+url.QueryEscape("is:pr fix the bug"), tokBot, nil)
	assert.Equal(t, 422, r.StatusCode, "free text is not simulated: refused, not answered wrongly")
}

// TestContract_SearchLimits: the search API allows an authenticated user
// 30 requests a minute, apart from the core limit, and shows at most the
// first 1,000 results of a query ("REST API endpoints for search", Rate
// limit; https://docs.github.com/rest/search/search).
func TestContract_SearchLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	big, err := e.sim.CreateRepo("acme", "big", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	_, err = e.sim.OpenPRs(big, 1005, "agent")
	require.NoError(t, err)
	q := "is:pr is:open repo:acme/big"

	before := e.sim.Stats().Counted
	r := call(t, e.srv, "GET", searchPath(q, 10), tokBot, nil)
	require.Equal(t, 200, r.StatusCode, string(r.body))
	var got struct {
		TotalCount int              `json:"total_count"`
		Items      []map[string]any `json:"items"`
	}
	r.json(t, &got)
	assert.Equal(t, 1005, got.TotalCount, "total_count counts every match")
	assert.Len(t, got.Items, 100, "page 10 ends at the 1,000th result")
	assert.NotContains(t, r.Header.Get("Link"), `rel="next"`)
	assert.Equal(t, before, e.sim.Stats().Counted, "searches do not count against the core limit")

	r = call(t, e.srv, "GET", searchPath(q, 11), tokBot, nil)
	assert.Equal(t, 422, r.StatusCode, "results past the 1,000th are not available")

	ok := 2 // the two above
	for range 40 {
		r = call(t, e.srv, "GET", searchPath("is:pr org:octo", 0), tokBot, nil)
		if r.StatusCode != 200 {
			break
		}
		ok++
	}
	assert.Equal(t, 30, ok, "30 searches a minute")
	assert.Equal(t, 403, r.StatusCode)
	assert.Equal(t, "search", r.Header.Get("X-RateLimit-Resource"))
	assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, 200, call(t, e.srv, "GET", "/repos/octo/socket.io/pulls", tokBot, nil).StatusCode, "the core limit is untouched")
	assert.Equal(t, 200, call(t, e.srv, "GET", searchPath("is:pr org:octo", 0), tokAlice, nil).StatusCode, "the limit is per user")

	e.sim.Advance(61e9)
	assert.Equal(t, 200, call(t, e.srv, "GET", searchPath("is:pr org:octo", 0), tokBot, nil).StatusCode, "a minute later")
}

// TestContract_OwnerRepositoriesListArchivedToo: "List organization
// repositories" (https://docs.github.com/rest/repos/repos#list-organization-repositories)
// and "List repositories for a user" list every repository of the owner,
// archived ones marked "archived": true; a deleted repository is gone.
func TestContract_OwnerRepositoriesListArchivedToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	a, err := e.sim.CreateRepo("acme", "a", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	b, err := e.sim.CreateRepo("acme", "b", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	require.NoError(t, e.sim.SetArchived(b, true))

	for _, path := range []string{"/orgs/acme/repos", "/users/acme/repos"} {
		r := call(t, e.srv, "GET", path+"?per_page=100", tokBot, nil)
		require.Equal(t, 200, r.StatusCode, path)
		archived := map[string]bool{}
		for _, it := range r.list(t) {
			archived[it["full_name"].(string)] = it["archived"].(bool)
		}
		assert.Equal(t, map[string]bool{a.String(): false, b.String(): true}, archived, path)
	}
	require.NoError(t, e.sim.DeleteRepo(a))
	r := call(t, e.srv, "GET", "/orgs/acme/repos", tokBot, nil)
	assert.Len(t, r.list(t), 1)
	assert.Equal(t, 404, call(t, e.srv, "GET", "/repos/acme/a", tokBot, nil).StatusCode)
	assert.Equal(t, 404, call(t, e.srv, "GET", "/orgs/nobody/repos", tokBot, nil).StatusCode)
}

// TestContract_InstallationRepositories: "List repositories accessible to
// the app installation" (https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation)
// answers {total_count, repository_selection, repositories} to an
// installation token, and refuses any other token with a 403.
func TestContract_InstallationRepositories(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	a, err := e.sim.CreateRepo("acme", "a", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	e.sim.AddToken("tok-inst", "prloop[bot]")
	e.sim.SetInstallationRepos("tok-inst", e.repo, a)

	r := call(t, e.srv, "GET", "/installation/repositories?per_page=100", "tok-inst", nil)
	require.Equal(t, 200, r.StatusCode, string(r.body))
	var got struct {
		TotalCount          int    `json:"total_count"`
		RepositorySelection string `json:"repository_selection"`
		Repositories        []struct {
			FullName string `json:"full_name"`
			Archived bool   `json:"archived"`
		} `json:"repositories"`
	}
	r.json(t, &got)
	assert.Equal(t, 2, got.TotalCount)
	assert.Equal(t, "selected", got.RepositorySelection)
	require.Len(t, got.Repositories, 2)
	assert.ElementsMatch(t, []string{e.repo.String(), a.String()}, []string{got.Repositories[0].FullName, got.Repositories[1].FullName})
	assert.Equal(t, 403, call(t, e.srv, "GET", "/installation/repositories", tokBot, nil).StatusCode, "not an installation token")
}

// TestContract_SearchByCreated: the created: qualifier ("Searching issues
// and pull requests", Search by when an issue or pull request was created
// or last updated, https://docs.github.com/search-github/searching-on-github/searching-issues-and-pull-requests#search-by-when-an-issue-or-pull-request-was-created-or-last-updated;
// its forms in "Understanding the search syntax", Query for dates) takes
// >, >=, <, <=, a range X..Y with both ends included, an open end *, and a
// date or an ISO 8601 time. It is how a query of more than the 1,000
// results a search shows is partitioned.
func TestContract_SearchByCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	r, err := e.sim.CreateRepo("acme", "dates", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	t0 := e.sim.Now().Truncate(time.Second)
	for range 3 { // one PR at t0, t0+1h, t0+2h
		_, err := e.sim.OpenPRs(r, 1, "agent")
		require.NoError(t, err)
		e.sim.Advance(time.Hour)
	}
	at := func(d time.Duration) string { return t0.Add(d).UTC().Format(time.RFC3339) }
	tests := []struct {
		name string
		q    string
		want int
	}{
		{name: "at or before", q: "created:<=" + at(time.Hour), want: 2},
		{name: "before", q: "created:<" + at(time.Hour), want: 1},
		{name: "at or after", q: "created:>=" + at(time.Hour), want: 2},
		{name: "after", q: "created:>" + at(time.Hour), want: 1},
		{name: "a range includes both ends", q: "created:" + at(0) + ".." + at(time.Hour), want: 2},
		{name: "an open end", q: "created:*.." + at(0), want: 1},
		{name: "a day", q: "created:" + t0.Format("2006-01-02") + "..*", want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, e.srv, "GET", searchPath("is:pr repo:acme/dates "+tt.q, 0), tokBot, nil)
			require.Equal(t, 200, res.StatusCode, string(res.body))
			var got struct {
				TotalCount int `json:"total_count"`
			}
			res.json(t, &got)
			assert.Equal(t, tt.want, got.TotalCount)
		})
	}
	assert.Equal(t, 422, call(t, e.srv, "GET", searchPath("is:pr created:yesterday", 0), tokBot, nil).StatusCode)
}
