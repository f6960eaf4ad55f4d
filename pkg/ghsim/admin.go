package ghsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// AddUser creates a user (type "Bot" if isBot or the login ends in
// "[bot]"); an existing user is left as it is.
func (s *Sim) AddUser(login string, isBot bool) { s.ensureUser(login, isBot) }

// SetMergeabilityDelay makes a PR's mergeable null and mergeable_state
// "unknown" for d of the sim clock after it opens or its head or base
// moves, as GitHub answers while it computes mergeability in the
// background; 0 (the default) computes it at once.
func (s *Sim) SetMergeabilityDelay(d time.Duration) { s.mergeDelay.Store(int64(max(d, 0))) }

// SetMaxPerPage caps the page size of every list at n (at most GitHub's
// 100; n <= 0 restores 100), whatever per_page a client asks for.
func (s *Sim) SetMaxPerPage(n int) {
	if n <= 0 || n > maxPerPage {
		n = maxPerPage
	}
	s.maxPerPage.Store(int64(n))
}

// AddToken makes token authenticate as login, creating the user if needed.
func (s *Sim) AddToken(token, login string) {
	u := s.ensureUser(login, false)
	s.mu.Lock()
	s.tokens[token] = u
	s.mu.Unlock()
}

// SetTokenScopes makes token (AddToken) a classic token with scopes: every
// answer to it carries them in X-OAuth-Scopes, as GitHub's do ("Scopes for
// OAuth apps", https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps);
// a token without them answers as a fine-grained one, with no such header.
// The simulator does not refuse requests for want of a scope.
func (s *Sim) SetTokenScopes(token string, scopes ...string) {
	s.mu.Lock()
	s.scopes[token] = strings.Join(scopes, ", ")
	s.mu.Unlock()
}

// CreateRepo creates a bare repository with one commit of files on "main",
// the default branch. The owner becomes a user with admin permission.
func (s *Sim) CreateRepo(owner, name string, files map[string]string) (ghref.Repo, error) {
	ref := ghref.Repo{Owner: owner, Name: name}
	if err := ref.Validate(); err != nil {
		return ghref.Repo{}, fmt.Errorf("create repository: %w", err)
	}
	ou := s.ensureUser(owner, false)
	now := s.Now()
	dir := filepath.Join(s.dir, owner, name+".git")
	s.mu.Lock()
	if _, ok := s.repos[ref.Key()]; ok {
		s.mu.Unlock()
		return ghref.Repo{}, fmt.Errorf("create repository %s: already exists", ref)
	}
	rp := &repo{
		ref: ref, id: s.newID(), owner: ou, dir: dir, created: now, defBranch: "main", pushed: now, updated: now,
		perms: map[string]string{}, contributors: map[int64]bool{}, prs: map[int]*pr{}, nextNumber: 1,
		labels: map[string]*label{}, statuses: map[string][]*commitStatus{}, statusLog: map[string][]*commitStatus{}, checks: map[string][]*checkRun{}, checkLog: map[string][]checkRun{},
		merges: map[[2]string]mergeInfo{}, refs: map[string]refEntry{},
	}
	s.repos[ref.Key()] = rp // reserve the name while git runs
	s.mu.Unlock()
	fail := func(err error) (ghref.Repo, error) {
		s.mu.Lock()
		delete(s.repos, ref.Key())
		s.mu.Unlock()
		return ghref.Repo{}, fmt.Errorf("create repository %s: %w", ref, err)
	}
	if _, err := os.Stat(dir); err == nil {
		return fail(fmt.Errorf("%s already exists", dir))
	}
	if err := s.initBare(dir, "main"); err != nil {
		return fail(err)
	}
	if len(files) == 0 {
		files = map[string]string{"README.md": "# " + name + "\n"}
	}
	id := s.ident(ou, now)
	c := fiCommit{ref: "refs/heads/main", author: id, committer: id, message: "Initial commit\n", files: files}
	if err := s.fastImport(dir, []fiCommit{c}); err != nil {
		return fail(err)
	}
	return ref, nil
}

// SetPermission grants login a permission on repo: admin, maintain, write,
// triage, read or none.
func (s *Sim) SetPermission(repo ghref.Repo, login, permission string) error {
	if _, ok := permRank[permission]; !ok {
		return fmt.Errorf("set permission of %s on %s: unknown permission %q", login, repo, permission)
	}
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	s.ensureUser(login, false)
	rp.mu.Lock()
	rp.perms[strings.ToLower(login)] = permission
	rp.ver++ // author_association may change
	rp.mu.Unlock()
	return nil
}

// PushCommit commits files to branch as author (creating the branch from
// the default branch if absent) and returns the new sha. A file with ""
// content is deleted. It is a real commit in the bare repository, so open
// PRs on that branch see a push.
func (s *Sim) PushCommit(repo ghref.Repo, branch, author string, files map[string]string, message string) (string, error) {
	return s.PushCommitDated(repo, branch, author, files, message, time.Time{})
}

// PushCommitDated is PushCommit with the commit's author and committer
// dates set to dated (when not zero), as anyone can set them with git: the
// push itself still happens now. It lets tests show that no decision rests
// on a date the commit's author chose.
func (s *Sim) PushCommitDated(repo ghref.Repo, branch, author string, files map[string]string, message string, dated time.Time) (string, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return "", err
	}
	if !validBranch(branch) {
		return "", fmt.Errorf("push to %s: invalid branch name %q", repo, branch)
	}
	u := s.actor(rp, author)
	now := s.Now()
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	rp.mu.Lock()
	from, ok := rp.readRef(branch)
	if !ok {
		from, ok = rp.readRef(rp.defBranch)
	}
	rp.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("push to %s %s: default branch %s is missing", repo, branch, rp.defBranch)
	}
	if message == "" {
		message = "Update files"
	}
	when := now
	if !dated.IsZero() {
		when = dated
	}
	id := s.ident(u, when)
	c := fiCommit{ref: "refs/heads/" + branch, from: from, author: id, committer: id, message: message + "\n", files: files}
	if err := s.fastImport(rp.dir, []fiCommit{c}); err != nil {
		return "", fmt.Errorf("push to %s %s: %w", repo, branch, err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sha, ok := rp.readRef(branch)
	if !ok {
		return "", fmt.Errorf("push to %s %s: branch missing after commit", repo, branch)
	}
	rp.pushed = now
	rp.ver++
	rp.moves = append(rp.moves, BranchMove{Branch: branch, From: from, To: sha, At: now, Via: "push by " + u.login})
	for _, p := range rp.order {
		if p.headRef == branch || p.baseRef == branch {
			rp.refreshLocked(p, now)
		}
	}
	return sha, nil
}

// PRInput describes a pull request to open.
type PRInput struct {
	Title, Body string
	Head        string // branch in the same repository
	Base        string // default: the repository's default branch
	Author      string
	Draft       bool
}

func (s *Sim) prRef(rp *repo, p *pr) ghref.PR {
	ref := rp.ref.PR(p.number)
	if s.opts.BaseURL != "" {
		ref.URL = rp.htmlURL(s.opts.BaseURL) + "/pull/" + strconv.Itoa(p.number)
	}
	return ref
}

// OpenPR opens a pull request from an existing branch.
func (s *Sim) OpenPR(repo ghref.Repo, in PRInput) (ghref.PR, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return ghref.PR{}, err
	}
	u := s.actor(rp, in.Author)
	p, err := s.openPR(rp, openInput{title: in.Title, body: in.Body, head: in.Head, base: in.Base, draft: in.Draft, author: u}, s.Now())
	if err != nil {
		return ghref.PR{}, fmt.Errorf("open PR %s from %s: %w", repo, in.Head, err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return s.prRef(rp, p), nil
}

// OpenPRs creates n branches, each one commit ahead of the default branch,
// and opens a PR for each, in a single git process: for benchmarks.
func (s *Sim) OpenPRs(repo ghref.Repo, n int, author string) ([]ghref.PR, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	u := s.actor(rp, author)
	now := s.Now()
	rp.gitMu.Lock()
	defer rp.gitMu.Unlock()
	rp.mu.Lock()
	base, ok := rp.readRef(rp.defBranch)
	first := rp.nextNumber
	rp.nextNumber += n // reserve the numbers
	rp.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("open PRs in %s: default branch missing", repo)
	}
	id := s.ident(u, now)
	commits := make([]fiCommit, n)
	for i := range commits {
		num := first + i
		commits[i] = fiCommit{
			ref: fmt.Sprintf("refs/heads/bulk/pr-%d", num), from: base, author: id, committer: id,
			message: fmt.Sprintf("Bulk change %d\n", num),
			files:   map[string]string{fmt.Sprintf("bulk/pr-%d.txt", num): fmt.Sprintf("change %d\n", num)},
		}
	}
	if err := s.fastImport(rp.dir, commits); err != nil {
		return nil, fmt.Errorf("open PRs in %s: %w", repo, err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	out := make([]ghref.PR, 0, n)
	for i := 0; i < n; i++ {
		num := first + i
		branch := fmt.Sprintf("bulk/pr-%d", num)
		head, ok := rp.readRef(branch)
		if !ok {
			return out, fmt.Errorf("open PRs in %s: branch %s missing after import", repo, branch)
		}
		p := &pr{
			number: num, id: s.newID(), issueID: s.newID(), user: u, title: fmt.Sprintf("Bulk change %d", num),
			body: fmt.Sprintf("Generated pull request %d.", num), headRef: branch, baseRef: rp.defBranch,
			headSHA: head, baseSHA: base, state: "open", created: now, updated: now,
		}
		rp.prs[num] = p
		rp.order = append(rp.order, p)
		rp.merges[[2]string{base, head}] = mergeInfo{ahead: 1, additions: 1, changedFiles: 1}
		out = append(out, s.prRef(rp, p))
	}
	slices.SortFunc(rp.order, func(a, b *pr) int { return a.number - b.number })
	rp.pushed = now
	rp.ver++
	return out, nil
}

// actor is the user an admin call acts as; "" means the repository owner.
func (s *Sim) actor(rp *repo, login string) *user {
	if login == "" {
		return rp.owner
	}
	return s.ensureUser(login, false)
}

// ClosePR closes a pull request without merging it.
func (s *Sim) ClosePR(ref ghref.PR) error {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return err
	}
	if err := s.setState(rp, p, nil, "closed", s.Now()); err != nil {
		return fmt.Errorf("close %s: %w", ref, err)
	}
	return nil
}

// DeleteHeadRepo makes the PR's head repository gone, as when the author
// deletes the fork a PR came from: the PR stays open at its last head, and
// GitHub answers head.repo null from then on (see the issue "pull-request.head.repo
// is not required" in github/rest-api-description, #161, and #1811 for the list
// form). The sim has no forks: the head branch stays in the repository,
// and only the PR's JSON changes.
func (s *Sim) DeleteHeadRepo(ref ghref.PR) error {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	p.headRepoGone = true
	p.ver++
	return nil
}

// ReopenPR reopens a closed, unmerged pull request.
func (s *Sim) ReopenPR(ref ghref.PR) error {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return err
	}
	if err := s.setState(rp, p, nil, "open", s.Now()); err != nil {
		return fmt.Errorf("reopen %s: %w", ref, err)
	}
	return nil
}

// AddReaction reacts to the PR's body as login and returns the reaction id
// (the existing one if login already reacted with content).
func (s *Sim) AddReaction(ref ghref.PR, login, content string) (int64, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return 0, err
	}
	r, _, err := s.addReaction(rp, p, s.actor(rp, login), content, s.Now())
	if err != nil {
		return 0, fmt.Errorf("react %q to %s: %w", content, ref, err)
	}
	return r.id, nil
}

// RemoveReaction deletes a reaction from the PR.
func (s *Sim) RemoveReaction(ref ghref.PR, id int64) error {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return err
	}
	return s.removeReaction(rp, p, nil, id)
}

// AddIssueComment comments on the PR's conversation as login.
func (s *Sim) AddIssueComment(ref ghref.PR, login, body string) (int64, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return 0, err
	}
	c, err := s.addIssueComment(rp, p, s.actor(rp, login), body, s.Now())
	if err != nil {
		return 0, fmt.Errorf("comment on %s: %w", ref, err)
	}
	return c.id, nil
}

// ReviewCommentInput is one inline comment. Login, CommitID and InReplyTo
// are used by AddReviewComment only (defaults: the repository owner and
// the head sha).
type ReviewCommentInput struct {
	Path string
	Line int
	Body string
	// Side is LEFT or RIGHT; default RIGHT.
	Side      string
	Login     string
	CommitID  string
	InReplyTo int64
}

// ReviewInput describes a submitted review.
type ReviewInput struct {
	Login string
	// State is APPROVED, CHANGES_REQUESTED or COMMENTED (PENDING for an
	// unsubmitted review).
	State    string
	Body     string
	CommitID string // default: the head sha
	Comments []ReviewCommentInput
}

// AddReview submits a review, creating its inline comments.
func (s *Sim) AddReview(ref ghref.PR, in ReviewInput) (int64, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return 0, err
	}
	ri := reviewIn{state: in.State, body: in.Body, commitID: in.CommitID}
	for _, c := range in.Comments {
		ri.comments = append(ri.comments, reviewCommentIn{path: c.Path, body: c.Body, side: c.Side, line: c.Line})
	}
	r, err := s.addReview(rp, p, s.actor(rp, in.Login), ri, s.Now())
	if err != nil {
		return 0, fmt.Errorf("review %s: %w", ref, err)
	}
	return r.id, nil
}

// AddReviewComment adds one inline comment as in.Login (wrapped, as on
// GitHub, in a COMMENTED review of its own).
func (s *Sim) AddReviewComment(ref ghref.PR, in ReviewCommentInput) (int64, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return 0, err
	}
	c, err := s.addReviewComment(rp, p, s.actor(rp, in.Login),
		reviewCommentIn{path: in.Path, body: in.Body, side: in.Side, line: in.Line, inReplyTo: in.InReplyTo}, in.CommitID, s.Now())
	if err != nil {
		return 0, fmt.Errorf("review comment on %s: %w", ref, err)
	}
	return c.id, nil
}

// SetStatus sets the commit status for context on sha (or a branch name):
// pending, success, failure or error.
func (s *Sim) SetStatus(repo ghref.Repo, sha, context, state string) error {
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	if _, err := s.setStatus(rp, sha, statusIn{context: context, state: state}, s.Now()); err != nil {
		return fmt.Errorf("set status %s on %s@%s: %w", context, repo, sha, err)
	}
	return nil
}

// SetStatuses sets the commit status for each of contexts on sha (or a
// branch name) to state at once: no read sees some set and others not, as
// when a CI system's jobs all finish between two of a client's polls.
func (s *Sim) SetStatuses(repo ghref.Repo, sha, state string, contexts ...string) error {
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	if !slices.Contains(statusStates, state) {
		return fmt.Errorf("set statuses on %s@%s: state %q is not one of %v", repo, sha, state, statusStates)
	}
	if slices.Contains(contexts, "") {
		return fmt.Errorf("set statuses on %s@%s: empty context", repo, sha)
	}
	now := s.Now()
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if _, ok := rp.resolveRef(sha); !ok {
		return fmt.Errorf("set statuses on %s@%s: %w", repo, sha, apiErr(422, "No commit found for SHA: "+sha))
	}
	for _, c := range contexts {
		if _, err := s.setStatusLocked(rp, sha, statusIn{context: c, state: state}, now); err != nil {
			return fmt.Errorf("set status %s on %s@%s: %w", c, repo, sha, err)
		}
	}
	return nil
}

// StatusRecord is one commit status as it was set.
type StatusRecord struct {
	// SHA is the commit it was set on.
	SHA                                    string
	Context, State, Description, TargetURL string
	// Creator is the login of whoever set it through the API ("" when set
	// with SetStatus).
	Creator string
	// Created is when it was set, by the simulator's clock.
	Created time.Time
}

// StatusHistory returns every status set on sha for context (all contexts
// when context is ""), oldest first, like GitHub's list of a ref's statuses
// read backwards.
func (s *Sim) StatusHistory(repo ghref.Repo, sha, context string) ([]StatusRecord, error) {
	return readRepo(s, repo, func(rp *repository) (out []StatusRecord) {
		for _, st := range rp.statusLog[sha] {
			if context == "" || st.context == context {
				out = append(out, st.record(sha))
			}
		}
		return out
	})
}

// readRepo returns what read finds in the repository ref, under the repository's lock.
func readRepo[T any](s *Sim, ref ghref.Repo, read func(rp *repository) T) (T, error) {
	rp, err := s.repoFor(ref)
	if err != nil {
		var zero T
		return zero, err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return read(rp), nil
}

// record is st, set on sha, as StatusHistory and Statuses return it.
func (st *commitStatus) record(sha string) StatusRecord {
	return StatusRecord{
		SHA: sha, Context: st.context, State: st.state, Description: st.description, TargetURL: st.targetURL,
		Creator: st.creator, Created: st.created,
	}
}

// Statuses returns every status set on any commit of repo for context
// (all contexts when context is ""), in the order they were set: what a
// CI reported, and when, for a check that compares it with when a branch
// moved (BranchMoves).
func (s *Sim) Statuses(repo ghref.Repo, context string) ([]StatusRecord, error) {
	return readRepo(s, repo, func(rp *repository) (out []StatusRecord) {
		for sha, log := range rp.statusLog {
			for _, st := range log {
				if context == "" || st.context == context {
					out = append(out, st.record(sha))
				}
			}
		}
		slices.SortStableFunc(out, func(a, b StatusRecord) int { return a.Created.Compare(b.Created) })
		return out
	})
}

// BranchMove is one move of a branch that the simulator made itself: a
// merge (of the base), an update-branch (of the head), a PushCommit.
// Pushes over git's HTTP protocol go to git directly and are not among
// them.
type BranchMove struct {
	Branch, From, To string
	// At is the simulator's clock right before the ref moved: whatever was
	// reported before At was there to see before the move.
	At time.Time
	// Via says what moved it: "merge of #3", "update-branch of #3",
	// "push by bob".
	Via string
}

// BranchMoves returns the moves of branch in repo the simulator made,
// oldest first.
func (s *Sim) BranchMoves(repo ghref.Repo, branch string) ([]BranchMove, error) {
	return readRepo(s, repo, func(rp *repository) (out []BranchMove) {
		for _, m := range rp.moves {
			if m.Branch == branch {
				out = append(out, m)
			}
		}
		return out
	})
}

// SetCheckRun creates or updates the check run name on sha (or a branch):
// status queued, in_progress or completed; conclusion when completed.
func (s *Sim) SetCheckRun(repo ghref.Repo, sha, name, status, conclusion string) error {
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	if err := s.setCheckRun(rp, sha, name, status, conclusion, s.Now()); err != nil {
		return fmt.Errorf("set check run %s on %s@%s: %w", name, repo, sha, err)
	}
	return nil
}

// CheckRunRecord is a check run as one write left it.
type CheckRunRecord struct {
	// ID tells a run's update (the same ID) from a new run.
	ID                       int64
	Name, Status, Conclusion string
	Title, Summary           string
}

// CheckRunHistory returns every write of a check run named name on sha
// (all names when name is ""), oldest first: creates and updates through
// the API, and SetCheckRun.
func (s *Sim) CheckRunHistory(repo ghref.Repo, sha, name string) ([]CheckRunRecord, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return nil, err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var out []CheckRunRecord
	for _, cr := range rp.checkLog[sha] {
		if name == "" || cr.name == name {
			out = append(out, CheckRunRecord{ID: cr.id, Name: cr.name, Status: cr.status, Conclusion: cr.conclusion, Title: cr.title, Summary: cr.summary})
		}
	}
	return out, nil
}

// PRSnapshot is a PR's state, for assertions.
type PRSnapshot struct {
	Number         int
	Title, Body    string
	Author         string
	HeadRef        string
	HeadSHA        string
	BaseRef        string
	BaseSHA        string
	State          string // open or closed
	Draft          bool
	Merged         bool
	MergeCommitSHA string
	Labels         []string
	Reactions      int
	Comments       int
	ReviewComments int
	Reviews        int
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ClosedAt       time.Time
	MergedAt       time.Time
}

// PRInfo returns the PR's current state, having first noticed any push to
// its branches.
func (s *Sim) PRInfo(ref ghref.PR) (PRSnapshot, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return PRSnapshot{}, err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.refreshLocked(p, s.Now())
	snap := PRSnapshot{
		Number: p.number, Title: p.title, Body: p.body, Author: p.user.login, HeadRef: p.headRef, HeadSHA: p.headSHA,
		BaseRef: p.baseRef, BaseSHA: p.baseSHA, State: p.state, Draft: p.draft, Merged: p.merged,
		MergeCommitSHA: p.mergeSHA, Reactions: len(p.reactions), Comments: len(p.comments),
		ReviewComments: len(p.rcomments), Reviews: len(p.reviews), CreatedAt: p.created, UpdatedAt: p.updated,
		ClosedAt: p.closed, MergedAt: p.mergedAt,
	}
	for _, l := range p.labels {
		snap.Labels = append(snap.Labels, l.name)
	}
	return snap, nil
}

// CloneURL returns the URL git can clone and push to: file://, or http://
// with Options.GitHTTP.
func (s *Sim) CloneURL(repo ghref.Repo) string {
	rp := s.repoOf(repo.Owner, repo.Name)
	if rp == nil {
		return ""
	}
	return s.cloneURL(rp)
}

// GitDir returns the bare repository's directory.
func (s *Sim) GitDir(repo ghref.Repo) string {
	rp := s.repoOf(repo.Owner, repo.Name)
	if rp == nil {
		return ""
	}
	return rp.dir
}

// Branches returns every branch of the repository with the commit it
// points at, as a CI system sees pushes: PR heads, the commits
// update-branch makes and branches pushed over git alike. It reads the
// ref files as every API read does (loose refs, then packed-refs), never
// a git process, so a CI may look often.
func (s *Sim) Branches(repo ghref.Repo) (map[string]string, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return nil, err
	}
	heads := filepath.Join(rp.dir, "refs", "heads")
	var names []string
	err = filepath.WalkDir(heads, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(heads, path)
		if err == nil {
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list branches of %s: %w", repo, err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	branches := map[string]string{}
	for _, name := range names {
		if sha, ok := rp.readRef(name); ok {
			branches[name] = sha
		}
	}
	rp.readPacked("") // refresh the packed refs
	for ref, sha := range rp.packed.refs {
		if name, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
			if _, loose := branches[name]; !loose {
				branches[name] = sha
			}
		}
	}
	return branches, nil
}

// Tree returns the tree of commit rev (a sha or a branch) and the paths
// of the files in it, sorted: what a check compares and what a simulated
// CI judges a commit by.
func (s *Sim) Tree(repo ghref.Repo, rev string) (string, []string, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return "", nil, err
	}
	tree, err := s.git(rp.dir, nil, nil, "rev-parse", "--verify", "--end-of-options", rev+"^{tree}")
	if err != nil {
		return "", nil, fmt.Errorf("tree of %s@%s: %w", repo, rev, err)
	}
	tree = strings.TrimSpace(tree)
	out, err := s.git(rp.dir, nil, nil, "ls-tree", "-r", "--name-only", "-z", tree)
	if err != nil {
		return "", nil, fmt.Errorf("files of %s@%s: %w", repo, rev, err)
	}
	files := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if out == "" {
		files = nil
	}
	slices.Sort(files)
	return tree, files, nil
}

// CommentSnapshot is one issue comment as the simulator holds it.
type CommentSnapshot struct {
	ID      int64
	Author  string
	Body    string
	Created time.Time
	// Updated moves when the comment is edited; Reactions are the
	// comment's own, as "login:content".
	Updated   time.Time
	Reactions []string
}

// IssueComments returns the PR's issue comments, oldest first: what a
// check reads of the conversation without going through the API (and its
// faults).
func (s *Sim) IssueComments(ref ghref.PR) ([]CommentSnapshot, error) {
	rp, p, err := s.prFor(ref)
	if err != nil {
		return nil, err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	out := make([]CommentSnapshot, 0, len(p.comments))
	for _, c := range p.comments {
		cs := CommentSnapshot{ID: c.id, Author: c.user.login, Body: c.body, Created: c.created, Updated: c.updated}
		for _, r := range c.reactions {
			cs.Reactions = append(cs.Reactions, r.user.login+":"+r.content)
		}
		out = append(out, cs)
	}
	return out, nil
}

// repository is the simulator's repository type, named where a parameter
// called repo would hide it.
type repository = repo
