package ghsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

func (s *Sim) routes() {
	s.mux = http.NewServeMux()
	if s.opts.GitHTTP {
		s.mux.HandleFunc("/git/", s.serveGit)
	}
	const r = "/repos/{owner}/{repo}"
	s.handle("GET /rate_limit", func(c *reqCtx) *result { return s.rateLimitBody(c) })
	s.handle("GET "+r, s.getRepo)
	s.handle("GET "+r+"/pulls", s.listPulls)
	s.handle("POST "+r+"/pulls", s.createPull)
	s.handle("GET "+r+"/pulls/{number}", s.getPull)
	s.handle("PATCH "+r+"/pulls/{number}", s.patchPull)
	s.handle("GET "+r+"/pulls/comments", s.listRepoReviewComments)
	s.handle("GET "+r+"/pulls/{number}/comments", s.listReviewComments)
	s.handle("POST "+r+"/pulls/{number}/comments", s.createReviewComment)
	s.handle("POST "+r+"/pulls/{number}/comments/{id}/replies", s.replyToReviewComment)
	s.handle("GET "+r+"/pulls/{number}/reviews", s.listReviews)
	s.handle("POST "+r+"/pulls/{number}/reviews", s.createReview)
	s.handle("GET "+r+"/pulls/{number}/merge", s.checkMerged)
	s.handle("PUT "+r+"/pulls/{number}/merge", s.mergePull)
	s.handle("PUT "+r+"/pulls/{number}/update-branch", s.updateBranchHandler)
	s.handle("POST "+r+"/pulls/{number}/requested_reviewers", s.requestReviewersHandler)
	s.handle("GET "+r+"/issues", s.listIssues)
	s.handle("GET "+r+"/issues/comments", s.listRepoIssueComments)
	s.handle("GET "+r+"/issues/{number}", s.getIssue)
	s.handle("GET "+r+"/issues/{number}/comments", s.listIssueComments)
	s.handle("POST "+r+"/issues/{number}/comments", s.createIssueComment)
	s.handle("GET "+r+"/issues/{number}/reactions", s.listReactions)
	s.handle("POST "+r+"/issues/{number}/reactions", s.createReaction)
	s.handle("DELETE "+r+"/issues/{number}/reactions/{id}", s.deleteReaction)
	s.handle("GET "+r+"/issues/{number}/labels", s.listLabels)
	s.handle("POST "+r+"/issues/{number}/labels", s.addLabelsHandler)
	s.handle("DELETE "+r+"/issues/{number}/labels/{name}", s.removeLabelHandler)
	s.handle("GET /user", s.getUser)
	s.handle(searchIssuesRoute, s.searchIssues)
	s.handle("GET /orgs/{owner}/repos", s.listOwnerRepos("created"))
	s.handle("GET /users/{owner}/repos", s.listOwnerRepos("full_name"))
	s.handle("GET /installation/repositories", s.listInstallationRepos)
	s.handle("GET "+r+"/commits/{ref...}", s.getCommit) // a branch name may hold slashes (release/1)
	s.handle("GET "+r+"/commits/{ref}/status", s.combinedStatus)
	s.handle("POST "+r+"/statuses/{sha}", s.createStatus)
	s.handle("GET "+r+"/commits/{ref}/check-runs", s.checkRuns)
	s.handle("POST "+r+"/check-runs", s.createCheckRun)
	s.handle("PATCH "+r+"/check-runs/{id}", s.updateCheckRun)
	s.handle("GET "+r+"/check-runs/{id}/annotations", s.annotations)
	s.handle("GET "+r+"/actions/jobs/{id}", s.getJob)
	s.handle("GET "+r+"/actions/jobs/{id}/logs", s.jobLogs)
	s.handle("POST "+r+"/actions/runs/{id}/rerun-failed-jobs", s.rerunFailedJobs)
	s.handle("GET "+r+"/collaborators/{username}/permission", s.permission)
	s.handle("GET "+r+"/rules/branches/{branch}", s.branchRulesHandler)
	s.handle("GET "+r+"/branches/{branch}/protection", s.branchProtectionHandler)
	s.handle("GET "+r+"/compare/{basehead...}", s.compareHandler)
	s.handle("DELETE "+r+"/git/refs/{ref...}", s.deleteRef)
	s.handle("GET "+r+"/contents/{path...}", s.getContents)
	s.handle("GET /orgs/{org}/teams/{team_slug}/memberships/{username}", s.teamMembership)
	s.commentRoutes()
	s.appRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, "NOT_FOUND", func(*reqCtx) *result { return notFound() })
	})
}

// ---- request helpers ----

func (c *reqCtx) repo() (*repo, *result) {
	rp := c.s.repoOf(c.r.PathValue("owner"), c.r.PathValue("repo"))
	if rp == nil {
		return nil, notFound()
	}
	return rp, nil
}

func (c *reqCtx) pr() (*repo, *pr, *result) {
	rp, res := c.repo()
	if res != nil {
		return nil, nil, res
	}
	n, ok := parseNumber(c.r.PathValue("number"))
	if !ok {
		return nil, nil, notFound()
	}
	rp.mu.Lock()
	p := rp.prs[n]
	rp.mu.Unlock()
	if p == nil {
		return nil, nil, notFound()
	}
	return rp, p, nil
}

// decode reads a JSON body into v; an empty body leaves v as it is.
func (c *reqCtx) decode(v any) *result {
	b, err := io.ReadAll(io.LimitReader(c.r.Body, 25<<20))
	if err != nil {
		return errResult(400, "Problems parsing JSON")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errResult(400, "Problems parsing JSON")
	}
	return nil
}

func (c *reqCtx) q(k string) string { return c.r.URL.Query().Get(k) }

// maxPerPage is GitHub's cap on per_page.
const maxPerPage = 100

func (c *reqCtx) pageParams() (page, per int) {
	q := c.r.URL.Query()
	per, page = 30, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = v
	}
	per = min(per, int(c.s.maxPerPage.Load()))
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	return page, per
}

func (c *reqCtx) pageURL(page, per int) string {
	q := c.r.URL.Query()
	q.Set("page", strconv.Itoa(page))
	q.Set("per_page", strconv.Itoa(per))
	return c.base + c.r.URL.EscapedPath() + "?" + q.Encode()
}

// window returns the bounds of the requested page over n items and the
// Link header GitHub would send.
func (c *reqCtx) window(n int) (start, end int, link string) {
	page, per := c.pageParams()
	start = min((page-1)*per, n)
	end = min(start+per, n)
	last := max(1, (n+per-1)/per)
	var parts []string
	if page > 1 {
		parts = append(parts, `<`+c.pageURL(min(page-1, last), per)+`>; rel="prev"`)
	}
	if page < last {
		parts = append(parts, `<`+c.pageURL(page+1, per)+`>; rel="next"`, `<`+c.pageURL(last, per)+`>; rel="last"`)
	}
	if page > 1 {
		parts = append(parts, `<`+c.pageURL(1, per)+`>; rel="first"`)
	}
	return start, end, strings.Join(parts, ", ")
}

// paged renders the requested page of n items as a JSON array.
func (c *reqCtx) paged(n int, item func(i int) json.RawMessage) *result {
	start, end, link := c.window(n)
	items := make([]json.RawMessage, 0, end-start)
	size := 2 + end - start
	for i := start; i < end; i++ {
		it := item(i)
		items = append(items, it)
		size += len(it)
	}
	b := make([]byte, 0, size)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, ']')
	res := &result{status: 200, body: b}
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}

func marshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (c *reqCtx) since() (time.Time, *result) {
	v := c.q("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, validation(jErrItem{Resource: "Issue", Field: "since", Code: "invalid"})
	}
	return t, nil
}

// desc reads direction with GitHub's per-endpoint default.
func (c *reqCtx) desc(def bool) bool {
	switch c.q("direction") {
	case "asc":
		return false
	case "desc":
		return true
	}
	return def
}

// ---- repository ----

func (s *Sim) getRepo(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, p := range rp.order {
		rp.refreshLocked(p, c.now)
	}
	w := s.repoWire(rp, c.base)
	one := 0
	w.NetworkCount, w.SubscribersCount = &one, &one
	res = jsonResult(200, w)
	res.lastModified = rp.pushed
	return res
}

// ---- pulls ----

func (s *Sim) listPulls(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	state := c.q("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		return validation(jErrItem{Resource: "PullRequest", Field: "state", Code: "invalid"})
	}
	sortBy := c.q("sort")
	if sortBy == "" {
		sortBy = "created"
	}
	desc := c.desc(sortBy == "created")
	headF, baseF := c.q("head"), c.q("base")
	headOwner, headRef := "", headF
	if o, r, ok := strings.Cut(headF, ":"); ok {
		headOwner, headRef = o, r
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sel := make([]*pr, 0, len(rp.order))
	for _, p := range rp.order {
		rp.refreshLocked(p, c.now)
		if state != "all" && p.state != state {
			continue
		}
		if headF != "" && (p.headRef != headRef || headOwner != "" && !strings.EqualFold(headOwner, rp.ref.Owner)) {
			continue
		}
		if baseF != "" && p.baseRef != baseF {
			continue
		}
		sel = append(sel, p)
	}
	sortPRs(sel, sortBy, desc)
	return c.paged(len(sel), func(i int) json.RawMessage { return s.pullSimpleJSON(rp, sel[i], c.base) })
}

func sortPRs(sel []*pr, by string, desc bool) {
	key := func(p *pr) int64 {
		switch by {
		case "updated":
			return p.updated.UnixNano()
		case "popularity", "comments":
			return int64(len(p.comments))
		case "long-running":
			return -p.created.UnixNano()
		}
		return p.created.UnixNano()
	}
	sort.SliceStable(sel, func(i, j int) bool {
		a, b := key(sel[i]), key(sel[j])
		if a == b {
			if desc {
				return sel[i].number > sel[j].number
			}
			return sel[i].number < sel[j].number
		}
		if desc {
			return a > b
		}
		return a < b
	})
}

func (s *Sim) fullPR(c *reqCtx, rp *repo, p *pr, status int) *result {
	mi, err := s.mergeInfoFor(rp, p, c.now)
	if err != nil {
		s.log.Warn("ghsim: mergeability", "pr", p.number, "err", err)
		mi = nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if mi != nil && [2]string{p.baseSHA, p.headSHA} != [2]string{} {
		if cur, ok := rp.merges[[2]string{p.baseSHA, p.headSHA}]; ok {
			mi = &cur // the branches moved while git ran; use the matching answer
		}
	}
	res := &result{status: status, body: s.encodePull(rp, s.pullFull(rp, p, c.base, mi, c.now), c.base)}
	res.lastModified = p.updated
	return res
}

func (s *Sim) getPull(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	return s.fullPR(c, rp, p, 200)
}

func (s *Sim) createPull(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	var in struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if o, b, ok := strings.Cut(in.Head, ":"); ok {
		if !strings.EqualFold(o, rp.ref.Owner) {
			return validation(jErrItem{Resource: "PullRequest", Field: "head", Code: "invalid"})
		}
		in.Head = b
	}
	if in.Base == "" {
		return validation(jErrItem{Resource: "PullRequest", Field: "base", Code: "missing_field"})
	}
	p, err := s.openPR(rp, openInput{title: in.Title, body: in.Body, head: in.Head, base: in.Base, draft: in.Draft, author: c.user}, c.now)
	if err != nil {
		return resultOf(err)
	}
	return s.fullPR(c, rp, p, 201)
}

func (s *Sim) patchPull(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	rp.mu.Lock()
	if p.user != c.user {
		if err := rp.requirePerm(c.user, "write"); err != nil {
			rp.mu.Unlock()
			return resultOf(err)
		}
	}
	rp.refreshLocked(p, c.now)
	changed := false
	if in.Title != nil && *in.Title != p.title {
		if strings.TrimSpace(*in.Title) == "" {
			rp.mu.Unlock()
			return validation(jErrItem{Resource: "PullRequest", Field: "title", Code: "missing_field"})
		}
		p.title, changed = *in.Title, true
	}
	if in.Body != nil && *in.Body != p.body {
		p.body, changed = *in.Body, true
	}
	if in.Base != nil && *in.Base != p.baseRef {
		sha, ok := rp.readRef(*in.Base)
		if !ok || p.state != "open" {
			rp.mu.Unlock()
			return validation(jErrItem{Resource: "PullRequest", Field: "base", Code: "invalid"})
		}
		p.baseRef, p.baseSHA, changed = *in.Base, sha, true
	}
	if changed {
		p.touch(c.now)
	}
	if in.State != nil {
		if err := rp.setStateLocked(p, nil, *in.State, c.now); err != nil {
			rp.mu.Unlock()
			return resultOf(err)
		}
	}
	rp.mu.Unlock()
	return s.fullPR(c, rp, p, 200)
}

func (s *Sim) checkMerged(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	rp.mu.Lock()
	merged := p.merged
	rp.mu.Unlock()
	if merged {
		return &result{status: 204}
	}
	return &result{status: 404}
}

func (s *Sim) mergePull(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	sha, err := s.merge(rp, p, c.user, mergeIn{method: in.MergeMethod, sha: in.SHA, title: in.CommitTitle, message: in.CommitMessage}, c.now)
	if err != nil {
		return resultOf(err)
	}
	return jsonResult(200, map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"})
}

func (s *Sim) updateBranchHandler(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		ExpectedHeadSHA string `json:"expected_head_sha"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if err := s.updateBranch(rp, p, c.user, in.ExpectedHeadSHA, c.now); err != nil {
		return resultOf(err)
	}
	return jsonResult(202, map[string]string{
		"message": "Updating pull request branch.",
		"url":     webBase(c.base) + "/repos/" + rp.ref.String() + "/pulls/" + strconv.Itoa(p.number),
	})
}

func (s *Sim) requestReviewersHandler(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if err := s.requestReviewers(rp, p, c.user, in.Reviewers, c.now); err != nil {
		return resultOf(err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return &result{status: 201, body: s.pullSimpleJSON(rp, p, c.base)}
}

// ---- issues ----

func (s *Sim) listIssues(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	state := c.q("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		return validation(jErrItem{Resource: "Issue", Field: "state", Code: "invalid"})
	}
	since, res := c.since()
	if res != nil {
		return res
	}
	var want []string
	if l := c.q("labels"); l != "" {
		for _, n := range strings.Split(l, ",") {
			if n = strings.TrimSpace(n); n != "" {
				want = append(want, n)
			}
		}
	}
	creator := c.q("creator")
	sortBy := c.q("sort")
	if sortBy == "" {
		sortBy = "created"
	}
	desc := c.desc(true)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sel := make([]*pr, 0, len(rp.order))
	for _, p := range rp.order {
		rp.refreshLocked(p, c.now)
		if state != "all" && p.state != state {
			continue
		}
		if !since.IsZero() && p.updated.Before(since) {
			continue
		}
		if creator != "" && !strings.EqualFold(creator, p.user.login) {
			continue
		}
		if !hasLabels(p, want) {
			continue
		}
		sel = append(sel, p)
	}
	sortPRs(sel, sortBy, desc)
	return c.paged(len(sel), func(i int) json.RawMessage { return s.issueJSON(rp, sel[i], c.base) })
}

func hasLabels(p *pr, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(p.labels, func(l *label) bool { return strings.EqualFold(l.name, w) }) {
			return false
		}
	}
	return true
}

func (s *Sim) getIssue(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.refreshLocked(p, c.now)
	res = &result{status: 200, body: s.issueJSON(rp, p, c.base)}
	res.lastModified = p.updated
	return res
}

func (s *Sim) listIssueComments(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	since, res := c.since()
	if res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var sel []*issueComment
	for _, ic := range p.comments {
		if since.IsZero() || !ic.updated.Before(since) {
			sel = append(sel, ic)
		}
	}
	return c.paged(len(sel), func(i int) json.RawMessage { return marshal(issueCommentWire(rp, sel[i], c.base)) })
}

func (s *Sim) listRepoIssueComments(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	since, res := c.since()
	if res != nil {
		return res
	}
	sortBy := c.q("sort")
	desc := sortBy != "" && c.desc(false)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sel := sinceSorted(rp.icomments, func(ic *issueComment) (int64, time.Time, time.Time) { return ic.id, ic.created, ic.updated }, since, sortBy, desc)
	return c.paged(len(sel), func(i int) json.RawMessage { return marshal(issueCommentWire(rp, sel[i], c.base)) })
}

func (s *Sim) createIssueComment(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		Body string `json:"body"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	ic, err := s.addIssueComment(rp, p, c.user, in.Body, c.now)
	if err != nil {
		return resultOf(err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return jsonResult(201, issueCommentWire(rp, ic, c.base)).setHeader("Location", rp.apiURL(c.base)+"/issues/comments/"+itoa64(ic.id))
}

// ---- reactions ----

func (s *Sim) listReactions(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	return pagedReactions(c, rp, func() []*reaction { return p.reactions })
}

// pagedReactions answers a list of reactions (a PR's or a comment's,
// of, read under rp's lock), filtered by ?content= as GitHub does: an
// unknown content is a validation error.
func pagedReactions(c *reqCtx, rp *repo, of func() []*reaction) *result {
	content := c.q("content")
	if content != "" && !slices.Contains(reactionContents, content) {
		return validation(jErrItem{Resource: "Reaction", Field: "content", Code: "invalid"})
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var sel []*reaction
	for _, r := range of() {
		if content == "" || r.content == content {
			sel = append(sel, r)
		}
	}
	return c.paged(len(sel), func(i int) json.RawMessage { return marshal(reactionWire(sel[i], c.base)) })
}

func (s *Sim) createReaction(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		Content string `json:"content"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	r, created, err := s.addReaction(rp, p, c.user, in.Content, c.now)
	if err != nil {
		return resultOf(err)
	}
	status := 200
	if created {
		status = 201
	}
	return jsonResult(status, reactionWire(r, c.base))
}

func (s *Sim) deleteReaction(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return notFound()
	}
	if err := s.removeReaction(rp, p, c.user, id); err != nil {
		return resultOf(err)
	}
	return &result{status: 204}
}

// ---- labels ----

func (s *Sim) labelsResult(c *reqCtx, rp *repo, p *pr) *result {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	ls := labelsWire(rp, p.labels, c.base)
	return c.paged(len(ls), func(i int) json.RawMessage { return marshal(ls[i]) })
}

func (s *Sim) listLabels(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	return s.labelsResult(c, rp, p)
}

// labelNames accepts every body shape GitHub does: {"labels": ["a"]},
// ["a"], {"labels": [{"name": "a"}]} and [{"name": "a"}].
func labelNames(raw json.RawMessage) ([]string, bool) {
	var wrapped struct {
		Labels json.RawMessage `json:"labels"`
	}
	if err := json.Unmarshal(raw, &wrapped); err == nil && wrapped.Labels != nil {
		raw = wrapped.Labels
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err == nil {
		return names, true
	}
	var objs []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &objs); err == nil {
		for _, o := range objs {
			names = append(names, o.Name)
		}
		return names, true
	}
	return nil, false
}

func (s *Sim) addLabelsHandler(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var raw json.RawMessage
	if res := c.decode(&raw); res != nil {
		return res
	}
	names, ok := labelNames(raw)
	if !ok {
		return validation(jErrItem{Resource: "Label", Field: "labels", Code: "invalid"})
	}
	if err := s.addLabels(rp, p, c.user, names, c.now); err != nil {
		return resultOf(err)
	}
	return s.labelsResult(c, rp, p)
}

func (s *Sim) removeLabelHandler(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	if err := s.removeLabel(rp, p, c.user, c.r.PathValue("name"), c.now); err != nil {
		return resultOf(err)
	}
	return s.labelsResult(c, rp, p)
}

// ---- review comments and reviews ----

func (s *Sim) listReviewComments(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	return s.reviewCommentList(c, rp, func() []*reviewComment { return p.rcomments })
}

func (s *Sim) listRepoReviewComments(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	return s.reviewCommentList(c, rp, func() []*reviewComment { return rp.rcomments })
}

// reviewCommentList serves a list of review comments; of returns the ones
// in scope (a PR's or the repository's) and runs with rp.mu held. A
// function, not a slice, so that a PR without comments cannot be mistaken
// for "no scope" and the slice is read under the lock.
func (s *Sim) reviewCommentList(c *reqCtx, rp *repo, of func() []*reviewComment) *result {
	since, res := c.since()
	if res != nil {
		return res
	}
	sortBy := c.q("sort")
	desc := sortBy != "" && c.desc(false)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sel := sinceSorted(of(), func(rc *reviewComment) (int64, time.Time, time.Time) { return rc.id, rc.created, rc.updated }, since, sortBy, desc)
	return c.paged(len(sel), func(i int) json.RawMessage { return marshal(reviewCommentWire(rp, sel[i], c.base)) })
}

func (s *Sim) createReviewComment(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		Body      string `json:"body"`
		CommitID  string `json:"commit_id"`
		Path      string `json:"path"`
		Line      int    `json:"line"`
		Position  int    `json:"position"`
		Side      string `json:"side"`
		InReplyTo int64  `json:"in_reply_to"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if in.Line == 0 {
		in.Line = in.Position
	}
	rc, err := s.addReviewComment(rp, p, c.user, reviewCommentIn{path: in.Path, body: in.Body, side: in.Side, line: in.Line, inReplyTo: in.InReplyTo}, in.CommitID, c.now)
	if err != nil {
		return resultOf(err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return jsonResult(201, reviewCommentWire(rp, rc, c.base))
}

// replyToReviewComment answers an inline comment in its thread. GitHub
// answers 404 for a comment that is not the PR's, and attaches a reply to a
// reply to the thread's first comment.
func (s *Sim) replyToReviewComment(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	id, ok := parseNumber(c.r.PathValue("id"))
	if !ok {
		return notFound()
	}
	var in struct {
		Body string `json:"body"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	rp.mu.Lock()
	i := slices.IndexFunc(p.rcomments, func(rc *reviewComment) bool { return rc.id == int64(id) })
	var root int64
	if i >= 0 {
		root = p.rcomments[i].id
		if p.rcomments[i].inReplyTo != 0 {
			root = p.rcomments[i].inReplyTo
		}
	}
	rp.mu.Unlock()
	if i < 0 {
		return notFound()
	}
	rc, err := s.addReviewComment(rp, p, c.user, reviewCommentIn{body: in.Body, inReplyTo: root}, "", c.now)
	if err != nil {
		return resultOf(err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return jsonResult(201, reviewCommentWire(rp, rc, c.base))
}

func (s *Sim) listReviews(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var sel []*review
	for _, r := range p.reviews {
		if r.state != "PENDING" || r.user == c.user {
			sel = append(sel, r)
		}
	}
	return c.paged(len(sel), func(i int) json.RawMessage { return marshal(reviewWire(rp, p, sel[i], c.base)) })
}

var reviewEvents = map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED", "": "PENDING"}

func (s *Sim) createReview(c *reqCtx) *result {
	rp, p, res := c.pr()
	if res != nil {
		return res
	}
	var in struct {
		CommitID string `json:"commit_id"`
		Body     string `json:"body"`
		Event    string `json:"event"`
		Comments []struct {
			Path     string `json:"path"`
			Line     int    `json:"line"`
			Position int    `json:"position"`
			Side     string `json:"side"`
			Body     string `json:"body"`
		} `json:"comments"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	state, ok := reviewEvents[in.Event]
	if !ok {
		return resultOf(simpleErr("Invalid event: " + in.Event))
	}
	ri := reviewIn{state: state, body: in.Body, commitID: in.CommitID}
	for _, cm := range in.Comments {
		line := cm.Line
		if line == 0 {
			line = cm.Position
		}
		ri.comments = append(ri.comments, reviewCommentIn{path: cm.Path, body: cm.Body, side: cm.Side, line: line})
	}
	r, err := s.addReview(rp, p, c.user, ri, c.now)
	if err != nil {
		return resultOf(err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return jsonResult(200, reviewWire(rp, p, r, c.base))
}

// ---- statuses, checks, permissions, refs ----

func (s *Sim) combinedStatus(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	ref := c.r.PathValue("ref")
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sha, ok := rp.resolveRef(ref)
	if !ok {
		return errResult(404, "No commit found for SHA: "+ref)
	}
	list := rp.statuses[sha]
	state := "success"
	if len(list) == 0 {
		state = "pending"
	}
	u := rp.apiURL(c.base)
	sts := make([]jStatus, 0, len(list))
	for _, st := range list {
		switch {
		case st.state == "failure" || st.state == "error":
			state = "failure"
		case st.state == "pending" && state != "failure":
			state = "pending"
		}
		sts = append(sts, statusWire(u, sha, st))
	}
	return jsonResult(200, jCombinedStatus{
		State: state, Statuses: sts, SHA: sha, TotalCount: len(sts), Repository: s.repoJSON(rp, c.base),
		CommitURL: u + "/commits/" + sha, URL: u + "/commits/" + sha + "/status",
	})
}

// statusWire is a commit status as GitHub renders it; a status set without
// a description (SetStatus) describes itself, as CI systems' statuses do.
func statusWire(u, sha string, st *commitStatus) jStatus {
	desc := st.description
	if desc == "" {
		desc = st.context + " " + st.state
	}
	var target *string
	if st.targetURL != "" {
		target = strp(st.targetURL)
	}
	return jStatus{
		URL: u + "/statuses/" + sha, AvatarURL: strp("https://avatars.githubusercontent.com/u/9919?v=4"), ID: st.id,
		NodeID: nodeID("013:StatusContext", st.id), State: st.state, Description: strp(desc), TargetURL: target,
		Context: st.context, CreatedAt: ts(st.created), UpdatedAt: ts(st.updated),
	}
}

// createStatus is POST /repos/{owner}/{repo}/statuses/{sha}. GitHub
// accepts only a full SHA here, not a branch name.
func (s *Sim) createStatus(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	sha := c.r.PathValue("sha")
	if !isSHA(sha) {
		return errResult(422, "No commit found for SHA: "+sha)
	}
	var in struct {
		State       string `json:"state"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
		Context     string `json:"context"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if utf8.RuneCountInString(in.Description) > 140 {
		// GitHub keeps 140 characters; longer is refused.
		return validation(jErrItem{Resource: "Status", Field: "description", Code: "custom"})
	}
	creator := ""
	if c.user != nil {
		creator = c.user.login
	}
	st, err := s.setStatus(rp, sha, statusIn{context: in.Context, state: in.State, description: in.Description, targetURL: in.TargetURL, creator: creator}, c.now)
	if err != nil {
		return resultOf(err)
	}
	return jsonResult(201, statusWire(rp.apiURL(c.base), sha, st))
}

// checkRuns is GET /repos/{owner}/{repo}/commits/{ref}/check-runs, with
// GitHub's check_name, status and filter parameters: filter=latest (the
// default) keeps each name's newest run, filter=all every run.
func (s *Sim) checkRuns(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	ref := c.r.PathValue("ref")
	nameF, statusF, filter := c.q("check_name"), c.q("status"), c.q("filter")
	switch filter {
	case "":
		filter = "latest"
	case "latest", "all":
	default:
		return validation(jErrItem{Resource: "CheckRun", Field: "filter", Code: "invalid"})
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sha, ok := rp.resolveRef(ref)
	if !ok {
		return errResult(404, "No commit found for SHA: "+ref)
	}
	var sel []*checkRun
	for _, cr := range rp.checks[sha] {
		if (nameF == "" || cr.name == nameF) && (statusF == "" || cr.status == statusF) {
			sel = append(sel, cr)
		}
	}
	if filter == "latest" {
		newest := map[string]int64{}
		for _, cr := range sel {
			newest[cr.name] = max(newest[cr.name], cr.id)
		}
		sel = slices.DeleteFunc(sel, func(cr *checkRun) bool { return cr.id != newest[cr.name] })
	}
	prs := rp.openPRsOn(sha, c.base)
	start, end, link := c.window(len(sel))
	out := jCheckRuns{TotalCount: len(sel), CheckRuns: []jCheckRun{}}
	for _, cr := range sel[start:end] {
		out.CheckRuns = append(out.CheckRuns, s.checkRunWire(rp, c.base, cr, prs))
	}
	res = jsonResult(200, out)
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}

// openPRsOn is the pull_requests of a check run on sha: the open PRs whose
// head it is. rp.mu must be held.
func (rp *repo) openPRsOn(sha, base string) []jMinPR {
	u := rp.apiURL(base)
	prs := []jMinPR{}
	for _, p := range rp.order {
		if p.state == "open" && p.headSHA == sha {
			mr := jMinRepo{ID: rp.id, URL: u, Name: rp.ref.Name}
			prs = append(prs, jMinPR{ID: p.id, Number: p.number, URL: u + "/pulls/" + strconv.Itoa(p.number),
				Head: jMinBranch{Ref: p.headRef, SHA: p.headSHA, Repo: mr}, Base: jMinBranch{Ref: p.baseRef, SHA: p.baseSHA, Repo: mr}})
		}
	}
	return prs
}

// checkRunWire is a check run as GitHub renders it.
func (s *Sim) checkRunWire(rp *repo, base string, cr *checkRun, prs []jMinPR) jCheckRun {
	u := rp.apiURL(base)
	var concl *string
	if cr.conclusion != "" {
		concl = strp(cr.conclusion)
	}
	out := jCheckOutput{AnnotationsURL: u + "/check-runs/" + itoa64(cr.id) + "/annotations"}
	if cr.title != "" {
		out.Title = strp(cr.title)
	}
	if cr.summary != "" {
		out.Summary = strp(cr.summary)
	}
	if cr.text != "" {
		out.Text = strp(cr.text)
	}
	out.AnnotationsCount = len(cr.annotations)
	h := rp.htmlURL(base) + "/runs/" + itoa64(cr.id)
	return jCheckRun{
		ID: cr.id, HeadSHA: cr.sha, NodeID: nodeID("08:CheckRun", cr.id), URL: u + "/check-runs/" + itoa64(cr.id),
		HTMLURL: h, DetailsURL: strp(h), Status: cr.status, Conclusion: concl, StartedAt: tsp(cr.started),
		CompletedAt: tsp(cr.completed), Name: cr.name, CheckSuite: &jCheckSuite{ID: cr.suiteID}, App: s.appWire(base),
		Output: out, PullRequests: prs,
	}
}

// checkRunIn is the body of a check run's create or update; nil fields
// were not sent.
type checkRunIn struct {
	Name       *string `json:"name"`
	HeadSHA    *string `json:"head_sha"`
	Status     *string `json:"status"`
	Conclusion *string `json:"conclusion"`
	Output     *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
	} `json:"output"`
}

// maxCheckSummary is GitHub's limit on output.summary (and output.text).
const maxCheckSummary = 65535

// invalidRequest is GitHub's answer to a body its JSON schema refuses.
func invalidRequest(why string) *result {
	return errResult(422, "Invalid request.\n\n"+why)
}

// check validates the body as GitHub's schema does; create says whether
// name and head_sha are required.
func (in *checkRunIn) check(create bool) *result {
	if create {
		for _, f := range []struct {
			name string
			v    *string
		}{{"name", in.Name}, {"head_sha", in.HeadSHA}} {
			if f.v == nil {
				return invalidRequest(strconv.Quote(f.name) + " wasn't supplied.")
			}
		}
	}
	if in.Name != nil && *in.Name == "" {
		return validation(jErrItem{Resource: "CheckRun", Field: "name", Code: "missing_field"})
	}
	if in.Status != nil && !slices.Contains([]string{"queued", "in_progress", "completed"}, *in.Status) {
		return invalidRequest(strconv.Quote(*in.Status) + " is not a member of [\"queued\", \"in_progress\", \"completed\"].")
	}
	if in.Conclusion != nil && !slices.Contains(checkConclusions, *in.Conclusion) && *in.Conclusion != "stale" {
		return invalidRequest(strconv.Quote(*in.Conclusion) + " is not a valid conclusion.")
	}
	if o := in.Output; o != nil {
		if o.Title == nil || o.Summary == nil {
			return invalidRequest("For 'properties/output', title and summary are required.")
		}
		if utf8.RuneCountInString(*o.Summary) > maxCheckSummary {
			return invalidRequest("For 'properties/summary', the summary is longer than 65535 characters.")
		}
	}
	return nil
}

// createCheckRun is POST /repos/{owner}/{repo}/check-runs: a new run every
// time, even with a name the head already has (its list's filter=latest
// then shows the new one). A conclusion completes the run.
func (s *Sim) createCheckRun(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	var in checkRunIn
	if res := c.decode(&in); res != nil {
		return res
	}
	if res := in.check(true); res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sha := *in.HeadSHA
	if !isSHA(sha) {
		return invalidRequest("No commit found for SHA: " + sha)
	}
	cr := &checkRun{id: s.newID(), suiteID: s.newID(), name: *in.Name, sha: sha, status: "queued", started: c.now}
	if res := cr.apply(&in, c.now); res != nil {
		return res
	}
	rp.checks[sha] = append(rp.checks[sha], cr)
	rp.checkLog[sha] = append(rp.checkLog[sha], *cr)
	return jsonResult(201, s.checkRunWire(rp, c.base, cr, rp.openPRsOn(sha, c.base)))
}

// updateCheckRun is PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}.
func (s *Sim) updateCheckRun(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return notFound()
	}
	var in checkRunIn
	if res := c.decode(&in); res != nil {
		return res
	}
	if res := in.check(false); res != nil {
		return res
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var cr *checkRun
	for _, list := range rp.checks {
		if i := slices.IndexFunc(list, func(x *checkRun) bool { return x.id == id }); i >= 0 {
			cr = list[i]
		}
	}
	if cr == nil {
		return notFound()
	}
	next := *cr
	if res := next.apply(&in, c.now); res != nil {
		return res
	}
	*cr = next
	rp.checkLog[cr.sha] = append(rp.checkLog[cr.sha], *cr)
	return jsonResult(200, s.checkRunWire(rp, c.base, cr, rp.openPRsOn(cr.sha, c.base)))
}

// apply sets the fields in sent. As on GitHub, a conclusion completes the
// run, and completing one needs a conclusion.
func (cr *checkRun) apply(in *checkRunIn, now time.Time) *result {
	if in.Name != nil {
		cr.name = *in.Name
	}
	if in.Status != nil {
		cr.status = *in.Status
	}
	if in.Conclusion != nil {
		cr.status, cr.conclusion = "completed", *in.Conclusion
	}
	if in.Output != nil {
		cr.title, cr.summary = *in.Output.Title, *in.Output.Summary
	}
	switch {
	case cr.status == "completed" && cr.conclusion == "":
		return invalidRequest("Conclusion is required when the status is 'completed'.")
	case cr.status == "completed":
		if cr.completed.IsZero() {
			cr.completed = now
		}
	default:
		cr.conclusion, cr.completed = "", time.Time{}
	}
	return nil
}

var legacyPerm = map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none"}

func (s *Sim) permission(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	login := c.r.PathValue("username")
	u := s.userByLogin(login)
	if u == nil {
		return errResult(404, login+" is not a user")
	}
	rp.mu.Lock()
	perm := rp.permOf(u)
	if p, ok := rp.perms[strings.ToLower(u.login)]; ok && p == "none" {
		perm = "none"
	}
	rp.mu.Unlock()
	w := u.wire(c.base)
	w.RoleName = perm
	return jsonResult(200, jPermission{Permission: legacyPerm[perm], RoleName: perm, User: w})
}

func (s *Sim) deleteRef(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	if err := s.deleteBranch(rp, c.user, c.r.PathValue("ref"), c.now); err != nil {
		return resultOf(err)
	}
	return &result{status: 204}
}

// ---- user and commits ----

// getUser serves GET /user: the token's own account.
func (s *Sim) getUser(c *reqCtx) *result {
	if c.user == nil {
		return errResult(401, "Requires authentication")
	}
	return jsonResult(200, c.user.wire(c.base))
}

type jGitPerson struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Date  string `json:"date"`
}

type jCommit struct {
	SHA         string `json:"sha"`
	NodeID      string `json:"node_id"`
	URL         string `json:"url"`
	HTMLURL     string `json:"html_url"`
	CommentsURL string `json:"comments_url"`
	Commit      struct {
		Author    jGitPerson `json:"author"`
		Committer jGitPerson `json:"committer"`
		Message   string     `json:"message"`
		Tree      struct {
			SHA string `json:"sha"`
			URL string `json:"url"`
		} `json:"tree"`
		URL          string `json:"url"`
		CommentCount int    `json:"comment_count"`
	} `json:"commit"`
	Author    json.RawMessage `json:"author"`
	Committer json.RawMessage `json:"committer"`
	Parents   []jParent       `json:"parents"`
}

type jParent struct {
	SHA string `json:"sha"`
	URL string `json:"url"`
}

// getCommit serves GET /repos/{owner}/{repo}/commits/{ref} from the git
// repository: prloop reads a head commit's committer date from it.
func (s *Sim) getCommit(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	ref := c.r.PathValue("ref")
	rp.mu.Lock()
	sha, ok := rp.resolveRef(ref)
	rp.mu.Unlock()
	if !ok {
		return errResult(422, "No commit found for SHA: "+ref)
	}
	cs, err := s.commitsWire(rp, c.base, "-1", sha)
	if err != nil || len(cs) != 1 {
		return errResult(422, "No commit found for SHA: "+ref)
	}
	return jsonResult(200, cs[0])
}

// commitFormat is the git log format commitsWire parses: ten fields, each
// ended by a NUL (a message holds no NUL).
const commitFormat = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B%x00"

// commitsWire lists the commits git log selects with args (no walk of
// merges' reflogs, no decoration), in git's order, in GitHub's commit shape.
func (s *Sim) commitsWire(rp *repo, base string, args ...string) ([]jCommit, error) {
	out, err := s.git(rp.dir, nil, nil, append(append([]string{"log", "--no-color", "--format=" + commitFormat}, args...), "--")...)
	if err != nil {
		return nil, err
	}
	f := strings.Split(out, "\x00")
	u := rp.apiURL(base)
	var cs []jCommit
	for i := 0; i+10 <= len(f); i += 10 {
		sha := strings.TrimSpace(f[i])
		var w jCommit
		w.SHA, w.NodeID = sha, "C_"+sha[:12]
		w.URL, w.HTMLURL = u+"/commits/"+sha, webBase(base)+"/"+rp.ref.String()+"/commit/"+sha
		w.CommentsURL = u + "/commits/" + sha + "/comments"
		w.Commit.Tree.SHA, w.Commit.Tree.URL = f[i+1], u+"/git/trees/"+f[i+1]
		w.Commit.Author = jGitPerson{Name: f[i+3], Email: f[i+4], Date: gitDate(f[i+5])}
		w.Commit.Committer = jGitPerson{Name: f[i+6], Email: f[i+7], Date: gitDate(f[i+8])}
		w.Commit.Message = strings.TrimRight(f[i+9], "\n")
		w.Commit.URL = u + "/git/commits/" + sha
		w.Author, w.Committer = json.RawMessage("null"), json.RawMessage("null")
		w.Parents = []jParent{} // a root commit has parents [], not null
		for _, p := range strings.Fields(f[i+2]) {
			w.Parents = append(w.Parents, jParent{SHA: p, URL: u + "/commits/" + p})
		}
		cs = append(cs, w)
	}
	return cs, nil
}

// gitDate renders git's ISO date as GitHub does: RFC 3339 in UTC.
func gitDate(s string) string {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

// sinceSorted is what the repository-wide comment lists share: the items
// updated at or after since (all when zero), ordered by created, or by
// updated when sortBy is "updated", ties by id, descending when desc.
func sinceSorted[T any](items []T, stamp func(T) (id int64, created, updated time.Time), since time.Time, sortBy string, desc bool) []T {
	var sel []T
	for _, it := range items {
		if _, _, updated := stamp(it); since.IsZero() || !updated.Before(since) {
			sel = append(sel, it)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		ia, ca, ua := stamp(sel[i])
		ib, cb, ub := stamp(sel[j])
		a, b := ca, cb
		if sortBy == "updated" {
			a, b = ua, ub
		}
		if a.Equal(b) {
			return (ia < ib) != desc
		}
		return a.Before(b) != desc
	})
	return sel
}
