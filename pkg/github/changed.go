package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// listIfChanged reads every page of u like listAll, but returns the items
// only when the list differs from the version the caller saw last (prev, a
// value an earlier call returned). The version is a digest of the pages'
// ETags; when every page revalidates to the same ETags, the pages are not
// decoded at all and items is nil. A poller reading a hundred unchanged
// 100-item lists per tick spends its CPU on nothing else, so this matters.
//
// When u is sorted by updated_at, newest first (sortedByUpdated), the walk
// also stops early: a full page that revalidates unchanged, after which
// the previous walk found an empty page, ends it (see earlyStop). That
// spares the empty page a list of exactly 100 items costs on every probe.
func listIfChanged[T any](ctx context.Context, c *Client, u, prev string) (items []T, version string, err error) {
	var pages []*lazySink
	h := sha256.New()
	versioned := true
	stopAt := ""
	if _, prevPrefix, ok := strings.Cut(prev, ":"); ok && sortedByUpdated(u) {
		stopAt = prevPrefix
	}
	prefix, stopped := "", false
	err = c.walkPages(u, func(u string) (*gh.Response, int, error) {
		sink := &lazySink{}
		resp, err := c.send(ctx, http.MethodGet, u, nil, sink, true)
		if err != nil {
			return nil, 0, err
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			versioned = false
		}
		if sink.Items() == 0 && len(pages) > 0 && versioned {
			// The list ended with an empty page: remember the digest of the
			// pages before it (earlyStop).
			prefix = hex.EncodeToString(h.Sum(nil))
		}
		h.Write([]byte(etag))
		h.Write([]byte{0})
		pages = append(pages, sink)
		if versioned && stopAt != "" && sink.Items() > 0 && hex.EncodeToString(h.Sum(nil)) == stopAt {
			stopped = true
			return nil, 0, errStopWalk
		}
		return resp, sink.Items(), nil
	})
	if stopped && errors.Is(err, errStopWalk) {
		return nil, prev, nil
	}
	if err != nil {
		return nil, "", err
	}
	if versioned {
		version = hex.EncodeToString(h.Sum(nil))
		if prefix != "" {
			version += ":" + prefix
		}
		if version == prev {
			return nil, version, nil
		}
	}
	items = []T{}
	for i, sink := range pages {
		body, err := sink.Bytes()
		if err != nil {
			return nil, "", err
		}
		var page []T
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, "", &DecodeError{Route: "GET " + pathOnly(u), Err: fmt.Errorf("page %d: %w", i+1, err)}
		}
		items = append(items, page...)
	}
	return items, version, nil
}

// errStopWalk ends a walk of pages early (earlyStop); it never leaves this
// file.
var errStopWalk = errors.New("stop the walk")

// earlyStop is why a list sorted by updated_at, newest first, may be read
// without its trailing empty page. An item joins such a list only by being
// opened or reopened, and both move its updated_at to now: it appears at
// the top of page 1, which then changes. Every other change (a push, a
// label, a comment, a reaction, a close) alters the page that holds the
// item. So when pages 1..k revalidate to the ETags they had and page k+1
// was empty last time, page k+1 is still empty. A list sorted otherwise (by
// creation, oldest first) can gain an item on a later page with no byte of
// the earlier ones changing (issue 12), so it is always walked to the end.
func sortedByUpdated(u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	q := pu.Query()
	return q.Get("sort") == "updated" && q.Get("direction") == "desc"
}

// PullSummary is the part of a pull request a poller reads from the open
// pulls list. Decoding only these fields, instead of go-github's full type
// with its two embedded repositories, keeps a 10,000-PR poller's memory an
// order of magnitude smaller.
type PullSummary struct {
	Number    int       `json:"number"`
	State     string    `json:"state"`
	Draft     bool      `json:"draft"`
	HTMLURL   string    `json:"html_url"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	User      struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"user"`
	Head struct {
		SHA string `json:"sha"`
		Ref string `json:"ref"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// IssueSummary is the part of an issue a poller reads from the open-issues
// list: what changes when a PR gets a comment or a reaction.
type IssueSummary struct {
	Number      int             `json:"number"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Comments    int             `json:"comments"`
	PullRequest json.RawMessage `json:"pull_request"`
	Reactions   gh.Reactions    `json:"reactions"`
}

// IsPull reports whether the issue is a pull request.
func (i IssueSummary) IsPull() bool { return len(i.PullRequest) > 0 && string(i.PullRequest) != "null" }

// ListPullSummariesIfChanged lists repo's pull requests in state, fully
// paginated, returning nil items with the same version when nothing changed
// since the version prev an earlier call returned ("" the first time).
func (c *Client) ListPullSummariesIfChanged(ctx context.Context, repo ghref.Repo, state, prev string) ([]PullSummary, string, error) {
	if err := repo.Validate(); err != nil {
		return nil, "", fmt.Errorf("list pull requests: %w", err)
	}
	q := url.Values{"sort": {"updated"}, "direction": {"desc"}}
	if state != "" {
		q.Set("state", state)
	}
	prs, v, err := listIfChanged[PullSummary](ctx, c, withQuery(repoPath(repo)+"/pulls", q), prev)
	if err != nil {
		return nil, "", fmt.Errorf("list pull requests of %s: %w", repo, err)
	}
	return prs, v, nil
}

// ListIssueSummariesIfChanged lists repo's issues like ListIssues, returning
// nil items with the same version when nothing changed since prev.
func (c *Client) ListIssueSummariesIfChanged(ctx context.Context, repo ghref.Repo, opts IssueListOptions, prev string) ([]IssueSummary, string, error) {
	if err := repo.Validate(); err != nil {
		return nil, "", fmt.Errorf("list issues: %w", err)
	}
	q := opts.query()
	q.Set("sort", "updated")
	q.Set("direction", "desc")
	issues, v, err := listIfChanged[IssueSummary](ctx, c, withQuery(repoPath(repo)+"/issues", q), prev)
	if err != nil {
		return nil, "", fmt.Errorf("list issues of %s: %w", repo, err)
	}
	return issues, v, nil
}
