package ghsim

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// All render functions run with rp.mu held.

func (rp *repo) apiURL(base string) string {
	return base + "/repos/" + rp.ref.Owner + "/" + rp.ref.Name
}

func (rp *repo) htmlURL(base string) string {
	return webBase(base) + "/" + rp.ref.Owner + "/" + rp.ref.Name
}

func (s *Sim) cloneURL(rp *repo) string {
	if s.opts.GitHTTP {
		return s.opts.BaseURL + "/git/" + rp.ref.Owner + "/" + rp.ref.Name + ".git"
	}
	return "file://" + rp.dir
}

func (s *Sim) repoWire(rp *repo, base string) jRepo {
	u := rp.apiURL(base)
	h := rp.htmlURL(base)
	open := rp.openCount()
	host := strings.TrimPrefix(strings.TrimPrefix(webBase(base), "https://"), "http://")
	return jRepo{
		ID: rp.id, NodeID: nodeID("010:Repository", rp.id), Name: rp.ref.Name, FullName: rp.ref.String(),
		Owner: rp.owner.json(base), HTMLURL: h, URL: u,
		ForksURL: u + "/forks", KeysURL: u + "/keys{/key_id}", CollaboratorsURL: u + "/collaborators{/collaborator}",
		TeamsURL: u + "/teams", HooksURL: u + "/hooks", IssueEventsURL: u + "/issues/events{/number}",
		EventsURL: u + "/events", AssigneesURL: u + "/assignees{/user}", BranchesURL: u + "/branches{/branch}",
		TagsURL: u + "/tags", BlobsURL: u + "/git/blobs{/sha}", GitTagsURL: u + "/git/tags{/sha}",
		GitRefsURL: u + "/git/refs{/sha}", TreesURL: u + "/git/trees{/sha}", StatusesURL: u + "/statuses/{sha}",
		LanguagesURL: u + "/languages", StargazersURL: u + "/stargazers", ContributorsURL: u + "/contributors",
		SubscribersURL: u + "/subscribers", SubscriptionURL: u + "/subscription", CommitsURL: u + "/commits{/sha}",
		GitCommitsURL: u + "/git/commits{/sha}", CommentsURL: u + "/comments{/number}",
		IssueCommentURL: u + "/issues/comments{/number}", ContentsURL: u + "/contents/{+path}",
		CompareURL: u + "/compare/{base}...{head}", MergesURL: u + "/merges", ArchiveURL: u + "/{archive_format}{/ref}",
		DownloadsURL: u + "/downloads", IssuesURL: u + "/issues{/number}", PullsURL: u + "/pulls{/number}",
		MilestonesURL: u + "/milestones{/number}", NotificationsURL: u + "/notifications{?since,all,participating}",
		LabelsURL: u + "/labels{/name}", ReleasesURL: u + "/releases{/id}", DeploymentsURL: u + "/deployments",
		CreatedAt: ts(rp.created), UpdatedAt: ts(rp.updated), PushedAt: ts(rp.pushed),
		GitURL: "git://" + host + "/" + rp.ref.String() + ".git", SSHURL: "git@" + host + ":" + rp.ref.String() + ".git",
		CloneURL: s.cloneURL(rp), SVNURL: h, Size: 1,
		HasIssues: true, HasProjects: true, HasDownloads: true, HasWiki: true,
		OpenIssuesCount: open, OpenIssues: open, Topics: []string{}, Visibility: "public", AllowForking: true,
		DefaultBranch: rp.defBranch, AllowSquashMerge: true, AllowMergeCommit: true, AllowRebaseMerge: true,
		AllowUpdateBranch: true, Archived: rp.archived,
	}
}

// repoJSON is the repository object embedded in pull requests, cached per
// repository version.
func (s *Sim) repoJSON(rp *repo, base string) json.RawMessage {
	if b := rp.repoCache.get(0, rp.ver, base); b != nil {
		return b
	}
	b, _ := json.Marshal(s.repoWire(rp, base))
	rp.repoCache.put(0, rp.ver, base, b)
	return b
}

func labelWire(rp *repo, l *label, base string) jLabel {
	return jLabel{ID: l.id, NodeID: nodeID("05:Label", l.id), URL: rp.apiURL(base) + "/labels/" + pathEscape(l.name),
		Name: l.name, Color: l.color, Description: strp("")}
}

func pathEscape(s string) string {
	r := strings.NewReplacer("%", "%25", " ", "%20", "/", "%2F", "?", "%3F", "#", "%23")
	return r.Replace(s)
}

func labelsWire(rp *repo, ls []*label, base string) []jLabel {
	out := make([]jLabel, 0, len(ls))
	for _, l := range ls {
		out = append(out, labelWire(rp, l, base))
	}
	return out
}

func strp(s string) *string { return &s }

// repoSlot stands in for the embedded repository while a PR is encoded;
// encodePull then splices the cached repository JSON in, because
// encoding/json would otherwise re-validate those ~6 KB twice per PR. The
// slot is a number literal no field holds, matched together with its key:
// `"repo":` followed by a bare value cannot occur inside an encoded string,
// where every quote is escaped.
var (
	repoSlot     = json.RawMessage(`-0.0e-7777`)
	repoSlotKey  = []byte(`"repo":-0.0e-7777`)
	repoSlotRepl = []byte(`"repo":`)
)

func (s *Sim) branchWire(rp *repo, ref, sha, base string) jBranch {
	return jBranch{Label: rp.ref.Owner + ":" + ref, Ref: ref, SHA: sha, User: rp.owner.json(base), Repo: repoSlot}
}

// headWire is a PR's head: its branch, with repo null once the head
// repository is gone (DeleteHeadRepo).
func (s *Sim) headWire(rp *repo, p *pr, base string) jBranch {
	b := s.branchWire(rp, p.headRef, p.headSHA, base)
	if p.headRepoGone {
		b.Repo = json.RawMessage("null")
	}
	return b
}

func (s *Sim) encodePull(rp *repo, v any, base string) json.RawMessage {
	b, _ := json.Marshal(v)
	repl := append(append([]byte{}, repoSlotRepl...), s.repoJSON(rp, base)...)
	return bytes.ReplaceAll(b, repoSlotKey, repl)
}

func (s *Sim) pullWire(rp *repo, p *pr, base string) jPull {
	ru := rp.apiURL(base)
	n := strconv.Itoa(p.number)
	u := ru + "/pulls/" + n
	h := rp.htmlURL(base) + "/pull/" + n
	iu := ru + "/issues/" + n
	var mergeSHA *string
	if p.mergeSHA != "" {
		mergeSHA = strp(p.mergeSHA)
	}
	var body *string
	if p.body != "" {
		body = strp(p.body)
	}
	reviewers := make([]json.RawMessage, 0, len(p.reviewers))
	for _, r := range p.reviewers {
		reviewers = append(reviewers, r.json(base))
	}
	var mergedAt *ts
	if p.merged {
		mergedAt = tsp(p.mergedAt)
	}
	var closedAt *ts
	if p.state == "closed" {
		closedAt = tsp(p.closed)
	}
	return jPull{
		URL: u, ID: p.id, NodeID: nodeID("011:PullRequest", p.id), HTMLURL: h, DiffURL: h + ".diff", PatchURL: h + ".patch",
		IssueURL: iu, CommitsURL: u + "/commits", ReviewCommentsURL: u + "/comments",
		ReviewCommentURL: ru + "/pulls/comments{/number}", CommentsURL: iu + "/comments",
		StatusesURL: ru + "/statuses/" + p.headSHA, Number: p.number, State: p.state, Title: p.title,
		User: p.user.json(base), Body: body, Labels: labelsWire(rp, p.labels, base),
		CreatedAt: ts(p.created), UpdatedAt: ts(p.updated), ClosedAt: closedAt, MergedAt: mergedAt,
		MergeCommitSHA: mergeSHA, Assignee: json.RawMessage("null"), Assignees: []json.RawMessage{},
		RequestedReviewers: reviewers, RequestedTeams: []struct{}{},
		Head: s.headWire(rp, p, base), Base: s.branchWire(rp, p.baseRef, p.baseSHA, base),
		Links: jPRLinks{
			Self: jHref{u}, HTML: jHref{h}, Issue: jHref{iu}, Comments: jHref{iu + "/comments"},
			ReviewComments: jHref{u + "/comments"}, ReviewComment: jHref{ru + "/pulls/comments{/number}"},
			Commits: jHref{u + "/commits"}, Statuses: jHref{ru + "/statuses/" + p.headSHA},
		},
		AuthorAssociation: rp.association(p.user), Draft: p.draft,
	}
}

// pullSimpleJSON is the list form of a PR, cached until the PR or its
// repository changes.
func (s *Sim) pullSimpleJSON(rp *repo, p *pr, base string) json.RawMessage {
	if b := p.simpleCache.get(p.ver, rp.ver, base); b != nil {
		return b
	}
	b := s.encodePull(rp, s.pullWire(rp, p, base), base)
	p.simpleCache.put(p.ver, rp.ver, base, b)
	return b
}

// mergeState says what GitHub's mergeable and mergeable_state would, by
// the base branch's rules (its ruleset and classic protection together):
//
//   - unknown, mergeable null: merged, or within the mergeability delay
//     after the head or base moved (GitHub computes it in the background);
//   - dirty: the head conflicts with the base;
//   - draft;
//   - blocked: a required check has not passed on the head (missing,
//     pending or failed);
//   - behind: the base has commits the head lacks, and only when the base
//     requires branches to be up to date (strict); otherwise such a PR is
//     clean, and merging it lands a tree no check ran on;
//   - unstable: a check that is not required failed;
//   - clean.
//
// GitHub documents the states, not their precedence when several hold;
// the order above is the sim's.
func (rp *repo) mergeState(p *pr, mi *mergeInfo, now time.Time, delay time.Duration) (*bool, string) {
	if p.merged || mi == nil || (delay > 0 && now.Before(p.moved.Add(delay))) {
		return nil, "unknown"
	}
	t, f := true, false
	req := rp.requiredOn(p.baseRef)
	switch {
	case mi.conflict:
		return &f, "dirty"
	case p.draft:
		return &t, "draft"
	case !rp.passed(p.headSHA, req.Contexts):
		return &t, "blocked"
	case req.Strict && mi.behind > 0:
		return &t, "behind"
	case rp.failing(p.headSHA):
		return &t, "unstable"
	}
	return &t, "clean"
}

// passed reports whether every one of contexts passed on sha: a commit
// status of that context, a check run of that name, or both when both
// exist (GitHub then requires both), and its latest state a success (or,
// for a check run, neutral or skipped).
func (rp *repo) passed(sha string, contexts []string) bool {
	for _, name := range contexts {
		seen := false
		for _, st := range rp.statuses[sha] {
			if st.context == name {
				if st.state != "success" {
					return false
				}
				seen = true
			}
		}
		for _, cr := range rp.checks[sha] {
			if cr.name == name {
				if !checkPassed(cr) {
					return false
				}
				seen = true
			}
		}
		if !seen {
			return false
		}
	}
	return true
}

// checkPassed reports a completed check run whose conclusion lets a merge
// through.
func checkPassed(cr *checkRun) bool {
	if cr.status != "completed" {
		return false
	}
	switch cr.conclusion {
	case "success", "neutral", "skipped":
		return true
	}
	return false
}

// failing reports whether any latest commit status or completed check run
// on sha did not pass.
func (rp *repo) failing(sha string) bool {
	for _, st := range rp.statuses[sha] {
		if st.state == "failure" || st.state == "error" {
			return true
		}
	}
	for _, cr := range rp.checks[sha] {
		if cr.status == "completed" && !checkPassed(cr) {
			return true
		}
	}
	return false
}

func (s *Sim) pullFull(rp *repo, p *pr, base string, mi *mergeInfo, now time.Time) jPullFull {
	f := jPullFull{jPull: s.pullWire(rp, p, base)}
	f.Merged = p.merged
	f.Mergeable, f.MergeableState = rp.mergeState(p, mi, now, time.Duration(s.mergeDelay.Load()))
	f.Rebaseable = f.Mergeable
	f.MergedBy = p.mergedBy.json(base)
	f.Comments = len(p.comments)
	f.ReviewComments = len(p.rcomments)
	f.MaintainerCanModify = false
	if mi != nil {
		f.Commits, f.Additions, f.Deletions, f.ChangedFiles = mi.ahead, mi.additions, mi.deletions, mi.changedFiles
	}
	return f
}

func rollup(rs []*reaction, url string) jReactionRollup {
	r := jReactionRollup{URL: url, TotalCount: len(rs)}
	for _, x := range rs {
		switch x.content {
		case "+1":
			r.PlusOne++
		case "-1":
			r.MinusOne++
		case "laugh":
			r.Laugh++
		case "confused":
			r.Confused++
		case "heart":
			r.Heart++
		case "hooray":
			r.Hooray++
		case "eyes":
			r.Eyes++
		case "rocket":
			r.Rocket++
		}
	}
	return r
}

// issueJSON is the issue form of a PR, cached until it or its repository
// changes; reactions change it too (the rollup), without moving updated_at.
func (s *Sim) issueJSON(rp *repo, p *pr, base string) json.RawMessage {
	if b := p.issueCache.get(p.ver, rp.ver, base); b != nil {
		return b
	}
	ru := rp.apiURL(base)
	n := strconv.Itoa(p.number)
	iu := ru + "/issues/" + n
	h := rp.htmlURL(base) + "/pull/" + n
	var body *string
	if p.body != "" {
		body = strp(p.body)
	}
	var closedAt *ts
	var reason *string
	if p.state == "closed" {
		closedAt = tsp(p.closed)
		if !p.merged {
			reason = strp("not_planned")
		} else {
			reason = strp("completed")
		}
	}
	var mergedAt *ts
	if p.merged {
		mergedAt = tsp(p.mergedAt)
	}
	w := jIssue{
		URL: iu, RepositoryURL: ru, LabelsURL: iu + "/labels{/name}", CommentsURL: iu + "/comments",
		EventsURL: iu + "/events", HTMLURL: h, ID: p.issueID, NodeID: nodeID("011:PullRequest", p.id),
		Number: p.number, Title: p.title, User: p.user.json(base), Labels: labelsWire(rp, p.labels, base),
		State: p.state, Assignee: json.RawMessage("null"), Assignees: []json.RawMessage{},
		Comments: len(p.comments), CreatedAt: ts(p.created), UpdatedAt: ts(p.updated), ClosedAt: closedAt,
		AuthorAssociation: rp.association(p.user), Draft: p.draft,
		PullRequest: &jIssuePR{URL: ru + "/pulls/" + n, HTMLURL: h, DiffURL: h + ".diff", PatchURL: h + ".patch", MergedAt: mergedAt},
		Body:        body, Reactions: rollup(p.reactions, iu+"/reactions"), TimelineURL: iu + "/timeline",
		StateReason: reason,
	}
	b, _ := json.Marshal(w)
	p.issueCache.put(p.ver, rp.ver, base, b)
	return b
}

func reactionWire(r *reaction, base string) jReaction {
	return jReaction{ID: r.id, NodeID: nodeID("08:Reaction", r.id), User: r.user.json(base), Content: r.content, CreatedAt: ts(r.created)}
}

func issueCommentWire(rp *repo, c *issueComment, base string) jIssueComment {
	ru := rp.apiURL(base)
	n := strconv.Itoa(c.pr.number)
	id := itoa64(c.id)
	return jIssueComment{
		URL: ru + "/issues/comments/" + id, HTMLURL: rp.htmlURL(base) + "/pull/" + n + "#issuecomment-" + id,
		IssueURL: ru + "/issues/" + n, ID: c.id, NodeID: nodeID("012:IssueComment", c.id), User: c.user.json(base),
		CreatedAt: ts(c.created), UpdatedAt: ts(c.updated), AuthorAssociation: rp.association(c.user), Body: c.body,
		Reactions: rollup(c.reactions, ru+"/issues/comments/"+id+"/reactions"),
	}
}

func reviewCommentWire(rp *repo, c *reviewComment, base string) jReviewComment {
	ru := rp.apiURL(base)
	n := strconv.Itoa(c.pr.number)
	id := itoa64(c.id)
	u := ru + "/pulls/comments/" + id
	h := rp.htmlURL(base) + "/pull/" + n + "#discussion_r" + id
	var rid, reply *int64
	if c.reviewID != 0 {
		v := c.reviewID
		rid = &v
	}
	if c.inReplyTo != 0 {
		v := c.inReplyTo
		reply = &v
	}
	return jReviewComment{
		URL: u, PullRequestReviewID: rid, ID: c.id, NodeID: nodeID("024:PullRequestReviewComment", c.id),
		DiffHunk: c.diffHunk, Path: c.path, CommitID: c.commitID, OriginalCommitID: c.origCommitID,
		User: c.user.json(base), Body: c.body, CreatedAt: ts(c.created), UpdatedAt: ts(c.updated), HTMLURL: h,
		PullRequestURL: ru + "/pulls/" + n, AuthorAssociation: rp.association(c.user),
		Links: jReviewCommentLinks{Self: jHref{u}, HTML: jHref{h}, PullRequest: jHref{ru + "/pulls/" + n}},
		Line:  c.line, OriginalLine: c.line, Side: c.side, Position: c.line, OriginalPosition: c.line,
		InReplyToID: reply, SubjectType: "line", Reactions: rollup(nil, u+"/reactions"),
	}
}

func reviewWire(rp *repo, p *pr, r *review, base string) jReview {
	ru := rp.apiURL(base)
	n := strconv.Itoa(p.number)
	h := rp.htmlURL(base) + "/pull/" + n + "#pullrequestreview-" + itoa64(r.id)
	w := jReview{
		ID: r.id, NodeID: nodeID("017:PullRequestReview", r.id), User: r.user.json(base), Body: r.body, State: r.state,
		HTMLURL: h, PullRequestURL: ru + "/pulls/" + n,
		Links:    jReviewLinks{HTML: jHref{h}, PullRequest: jHref{ru + "/pulls/" + n}},
		CommitID: r.commitID, AuthorAssociation: rp.association(r.user),
	}
	if r.state != "PENDING" {
		w.SubmittedAt = tsp(r.submitted)
	}
	return w
}

func (s *Sim) appWire(base string) *jApp {
	owner := &user{login: "github", id: 9919}
	return &jApp{
		ID: 15368, Slug: "github-actions", NodeID: nodeID("03:App", 15368), Owner: owner.json(base),
		Name: "GitHub Actions", Description: strp("Automate your workflow from idea to production"),
		ExternalURL: "https://help.github.com/en/actions", HTMLURL: webBase(base) + "/apps/github-actions",
		CreatedAt: ts(DefaultStart.AddDate(-7, 0, 0)), UpdatedAt: ts(DefaultStart.AddDate(-1, 0, 0)),
		Permissions: map[string]string{"checks": "write", "contents": "write", "pull_requests": "write", "statuses": "write"},
		Events:      []string{"check_run", "check_suite", "pull_request", "push"},
	}
}
