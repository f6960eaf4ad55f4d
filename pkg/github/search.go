package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
)

// SearchResultCap is how many results GitHub's search shows of one query
// at most ("REST API endpoints for search": "up to 1,000 results for each
// search", https://docs.github.com/rest/search/search). A query that
// matches more must be split (by repository set, by author) to see them all.
const SearchResultCap = 1000

// SearchItem is one result of an issue and pull request search: the issue
// form of a PR, with what a poller compares between two searches (updated_at,
// comment count, reactions rollup, labels) and where it lives.
type SearchItem struct {
	IssueSummary
	RepositoryURL string `json:"repository_url"`
	State         string `json:"state"`
	User          struct {
		Login string `json:"login"`
	} `json:"user"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// Repo is the repository the item belongs to, from its repository_url
// (".../repos/{owner}/{repo}").
func (i SearchItem) Repo() (ghref.Repo, error) {
	u, err := url.Parse(i.RepositoryURL)
	if err != nil {
		return ghref.Repo{}, fmt.Errorf("search item #%d: repository_url: %w", i.Number, err)
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(segs) < 3 || segs[len(segs)-3] != "repos" {
		return ghref.Repo{}, fmt.Errorf("search item #%d: repository_url %q names no repository", i.Number, i.RepositoryURL)
	}
	r := ghref.Repo{Owner: segs[len(segs)-2], Name: segs[len(segs)-1]}
	return r, r.Validate()
}

// SearchResult is every item a search shows, and how many it matched.
type SearchResult struct {
	Items []SearchItem
	// Total is GitHub's total_count; more than len(Items) when the query
	// matched more than SearchResultCap.
	Total int
	// Incomplete is GitHub's incomplete_results (the search timed out) or a
	// Total above what could be read: Items is then not the whole match.
	Incomplete bool
	// Requests is how many search requests it took.
	Requests int
}

// SearchIssues runs an issue and pull request search (q in GitHub's search
// syntax), sorted by updated_at, newest first, and reads every page up to
// SearchResultCap, in at most maxRequests requests (0: no bound; a result
// cut short is Incomplete). Searches have their own rate limit (30 a
// minute), apart from the core limit; a caller paces them.
func (c *Client) SearchIssues(ctx context.Context, q string, maxRequests int) (SearchResult, error) {
	var res SearchResult
	for page := 1; maxRequests <= 0 || page <= maxRequests; page++ {
		v := url.Values{"q": {q}, "sort": {"updated"}, "order": {"desc"}, "per_page": {perPage}, "page": {strconv.Itoa(page)}}
		body, _, err := doJSON[struct {
			TotalCount        int          `json:"total_count"`
			IncompleteResults bool         `json:"incomplete_results"`
			Items             []SearchItem `json:"items"`
		}](ctx, c, http.MethodGet, "search/issues?"+v.Encode(), nil, true)
		res.Requests++
		if err != nil {
			return res, fmt.Errorf("search issues (page %d): %w", page, err)
		}
		res.Total = body.TotalCount
		res.Incomplete = res.Incomplete || body.IncompleteResults
		res.Items = append(res.Items, body.Items...)
		shown := min(res.Total, SearchResultCap)
		if len(body.Items) == 0 || len(res.Items) >= shown {
			break
		}
	}
	if len(res.Items) < res.Total {
		res.Incomplete = true
	}
	return res, nil
}
