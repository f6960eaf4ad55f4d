package ghsim

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// searchIssuesRoute is GitHub's issue and pull request search.
const searchIssuesRoute = "GET /search/issues"

// Search limits as GitHub documents them ("REST API endpoints for search",
// https://docs.github.com/rest/search/search): 30 requests a minute for an
// authenticated user, counted apart from the primary (core) limit, and at
// most the first 1,000 results of any query.
const (
	searchPerMinute = 30
	searchResultCap = 1000
)

// searchQuery is the part of GitHub's search syntax the simulator knows:
// is:pr / is:issue / type:, is:open / is:closed / state:, org: and user:
// (any of them), repo: (any of them), author:, label: (all of them),
// archived: and created: (createdRange). Anything else (free text
// included) is refused with a 422 rather than answered wrongly.
type searchQuery struct {
	pulls, issues bool
	state         string
	owners, repos []string
	author        string
	labels        []string
	archived      string
	created       []timeRange
}

func parseSearch(q string) (searchQuery, bool) {
	var sq searchQuery
	for _, tok := range splitSearch(q) {
		key, val, ok := strings.Cut(tok, ":")
		if !ok || val == "" {
			return sq, false
		}
		val = strings.Trim(val, `"`)
		switch strings.ToLower(key) {
		case "is", "type", "state":
			switch strings.ToLower(val) {
			case "pr", "pull-request":
				sq.pulls = true
			case "issue":
				sq.issues = true
			case "open", "closed":
				sq.state = strings.ToLower(val)
			default:
				return sq, false
			}
		case "org", "user":
			sq.owners = append(sq.owners, strings.ToLower(val))
		case "repo":
			sq.repos = append(sq.repos, strings.ToLower(val))
		case "author":
			sq.author = val
		case "label":
			sq.labels = append(sq.labels, val)
		case "archived":
			sq.archived = strings.ToLower(val)
		case "created":
			r, ok := parseTimeRange(val)
			if !ok {
				return sq, false
			}
			sq.created = append(sq.created, r)
		default:
			return sq, false
		}
	}
	return sq, true
}

// splitSearch splits a query at spaces outside double quotes.
func splitSearch(q string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range q {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// searchIssues serves GET /search/issues over the simulator's PRs (it has
// no plain issues, so is:issue finds nothing). Results are sorted by
// sort=created|updated|comments with order= (default desc); GitHub's
// default "best match" is answered by updated, newest first.
func (s *Sim) searchIssues(c *reqCtx) *result {
	if c.user == nil {
		return errResult(401, "Requires authentication")
	}
	if res := s.searchLimit(c); res != nil {
		return res
	}
	sq, ok := parseSearch(c.q("q"))
	if !ok {
		return validation(jErrItem{Resource: "Search", Field: "q", Code: "invalid"})
	}
	page, per := c.pageParams()
	if page*per > searchResultCap && (page-1)*per >= searchResultCap {
		return errResult(422, "Only the first 1000 search results are available")
	}
	sortBy := c.q("sort")
	if sortBy == "" {
		sortBy = "updated"
	}
	desc := c.q("order") != "asc"

	s.mu.RLock()
	repos := make([]*repo, 0, len(s.repos))
	for _, rp := range s.repos {
		repos = append(repos, rp)
	}
	s.mu.RUnlock()
	var sel []*pr
	of := map[*pr]*repo{}
	for _, rp := range repos {
		full := strings.ToLower(rp.ref.String())
		if len(sq.owners) > 0 && !slices.Contains(sq.owners, strings.ToLower(rp.ref.Owner)) {
			continue
		}
		if len(sq.repos) > 0 && !slices.Contains(sq.repos, full) {
			continue
		}
		rp.mu.Lock()
		if (sq.archived == "true") != rp.archived && sq.archived != "" {
			rp.mu.Unlock()
			continue
		}
		if sq.issues && !sq.pulls {
			rp.mu.Unlock()
			continue
		}
		for _, p := range rp.order {
			rp.refreshLocked(p, c.now)
			if sq.state != "" && p.state != sq.state {
				continue
			}
			if sq.author != "" && !strings.EqualFold(sq.author, p.user.login) {
				continue
			}
			if !hasLabels(p, sq.labels) || !inRanges(p.created, sq.created) {
				continue
			}
			sel = append(sel, p)
			of[p] = rp
		}
		rp.mu.Unlock()
	}
	sortPRs(sel, sortBy, desc)
	total := len(sel)
	visible := sel[:min(total, searchResultCap)]
	start, end, link := c.window(len(visible))
	items := make([]json.RawMessage, 0, end-start)
	for _, p := range visible[start:end] {
		rp := of[p]
		rp.mu.Lock()
		b := s.issueJSON(rp, p, c.base)
		rp.mu.Unlock()
		item := make([]byte, 0, len(b)+12)
		item = append(item, b[:len(b)-1]...)
		item = append(item, `,"score":1.0}`...)
		items = append(items, item)
	}
	res := &result{status: 200, body: marshal(struct {
		TotalCount        int               `json:"total_count"`
		IncompleteResults bool              `json:"incomplete_results"`
		Items             []json.RawMessage `json:"items"`
	}{total, false, items})}
	if link != "" {
		res.setHeader("Link", link)
	}
	s.searchHeaders(c, res)
	return res
}

// searchLimit applies the search rate limit to c's user: a 403 naming the
// search resource when 30 searches were made in the last minute.
func (s *Sim) searchLimit(c *reqCtx) *result {
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	if s.searches == nil {
		s.searches = map[int64][]time.Time{}
	}
	cut := c.now.Add(-time.Minute)
	recent := slices.DeleteFunc(s.searches[c.user.id], func(t time.Time) bool { return !t.After(cut) })
	if len(recent) >= s.searchLimitPerMinute() {
		s.searches[c.user.id] = recent
		res := errResult(403, "API rate limit exceeded for user ID "+itoa64(c.user.id)+".")
		res.setHeader("X-RateLimit-Limit", strconv.Itoa(s.searchLimitPerMinute()))
		res.setHeader("X-RateLimit-Remaining", "0")
		res.setHeader("X-RateLimit-Used", strconv.Itoa(len(recent)))
		res.setHeader("X-RateLimit-Reset", itoa64(recent[0].Add(time.Minute).Unix()+1))
		res.setHeader("X-RateLimit-Resource", "search")
		return res
	}
	s.searches[c.user.id] = append(recent, c.now)
	return nil
}

// searchHeaders sets the search resource's X-RateLimit-* headers.
func (s *Sim) searchHeaders(c *reqCtx, res *result) {
	s.rateMu.Lock()
	recent := s.searches[c.user.id]
	s.rateMu.Unlock()
	reset := c.now.Add(time.Minute)
	if len(recent) > 0 {
		reset = recent[0].Add(time.Minute)
	}
	res.setHeader("X-RateLimit-Limit", strconv.Itoa(s.searchLimitPerMinute()))
	res.setHeader("X-RateLimit-Remaining", strconv.Itoa(max(0, s.searchLimitPerMinute()-len(recent))))
	res.setHeader("X-RateLimit-Used", strconv.Itoa(len(recent)))
	res.setHeader("X-RateLimit-Reset", itoa64(reset.Unix()+1))
	res.setHeader("X-RateLimit-Resource", "search")
}

// searchCountsAgainstCore reports whether a request on route uses the
// primary (core) limit: searches have their own.
func searchCountsAgainstCore(route string) bool { return route != searchIssuesRoute }

// SetSearchPerMinute changes the search limit per user and minute (0:
// Options.SearchPerMinute, or GitHub's 30): a test whose poller searches
// every 50 ms lifts it, as a benchmark that compresses time scales it.
func (s *Sim) SetSearchPerMinute(n int) { s.searchPerMin.Store(int64(n)) }

// searchLimitPerMinute is the search limit in force.
func (s *Sim) searchLimitPerMinute() int {
	if n := s.searchPerMin.Load(); n > 0 {
		return int(n)
	}
	if s.opts.SearchPerMinute > 0 {
		return s.opts.SearchPerMinute
	}
	return searchPerMinute
}

// timeRange is [from, to) of a date qualifier; a zero bound is open.
type timeRange struct{ from, to time.Time }

// parseTimeRange reads a date qualifier's value as GitHub's search syntax
// has it ("Understanding the search syntax", Query for dates,
// https://docs.github.com/search-github/getting-started-with-searching-on-github/understanding-the-search-syntax#query-for-dates):
// >X, >=X, <X, <=X, X..Y (both included), X..*, *..Y, or X alone, where X
// is YYYY-MM-DD (the whole day, UTC here) or an ISO 8601 time
// (YYYY-MM-DDTHH:MM:SSZ, with an offset or without one).
func parseTimeRange(v string) (timeRange, bool) {
	// at parses one bound: the first instant it names and the first
	// after it.
	at := func(s string) (first, after time.Time, ok bool) {
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t, t.AddDate(0, 0, 1), true
		}
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t, t.Add(time.Second), true
			}
		}
		return time.Time{}, time.Time{}, false
	}
	if lo, hi, ok := strings.Cut(v, ".."); ok {
		var r timeRange
		if lo != "*" {
			f, _, ok := at(lo)
			if !ok {
				return r, false
			}
			r.from = f
		}
		if hi != "*" {
			_, a, ok := at(hi)
			if !ok {
				return r, false
			}
			r.to = a
		}
		return r, true
	}
	for _, op := range []string{">=", "<=", ">", "<"} {
		rest, ok := strings.CutPrefix(v, op)
		if !ok {
			continue
		}
		f, a, ok := at(rest)
		if !ok {
			return timeRange{}, false
		}
		switch op {
		case ">=":
			return timeRange{from: f}, true
		case ">":
			return timeRange{from: a}, true
		case "<=":
			return timeRange{to: a}, true
		}
		return timeRange{to: f}, true
	}
	f, a, ok := at(v)
	return timeRange{from: f, to: a}, ok
}

// inRanges reports whether t lies in every range (date qualifiers AND).
func inRanges(t time.Time, rs []timeRange) bool {
	t = t.Truncate(time.Second) // GitHub's timestamps have whole seconds
	for _, r := range rs {
		if (!r.from.IsZero() && t.Before(r.from)) || (!r.to.IsZero() && !t.Before(r.to)) {
			return false
		}
	}
	return true
}
