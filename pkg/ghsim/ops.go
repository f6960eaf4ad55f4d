package ghsim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// ErrNotFound is wrapped by errors about missing users, repositories, pull
// requests, reactions and labels.
var ErrNotFound = errors.New("not found")

// apiError is an operation failure with the status and message GitHub
// would answer; the admin API returns it as an error.
type apiError struct {
	status int
	msg    string
	items  []jErrItem
	simple []string // errors as plain strings (Validation Error Simple)
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%d %s", e.status, e.msg)
	for _, it := range e.items {
		s += fmt.Sprintf(" (%s %s %s %s)", it.Resource, it.Field, it.Code, it.Message)
	}
	for _, m := range e.simple {
		s += " (" + m + ")"
	}
	return s
}

func (e *apiError) Is(target error) bool { return target == ErrNotFound && e.status == 404 }

func apiErr(status int, msg string, items ...jErrItem) *apiError {
	return &apiError{status: status, msg: msg, items: items}
}

func simpleErr(msg string) *apiError {
	return &apiError{status: 422, msg: "Unprocessable Entity", simple: []string{msg}}
}

func errNotFound() *apiError { return apiErr(404, "Not Found") }

func invalid(resource, field, code string) *apiError {
	return apiErr(422, "Validation Failed", jErrItem{Resource: resource, Field: field, Code: code})
}

// resultOf turns an operation error into the HTTP answer.
func resultOf(err error) *result {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.simple != nil {
			errs := make([]any, len(ae.simple))
			for i, s := range ae.simple {
				errs[i] = s
			}
			return &result{status: ae.status, body: errBodyAny(ae.status, ae.msg, errs)}
		}
		return errResult(ae.status, ae.msg, ae.items...)
	}
	return errResult(500, "Server Error")
}

func forbidden(u *user) *apiError {
	if u != nil && u.bot {
		return apiErr(403, "Resource not accessible by integration")
	}
	return apiErr(403, "Must have admin rights to Repository.")
}

// requirePerm checks u's permission; rp.mu must be held.
func (rp *repo) requirePerm(u *user, need string) *apiError {
	if u == nil {
		return apiErr(401, "Requires authentication")
	}
	if permRank[rp.permOf(u)] < permRank[need] {
		return forbidden(u)
	}
	return nil
}

// ---- lookups ----

func (s *Sim) userByLogin(login string) *user {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.users[strings.ToLower(login)]
}

func (s *Sim) ensureUser(login string, bot bool) *user {
	key := strings.ToLower(login)
	s.mu.RLock()
	u := s.users[key]
	s.mu.RUnlock()
	if u != nil {
		return u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u = s.users[key]; u == nil {
		u = &user{login: login, id: s.newID(), bot: bot || strings.HasSuffix(login, "[bot]")}
		s.users[key] = u
		s.byID[u.id] = u
	}
	return u
}

func (s *Sim) repoOf(owner, name string) *repo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.repos[strings.ToLower(owner+"/"+name)]
}

func (s *Sim) repoFor(r ghref.Repo) (*repo, error) {
	rp := s.repoOf(r.Owner, r.Name)
	if rp == nil {
		return nil, fmt.Errorf("repository %s: %w", r, ErrNotFound)
	}
	return rp, nil
}

func (s *Sim) prFor(ref ghref.PR) (*repo, *pr, error) {
	rp, err := s.repoFor(ref.RepoRef())
	if err != nil {
		return nil, nil, err
	}
	rp.mu.Lock()
	p := rp.prs[ref.Number]
	rp.mu.Unlock()
	if p == nil {
		return nil, nil, fmt.Errorf("pull request %s: %w", ref, ErrNotFound)
	}
	return rp, p, nil
}

// ---- pull requests ----

type openInput struct {
	title, body, head, base string
	draft                   bool
	author                  *user
}

func (s *Sim) openPR(rp *repo, in openInput, now time.Time) (*pr, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if in.base == "" {
		in.base = rp.defBranch
	}
	if in.title == "" {
		return nil, invalid("PullRequest", "title", "missing_field")
	}
	headSHA, ok := rp.readRef(in.head)
	if !ok {
		return nil, invalid("PullRequest", "head", "invalid")
	}
	baseSHA, ok := rp.readRef(in.base)
	if !ok {
		return nil, invalid("PullRequest", "base", "invalid")
	}
	if headSHA == baseSHA {
		return nil, apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequest", Code: "custom",
			Message: "No commits between " + in.base + " and " + in.head})
	}
	for _, o := range rp.order {
		if o.state == "open" && o.headRef == in.head && o.baseRef == in.base {
			return nil, apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequest", Code: "custom",
				Message: "A pull request already exists for " + rp.ref.Owner + ":" + in.head + "."})
		}
	}
	p := rp.newPRLocked(s, in, headSHA, baseSHA, now)
	return p, nil
}

func (rp *repo) newPRLocked(s *Sim, in openInput, headSHA, baseSHA string, now time.Time) *pr {
	p := &pr{
		number: rp.nextNumber, id: s.newID(), issueID: s.newID(), user: in.author, title: in.title, body: in.body,
		headRef: in.head, baseRef: in.base, headSHA: headSHA, baseSHA: baseSHA, draft: in.draft, state: "open",
		created: now, updated: now, moved: now,
	}
	rp.nextNumber++
	rp.prs[p.number] = p
	rp.order = append(rp.order, p)
	rp.ver++
	return p
}

func (s *Sim) setState(rp *repo, p *pr, u *user, state string, now time.Time) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.setStateLocked(p, u, state, now)
}

func (rp *repo) setStateLocked(p *pr, u *user, state string, now time.Time) error {
	if u != nil && p.user != u {
		if err := rp.requirePerm(u, "triage"); err != nil {
			return err
		}
	}
	rp.refreshLocked(p, now)
	switch state {
	case p.state:
		return nil
	case "closed":
		p.state, p.closed = "closed", now
	case "open":
		if p.merged {
			return apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequest", Code: "custom", Field: "state",
				Message: "state cannot be changed. The pull request cannot be reopened because it has been merged."})
		}
		head, ok := rp.readRef(p.headRef)
		if !ok {
			return apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequest", Code: "custom", Field: "state",
				Message: "state cannot be changed. The " + p.headRef + " branch has been deleted."})
		}
		p.state, p.closed, p.headSHA = "open", time.Time{}, head
		if base, ok := rp.readRef(p.baseRef); ok {
			p.baseSHA = base
		}
	default:
		return invalid("PullRequest", "state", "invalid")
	}
	p.touch(now)
	rp.ver++
	return nil
}

// ---- reactions, comments, labels ----

var reactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// addReaction returns the user's existing reaction of that content, or a
// new one. Reactions do not move updated_at (see the package doc).
func (s *Sim) addReaction(rp *repo, p *pr, u *user, content string, now time.Time) (*reaction, bool, error) {
	if !slices.Contains(reactionContents, content) {
		return nil, false, invalid("Reaction", "content", "invalid")
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r, created := s.reactOnce(&p.reactions, u, content, now)
	if created {
		p.ver++ // the rollup changes; updated_at does not
	}
	return r, created, nil
}

// reactOnce adds u's content reaction to rs unless u already reacted so,
// as GitHub keeps one reaction per user and content (on a PR or a
// comment alike); it reports whether it added one. The caller holds the
// repository's lock.
func (s *Sim) reactOnce(rs *[]*reaction, u *user, content string, now time.Time) (*reaction, bool) {
	for _, r := range *rs {
		if r.user == u && r.content == content {
			return r, false
		}
	}
	r := &reaction{id: s.newID(), user: u, content: content, created: now}
	*rs = append(*rs, r)
	return r, true
}

func (s *Sim) removeReaction(rp *repo, p *pr, u *user, id int64) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for i, r := range p.reactions {
		if r.id != id {
			continue
		}
		if u != nil && r.user != u {
			if err := rp.requirePerm(u, "write"); err != nil {
				return err
			}
		}
		p.reactions = slices.Delete(p.reactions, i, i+1)
		p.ver++
		return nil
	}
	return fmt.Errorf("reaction %d on %s#%d: %w", id, rp.ref, p.number, errNotFound())
}

func (s *Sim) addIssueComment(rp *repo, p *pr, u *user, body string, now time.Time) (*issueComment, error) {
	if strings.TrimSpace(body) == "" {
		return nil, invalid("IssueComment", "body", "missing_field")
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.refreshLocked(p, now)
	c := &issueComment{id: s.newID(), user: u, body: body, created: now, updated: now, pr: p}
	p.comments = append(p.comments, c)
	rp.icomments = append(rp.icomments, c)
	p.touch(now)
	return c, nil
}

func (s *Sim) addLabels(rp *repo, p *pr, u *user, names []string, now time.Time) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if u != nil {
		if err := rp.requirePerm(u, "triage"); err != nil {
			return err
		}
	}
	changed := false
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			return invalid("Label", "name", "missing_field")
		}
		if slices.ContainsFunc(p.labels, func(l *label) bool { return strings.EqualFold(l.name, n) }) {
			continue
		}
		l := rp.labels[strings.ToLower(n)]
		if l == nil {
			l = &label{id: s.newID(), name: n, color: "ededed"}
			rp.labels[strings.ToLower(n)] = l
		}
		p.labels = append(p.labels, l)
		changed = true
	}
	if changed {
		p.touch(now)
	}
	return nil
}

func (s *Sim) removeLabel(rp *repo, p *pr, u *user, name string, now time.Time) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if u != nil {
		if err := rp.requirePerm(u, "triage"); err != nil {
			return err
		}
	}
	i := slices.IndexFunc(p.labels, func(l *label) bool { return strings.EqualFold(l.name, name) })
	if i < 0 {
		return apiErr(404, "Label does not exist")
	}
	p.labels = slices.Delete(p.labels, i, i+1)
	p.touch(now)
	return nil
}

// ---- reviews ----

type reviewCommentIn struct {
	path, body, side string
	line             int
	inReplyTo        int64
}

// diffHunk builds the hunk GitHub shows for a comment on line of path at
// commit, from the file's real content. It runs git, so no lock may be held.
func (s *Sim) diffHunk(rp *repo, commit, path string, line int) (string, error) {
	out, err := s.git(rp.dir, nil, nil, "cat-file", "blob", commit+":"+path)
	if err != nil {
		return "", invalid("PullRequestReviewComment", "path", "invalid")
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if line < 1 || line > len(lines) {
		return "", apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequestReviewComment", Field: "line", Code: "custom",
			Message: "pull_request_review_thread.line must be part of the diff"})
	}
	from := max(1, line-3)
	var b strings.Builder
	fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@", from, line-from, from, line-from+1)
	for i := from; i <= line; i++ {
		b.WriteString("\n+" + lines[i-1])
	}
	return b.String(), nil
}

type reviewIn struct {
	state, body, commitID string
	comments              []reviewCommentIn
}

func (s *Sim) addReview(rp *repo, p *pr, u *user, in reviewIn, now time.Time) (*review, error) {
	switch in.state {
	case "APPROVED", "PENDING":
	case "CHANGES_REQUESTED", "COMMENTED":
		if strings.TrimSpace(in.body) == "" && len(in.comments) == 0 {
			return nil, simpleErr("Review Comment is missing a body: event " + in.state + " requires one")
		}
	default:
		return nil, simpleErr("Invalid event: " + in.state)
	}
	rp.mu.Lock()
	rp.refreshLocked(p, now)
	if p.user == u && in.state == "APPROVED" {
		rp.mu.Unlock()
		return nil, simpleErr("Can not approve your own pull request")
	}
	if p.user == u && in.state == "CHANGES_REQUESTED" {
		rp.mu.Unlock()
		return nil, simpleErr("Can not request changes on your own pull request")
	}
	if in.commitID == "" {
		in.commitID = p.headSHA
	}
	rp.mu.Unlock()
	if !isSHA(in.commitID) {
		return nil, simpleErr("Commit id is not a commit sha")
	}
	hunks := make([]string, len(in.comments))
	for i, c := range in.comments {
		if strings.TrimSpace(c.body) == "" {
			return nil, simpleErr("Review comment body is missing")
		}
		h, err := s.diffHunk(rp, in.commitID, c.path, c.line)
		if err != nil {
			// The reviews endpoint reports errors as plain strings.
			return nil, simpleErr("Path could not be resolved or line is not part of the diff: " + c.path)
		}
		hunks[i] = h
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r := &review{id: s.newID(), user: u, body: in.body, state: in.state, commitID: in.commitID, submitted: now}
	p.reviews = append(p.reviews, r)
	for i, c := range in.comments {
		side := c.side
		if side == "" {
			side = "RIGHT"
		}
		rc := &reviewComment{id: s.newID(), reviewID: r.id, user: u, body: c.body, path: c.path, line: c.line, side: side,
			commitID: in.commitID, origCommitID: in.commitID, diffHunk: hunks[i], created: now, updated: now, pr: p}
		p.rcomments = append(p.rcomments, rc)
		rp.rcomments = append(rp.rcomments, rc)
	}
	if in.state != "PENDING" {
		p.touch(now)
	}
	return r, nil
}

// addReviewComment creates a single inline comment; GitHub wraps it in a
// COMMENTED review of its own, and so does the sim.
func (s *Sim) addReviewComment(rp *repo, p *pr, u *user, in reviewCommentIn, commitID string, now time.Time) (*reviewComment, error) {
	if strings.TrimSpace(in.body) == "" {
		return nil, invalid("PullRequestReviewComment", "body", "missing_field")
	}
	rp.mu.Lock()
	rp.refreshLocked(p, now)
	if commitID == "" {
		commitID = p.headSHA
	}
	var parent *reviewComment
	if in.inReplyTo != 0 {
		i := slices.IndexFunc(p.rcomments, func(c *reviewComment) bool { return c.id == in.inReplyTo })
		if i < 0 {
			rp.mu.Unlock()
			return nil, invalid("PullRequestReviewComment", "in_reply_to", "invalid")
		}
		parent = p.rcomments[i]
	}
	rp.mu.Unlock()
	var hunk string
	if parent != nil {
		in.path, in.line, in.side, hunk, commitID = parent.path, parent.line, parent.side, parent.diffHunk, parent.commitID
	} else {
		if in.path == "" {
			return nil, invalid("PullRequestReviewComment", "path", "missing_field")
		}
		if !isSHA(commitID) {
			return nil, invalid("PullRequestReviewComment", "commit_id", "invalid")
		}
		h, err := s.diffHunk(rp, commitID, in.path, in.line)
		if err != nil {
			return nil, err
		}
		hunk = h
	}
	if in.side == "" {
		in.side = "RIGHT"
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r := &review{id: s.newID(), user: u, state: "COMMENTED", commitID: commitID, submitted: now}
	p.reviews = append(p.reviews, r)
	rc := &reviewComment{id: s.newID(), reviewID: r.id, user: u, body: in.body, path: in.path, line: in.line, side: in.side,
		commitID: commitID, origCommitID: commitID, inReplyTo: in.inReplyTo, diffHunk: hunk, created: now, updated: now, pr: p}
	p.rcomments = append(p.rcomments, rc)
	rp.rcomments = append(rp.rcomments, rc)
	p.touch(now)
	return rc, nil
}

// notCollaborator is GitHub's refusal of a review request from someone who
// is not a collaborator.
const notCollaborator = "Reviews may only be requested from collaborators. One or more of the users or teams you specified is not a collaborator of the repository."

// collaborator reports whether u was given a permission on the repository
// (or owns it); rp.mu must be held.
func (rp *repo) collaborator(u *user) bool {
	if strings.EqualFold(u.login, rp.owner.login) {
		return true
	}
	p, ok := rp.perms[strings.ToLower(u.login)]
	return ok && p != "none"
}

func (s *Sim) requestReviewers(rp *repo, p *pr, u *user, logins []string, now time.Time) error {
	var us []*user
	for _, l := range logins {
		ru := s.userByLogin(l)
		if ru == nil {
			return apiErr(422, notCollaborator)
		}
		us = append(us, ru)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if err := rp.requirePerm(u, "triage"); err != nil && p.user != u {
		return err
	}
	changed := false
	for _, ru := range us {
		if ru == p.user {
			return apiErr(422, "Review cannot be requested from pull request author.")
		}
		if !rp.collaborator(ru) {
			// Everyone may read a public repository; only collaborators
			// may be asked to review it.
			return apiErr(422, notCollaborator)
		}
		if !slices.Contains(p.reviewers, ru) {
			p.reviewers = append(p.reviewers, ru)
			changed = true
		}
	}
	if changed {
		p.touch(now)
	}
	return nil
}

// ---- statuses and checks ----

var statusStates = []string{"pending", "success", "failure", "error"}

// resolveRef maps a sha or branch name to a sha; rp.mu must be held.
func (rp *repo) resolveRef(ref string) (string, bool) {
	if isSHA(ref) {
		return ref, true
	}
	ref = strings.TrimPrefix(strings.TrimPrefix(ref, "refs/"), "heads/")
	return rp.readRef(ref)
}

// statusIn is a commit status to set.
type statusIn struct {
	context, state, description, targetURL, creator string
}

// setStatus sets a commit status on ref and returns it with the sha it is
// on; rp.mu must not be held.
func (s *Sim) setStatus(rp *repo, ref string, in statusIn, now time.Time) (*commitStatus, error) {
	if !slices.Contains(statusStates, in.state) {
		return nil, invalid("Status", "state", "invalid")
	}
	if in.context == "" {
		in.context = "default"
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return s.setStatusLocked(rp, ref, in, now)
}

// setStatusLocked is setStatus with rp.mu held and in checked.
func (s *Sim) setStatusLocked(rp *repo, ref string, in statusIn, now time.Time) (*commitStatus, error) {
	sha, ok := rp.resolveRef(ref)
	if !ok {
		return nil, apiErr(422, "No commit found for SHA: "+ref)
	}
	st := &commitStatus{
		id: s.newID(), context: in.context, state: in.state, description: in.description, targetURL: in.targetURL,
		creator: in.creator, created: now, updated: now,
	}
	list := rp.statuses[sha]
	if i := slices.IndexFunc(list, func(x *commitStatus) bool { return x.context == in.context }); i >= 0 {
		list[i] = st
	} else {
		rp.statuses[sha] = append(list, st)
	}
	rp.statusLog[sha] = append(rp.statusLog[sha], st)
	return st, nil
}

var (
	checkStatuses    = []string{"queued", "in_progress", "completed", "waiting", "requested", "pending"}
	checkConclusions = []string{"success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"}
)

func (s *Sim) setCheckRun(rp *repo, ref, name, status, conclusion string, now time.Time) error {
	if !slices.Contains(checkStatuses, status) {
		return invalid("CheckRun", "status", "invalid")
	}
	if status == "completed" && !slices.Contains(checkConclusions, conclusion) {
		return invalid("CheckRun", "conclusion", "invalid")
	}
	if status != "completed" {
		conclusion = ""
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sha, ok := rp.resolveRef(ref)
	if !ok {
		return apiErr(422, "No commit found for SHA: "+ref)
	}
	list := rp.checks[sha]
	i := slices.IndexFunc(list, func(x *checkRun) bool { return x.name == name })
	var cr *checkRun
	if i >= 0 {
		cr = list[i]
	} else {
		cr = &checkRun{id: s.newID(), suiteID: s.newID(), name: name, sha: sha, started: now}
		rp.checks[sha] = append(list, cr)
	}
	cr.status, cr.conclusion = status, conclusion
	if status == "completed" {
		cr.completed = now
	} else {
		cr.completed = time.Time{}
	}
	rp.checkLog[sha] = append(rp.checkLog[sha], *cr)
	return nil
}

// ---- git-level operations ----

// mergeInfoFor returns the cached mergeability of p, asking git when the
// (base, head) pair is new. It must be called without rp.mu held.
func (s *Sim) mergeInfoFor(rp *repo, p *pr, now time.Time) (*mergeInfo, error) {
	rp.mu.Lock()
	rp.refreshLocked(p, now)
	if p.merged {
		rp.mu.Unlock()
		return nil, nil
	}
	key := [2]string{p.baseSHA, p.headSHA}
	mi, ok := rp.merges[key]
	rp.mu.Unlock()
	if ok {
		return &mi, nil
	}
	mi, err := s.mergeability(rp.dir, key[0], key[1])
	if err != nil {
		return nil, fmt.Errorf("mergeability of %s#%d: %w", rp.ref, p.number, err)
	}
	rp.mu.Lock()
	if len(rp.merges) > 200000 {
		clear(rp.merges)
	}
	rp.merges[key] = mi
	rp.mu.Unlock()
	return &mi, nil
}

type mergeIn struct {
	method, sha, title, message string
}

// merge performs a real merge on the base branch.
func (s *Sim) merge(rp *repo, p *pr, u *user, in mergeIn, now time.Time) (string, error) {
	if in.method == "" {
		in.method = "merge"
	}
	if in.method != "merge" && in.method != "squash" && in.method != "rebase" {
		return "", invalid("PullRequest", "merge_method", "invalid")
	}
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()

	rp.mu.Lock()
	if err := rp.requirePerm(u, "write"); err != nil {
		rp.mu.Unlock()
		return "", err
	}
	rp.refreshLocked(p, now)
	if p.state != "open" || p.draft {
		rp.mu.Unlock()
		return "", apiErr(405, "Pull Request is not mergeable")
	}
	if in.sha != "" && in.sha != p.headSHA {
		rp.mu.Unlock()
		return "", apiErr(409, "Head branch was modified. Review and try the merge again.")
	}
	head, base, baseRef, number, title, body := p.headSHA, p.baseSHA, p.baseRef, p.number, p.title, p.body
	headLabel := rp.ref.Owner + "/" + p.headRef
	author := p.user
	rp.mu.Unlock()

	committer := s.ident(nil, now)
	var newSHA string
	switch in.method {
	case "merge":
		tree, err := s.mergeTree(rp.dir, base, head)
		if errors.Is(err, errConflict) {
			return "", apiErr(405, "Pull Request is not mergeable")
		} else if err != nil {
			return "", err
		}
		msg := in.title
		if msg == "" {
			msg = fmt.Sprintf("Merge pull request #%d from %s", number, headLabel)
		}
		m := in.message
		if m == "" {
			m = title
		}
		newSHA, err = s.commitTree(rp.dir, tree, []string{base, head}, msg+"\n\n"+m+"\n", s.ident(u, now), committer)
		if err != nil {
			return "", err
		}
	case "squash":
		tree, err := s.mergeTree(rp.dir, base, head)
		if errors.Is(err, errConflict) {
			return "", apiErr(405, "Pull Request is not mergeable")
		} else if err != nil {
			return "", err
		}
		msg := in.title
		if msg == "" {
			msg = fmt.Sprintf("%s (#%d)", title, number)
		}
		m := in.message
		if m == "" {
			msgs, err := s.commitMessages(rp.dir, base, head)
			if err != nil {
				return "", err
			}
			for i := range msgs {
				msgs[i] = "* " + msgs[i]
			}
			m = strings.Join(msgs, "\n\n")
		}
		full := msg + "\n"
		if m != "" {
			full += "\n" + m + "\n"
		}
		newSHA, err = s.commitTree(rp.dir, tree, []string{base}, full, s.ident(author, now), committer)
		if err != nil {
			return "", err
		}
	case "rebase":
		var err error
		newSHA, err = s.rebaseOnto(rp.dir, base, base, head, committer)
		if errors.Is(err, errConflict) {
			return "", apiErr(405, "This branch can't be rebased")
		} else if err != nil {
			return "", err
		}
	}
	_ = body
	movedAt := s.Now()
	if err := s.updateRef(rp.dir, "refs/heads/"+baseRef, newSHA, base); err != nil {
		if errors.Is(err, errStale) {
			return "", apiErr(409, "Base branch was modified. Review and try the merge again.")
		}
		return "", err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.moves = append(rp.moves, BranchMove{Branch: baseRef, From: base, To: newSHA, At: movedAt, Via: fmt.Sprintf("merge of #%d", number)})
	p.state, p.merged, p.mergedAt, p.closed, p.mergedBy, p.mergeSHA = "closed", true, now, now, u, newSHA
	p.baseSHA = newSHA
	p.touch(now)
	if !rp.contributors[author.id] {
		rp.contributors[author.id] = true
	}
	rp.pushed, rp.updated = now, now
	rp.ver++
	return newSHA, nil
}

// updateBranch merges the base branch into the head branch, as GitHub's
// "Update branch" button does.
func (s *Sim) updateBranch(rp *repo, p *pr, u *user, expected string, now time.Time) error {
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	rp.mu.Lock()
	if p.user != u {
		if err := rp.requirePerm(u, "write"); err != nil {
			rp.mu.Unlock()
			return err
		}
	}
	rp.refreshLocked(p, now)
	if p.state != "open" {
		rp.mu.Unlock()
		return apiErr(422, "Validation Failed", jErrItem{Resource: "PullRequest", Code: "custom", Message: "pull request is closed"})
	}
	if expected != "" && expected != p.headSHA {
		rp.mu.Unlock()
		return apiErr(422, "expected head sha didn’t match current head ref.")
	}
	head, base, headRef, baseRef := p.headSHA, p.baseSHA, p.headRef, p.baseRef
	rp.mu.Unlock()

	out, err := s.git(rp.dir, nil, nil, "merge-base", "--is-ancestor", base, head)
	if err == nil {
		return apiErr(422, "There are no new commits on the base branch.")
	} else if exitCode(err) != 1 {
		return fmt.Errorf("update branch of %s#%d: %w: %s", rp.ref, p.number, err, out)
	}
	tree, err := s.mergeTree(rp.dir, head, base)
	if errors.Is(err, errConflict) {
		return apiErr(422, "merge conflict between base and head")
	} else if err != nil {
		return err
	}
	msg := "Merge branch '" + baseRef + "' into " + headRef + "\n"
	newSHA, err := s.commitTree(rp.dir, tree, []string{head, base}, msg, s.ident(u, now), s.ident(nil, now))
	if err != nil {
		return err
	}
	movedAt := s.Now()
	if err := s.updateRef(rp.dir, "refs/heads/"+headRef, newSHA, head); err != nil {
		if errors.Is(err, errStale) {
			return apiErr(422, "expected head sha didn’t match current head ref.")
		}
		return err
	}
	rp.mu.Lock()
	rp.moves = append(rp.moves, BranchMove{Branch: headRef, From: head, To: newSHA, At: movedAt, Via: fmt.Sprintf("update-branch of #%d", p.number)})
	rp.refreshLocked(p, now)
	rp.mu.Unlock()
	return nil
}

func (s *Sim) deleteBranch(rp *repo, u *user, ref string, now time.Time) error {
	branch, ok := strings.CutPrefix(ref, "heads/")
	if !ok || !validBranch(branch) {
		return apiErr(422, "Reference does not exist")
	}
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	rp.mu.Lock()
	if err := rp.requirePerm(u, "write"); err != nil {
		rp.mu.Unlock()
		return err
	}
	if branch == rp.defBranch {
		rp.mu.Unlock()
		return apiErr(422, "A branch can't be deleted if it's the default branch")
	}
	sha, ok := rp.readRef(branch)
	rp.mu.Unlock()
	if !ok {
		return apiErr(422, "Reference does not exist")
	}
	if _, err := s.git(rp.dir, nil, nil, "update-ref", "-d", "refs/heads/"+branch, sha); err != nil {
		return fmt.Errorf("delete %s in %s: %w", branch, rp.ref, err)
	}
	rp.mu.Lock()
	for _, p := range rp.order {
		if p.headRef == branch || p.baseRef == branch {
			rp.refreshLocked(p, now)
		}
	}
	rp.mu.Unlock()
	return nil
}

func parseNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
