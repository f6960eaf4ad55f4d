package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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
	RepositoryURL string    `json:"repository_url"`
	CreatedAt     time.Time `json:"created_at"`
	State         string    `json:"state"`
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
// syntax) and reads every result, in at most maxRequests requests (0: no
// bound; a result cut short is Incomplete). Searches have their own rate
// limit (30 a minute), apart from the core limit; a caller paces them.
//
// GitHub shows at most SearchResultCap results of a query, so a query that
// matches more is partitioned by creation time: results come sorted by
// created_at, newest first, and once a partition's first 1,000 are read
// the search goes on with q plus created:<=T, T the creation time of the
// oldest result read (searchPartition). Results of T's own second are
// read twice and kept once. A partition that cannot move on (more than
// 1,000 results created in one second) leaves the result Incomplete.
func (c *Client) SearchIssues(ctx context.Context, q string, maxRequests int) (SearchResult, error) {
	var res SearchResult
	seen := map[string]bool{}
	var until time.Time // zero: the first partition
	for {
		part := q
		if !until.IsZero() {
			part += " created:<=" + until.UTC().Format(time.RFC3339)
		}
		left := 0
		if maxRequests > 0 {
			left = maxRequests - res.Requests
		}
		pr, err := c.searchPages(ctx, part, left)
		res.Requests += pr.Requests
		if until.IsZero() {
			res.Total = pr.Total
		}
		res.Incomplete = res.Incomplete || pr.Incomplete
		for _, it := range pr.Items {
			k := it.RepositoryURL + "#" + strconv.Itoa(it.Number)
			if !seen[k] {
				seen[k] = true
				res.Items = append(res.Items, it)
			}
		}
		if err != nil {
			res.Incomplete = true
			return res, err
		}
		next, more := searchPartition(pr, until)
		if !more {
			break
		}
		if next.IsZero() || (maxRequests > 0 && res.Requests >= maxRequests) {
			res.Incomplete = true // stuck in one second, or out of requests
			break
		}
		until = next
	}
	if len(res.Items) < res.Total {
		res.Incomplete = true
	}
	return res, nil
}

// searchPartition decides, from one partition read up to GitHub's cap,
// whether the search goes on and where the next partition ends: at the
// creation time of the oldest result read. more without a next time means
// it cannot go on (the oldest second holds more than the cap, or the
// partition was cut short by its requests).
func searchPartition(p SearchResult, until time.Time) (next time.Time, more bool) {
	if len(p.Items) >= p.Total {
		return time.Time{}, false // read to its end
	}
	if len(p.Items) < min(p.Total, SearchResultCap) {
		return time.Time{}, true // cut short before the cap
	}
	oldest := p.Items[len(p.Items)-1].CreatedAt.UTC().Truncate(time.Second)
	if oldest.IsZero() || (!until.IsZero() && !oldest.Before(until)) {
		return time.Time{}, true
	}
	return oldest, true
}

// searchPages reads one partition's pages, sorted by created_at, newest
// first, up to SearchResultCap, in at most maxRequests requests (0: no
// bound).
func (c *Client) searchPages(ctx context.Context, q string, maxRequests int) (SearchResult, error) {
	var res SearchResult
	for page := 1; maxRequests <= 0 || page <= maxRequests; page++ {
		v := url.Values{"q": {q}, "sort": {"created"}, "order": {"desc"}, "per_page": {perPage}, "page": {strconv.Itoa(page)}}
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
	return res, nil
}
