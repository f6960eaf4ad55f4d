package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// perPage is GitHub's maximum page size; every list asks for it.
const perPage = "100"

func repoPath(r ghref.Repo) string {
	return "repos/" + url.PathEscape(r.Owner) + "/" + url.PathEscape(r.Name)
}

func issuePath(p ghref.PR) string {
	return repoPath(p.RepoRef()) + "/issues/" + strconv.Itoa(p.Number)
}

func pullPath(p ghref.PR) string {
	return repoPath(p.RepoRef()) + "/pulls/" + strconv.Itoa(p.Number)
}

// escapeRef escapes each segment of a ref or branch name, keeping slashes.
func escapeRef(ref string) string {
	segs := strings.Split(ref, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func withQuery(path string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("per_page", perPage)
	return path + "?" + q.Encode()
}

// GetRepo fetches a repository.
func (c *Client) GetRepo(ctx context.Context, repo ghref.Repo) (*gh.Repository, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("get repository: %w", err)
	}
	r, _, err := doJSON[*gh.Repository](ctx, c, http.MethodGet, repoPath(repo), nil, true)
	if err != nil {
		return nil, fmt.Errorf("get repository %s: %w", repo, err)
	}
	return r, nil
}

// ListPulls lists every pull request of repo in state "open", "closed" or
// "all" (empty means open).
func (c *Client) ListPulls(ctx context.Context, repo ghref.Repo, state string) ([]*gh.PullRequest, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("list pull requests: %w", err)
	}
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	prs, err := listAll[*gh.PullRequest](ctx, c, withQuery(repoPath(repo)+"/pulls", q))
	if err != nil {
		return nil, fmt.Errorf("list pull requests of %s: %w", repo, err)
	}
	return prs, nil
}

// PullInput is what CreatePull opens: Head is a branch of the repository
// itself (prloop opens no PR from a fork), Base the branch to merge into.
type PullInput struct {
	Title string `json:"title"`
	Head  string `json:"head"`
	Base  string `json:"base"`
	Body  string `json:"body,omitempty"`
	Draft bool   `json:"draft,omitempty"`
}

// CreatePull opens a pull request (POST /repos/{owner}/{repo}/pulls). A
// retry could open a second one, so a 5xx or timeout is returned, not
// retried: the caller looks for the PR by its head (FindOpenPull). When
// an open PR of the same head and base exists, GitHub answers 422, which
// PullExists recognises.
func (c *Client) CreatePull(ctx context.Context, repo ghref.Repo, in PullInput) (*gh.PullRequest, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("create pull request: %w", err)
	}
	p, _, err := doJSON[*gh.PullRequest](ctx, c, http.MethodPost, repoPath(repo)+"/pulls", in, false)
	if err != nil {
		return nil, fmt.Errorf("create pull request %s → %s in %s: %w", in.Head, in.Base, repo, err)
	}
	return p, nil
}

// PullExists reports whether err is GitHub's answer to CreatePull that an
// open pull request for the same head (and base) exists already: "A pull
// request already exists for owner:branch."
func PullExists(err error) bool {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	for _, fe := range ve.Errors {
		if strings.HasPrefix(fe.Message, "A pull request already exists for ") {
			return true
		}
	}
	return strings.Contains(ve.Message, "A pull request already exists for ")
}

// FindOpenPull returns the open pull request whose head is branch of repo
// itself and whose base is base (any base when empty), or nil when there
// is none; the oldest if several.
func (c *Client) FindOpenPull(ctx context.Context, repo ghref.Repo, branch, base string) (*gh.PullRequest, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("find pull request: %w", err)
	}
	q := url.Values{"state": {"open"}, "head": {repo.Owner + ":" + branch}, "sort": {"created"}, "direction": {"asc"}}
	if base != "" {
		q.Set("base", base)
	}
	prs, err := listAll[*gh.PullRequest](ctx, c, withQuery(repoPath(repo)+"/pulls", q))
	if err != nil {
		return nil, fmt.Errorf("find the open pull request of %s in %s: %w", branch, repo, err)
	}
	for _, p := range prs {
		// GitHub filters by head already; a simulator or a proxy that
		// ignored the filter must not make another branch's PR ours.
		if p.GetHead().GetRef() == branch && (base == "" || p.GetBase().GetRef() == base) && p.GetState() == "open" {
			return p, nil
		}
	}
	return nil, nil
}

// GetPull fetches a pull request.
func (c *Client) GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("get pull request: %w", err)
	}
	p, _, err := doJSON[*gh.PullRequest](ctx, c, http.MethodGet, pullPath(pr), nil, true)
	if err != nil {
		return nil, fmt.Errorf("get pull request %s: %w", pr, err)
	}
	return p, nil
}

// PullEdit lists the fields EditPull changes; nil fields are left alone.
type PullEdit struct {
	Title               *string `json:"title,omitempty"`
	Body                *string `json:"body,omitempty"`
	State               *string `json:"state,omitempty"` // "open" or "closed"
	Base                *string `json:"base,omitempty"`
	MaintainerCanModify *bool   `json:"maintainer_can_modify,omitempty"`
}

// EditPull changes a pull request's title, body, state or base. Setting the
// same fields twice is harmless, so it is retried like a read.
func (c *Client) EditPull(ctx context.Context, pr ghref.PR, edit PullEdit) (*gh.PullRequest, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("edit pull request: %w", err)
	}
	p, _, err := doJSON[*gh.PullRequest](ctx, c, http.MethodPatch, pullPath(pr), edit, true)
	if err != nil {
		return nil, fmt.Errorf("edit pull request %s: %w", pr, err)
	}
	return p, nil
}

// IssueListOptions filters ListIssues. Zero values are GitHub's defaults
// (open issues, any labels, any time).
type IssueListOptions struct {
	// State is "open", "closed" or "all".
	State string
	// Since keeps issues updated at or after this time.
	Since time.Time
	// Labels keeps issues carrying all of these labels.
	Labels []string
}

// Issue is an issue or pull request as the issues API returns it. The
// embedded go-github type already decodes the "reactions" rollup
// (Issue.Reactions: total and per-emoji counts), which lets a poller see that
// a PR's reactions changed without listing them.
type Issue struct {
	gh.Issue
}

// IsPull reports whether the issue is a pull request.
func (i *Issue) IsPull() bool { return i.PullRequestLinks != nil }

// ReactionCounts returns the rollup, never nil (all zero when GitHub sent
// none).
func (i *Issue) ReactionCounts() *gh.Reactions {
	if i.Reactions == nil {
		return &gh.Reactions{}
	}
	return i.Reactions
}

// query renders the options as GitHub's query parameters.
func (o IssueListOptions) query() url.Values {
	q := url.Values{}
	if o.State != "" {
		q.Set("state", o.State)
	}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339))
	}
	if len(o.Labels) > 0 {
		q.Set("labels", strings.Join(o.Labels, ","))
	}
	return q
}

// ListIssues lists every issue and pull request of repo matching opts.
func (c *Client) ListIssues(ctx context.Context, repo ghref.Repo, opts IssueListOptions) ([]*Issue, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("list issues: %w", err)
	}
	issues, err := listAll[*Issue](ctx, c, withQuery(repoPath(repo)+"/issues", opts.query()))
	if err != nil {
		return nil, fmt.Errorf("list issues of %s: %w", repo, err)
	}
	return issues, nil
}

// Reaction is an emoji reaction. go-github's type lacks created_at, which
// tells a poller whether a reaction is new, so this one decodes it.
type Reaction struct {
	ID        int64     `json:"id"`
	Content   string    `json:"content"`
	User      string    `json:"-"`
	UserType  string    `json:"-"` // "User" or "Bot"
	CreatedAt time.Time `json:"created_at"`
}

type reactionJSON struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	User    *struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"user"`
	CreatedAt time.Time `json:"created_at"`
}

func (r reactionJSON) reaction() Reaction {
	out := Reaction{ID: r.ID, Content: r.Content, CreatedAt: r.CreatedAt}
	if r.User != nil {
		out.User, out.UserType = r.User.Login, r.User.Type
	}
	return out
}

// ListReactions lists every reaction on a pull request's conversation.
func (c *Client) ListReactions(ctx context.Context, pr ghref.PR) ([]Reaction, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("list reactions: %w", err)
	}
	raw, err := listAll[reactionJSON](ctx, c, withQuery(issuePath(pr)+"/reactions", nil))
	if err != nil {
		return nil, fmt.Errorf("list reactions of %s: %w", pr, err)
	}
	out := make([]Reaction, len(raw))
	for i, r := range raw {
		out[i] = r.reaction()
	}
	return out, nil
}

// CreateReaction adds the token's reaction (e.g. "eyes", "+1") to a pull
// request. GitHub answers an existing identical reaction with 200 and the
// old one, so retries cannot double it.
func (c *Client) CreateReaction(ctx context.Context, pr ghref.PR, content string) (Reaction, error) {
	if err := pr.Validate(); err != nil {
		return Reaction{}, fmt.Errorf("create reaction: %w", err)
	}
	r, _, err := doJSON[reactionJSON](ctx, c, http.MethodPost, issuePath(pr)+"/reactions", map[string]string{"content": content}, true)
	if err != nil {
		return Reaction{}, fmt.Errorf("create %q reaction on %s: %w", content, pr, err)
	}
	return r.reaction(), nil
}

// DeleteReaction removes a reaction. If an earlier attempt was retried and
// the retry finds it gone, that is success; a reaction that never existed is
// ErrNotFound.
func (c *Client) DeleteReaction(ctx context.Context, pr ghref.PR, id int64) error {
	if err := pr.Validate(); err != nil {
		return fmt.Errorf("delete reaction: %w", err)
	}
	if err := c.deleteOnce(ctx, issuePath(pr)+"/reactions/"+strconv.FormatInt(id, 10)); err != nil {
		return fmt.Errorf("delete reaction %d on %s: %w", id, pr, err)
	}
	return nil
}

// deleteOnce sends a DELETE; a 404 after a retry means the first attempt did
// the work, so it is success.
func (c *Client) deleteOnce(ctx context.Context, u string) error {
	ctx, ci := withCall(ctx, true)
	_, err := c.send(ctx, http.MethodDelete, u, nil, nil, true)
	if errors.Is(err, ErrNotFound) && ci.attempts.Load() > 1 {
		return nil
	}
	return err
}

// ListIssueComments lists every conversation comment of a pull request,
// updated at or after since (zero: all).
func (c *Client) ListIssueComments(ctx context.Context, pr ghref.PR, since time.Time) ([]*gh.IssueComment, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("list comments: %w", err)
	}
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	cs, err := listAll[*gh.IssueComment](ctx, c, withQuery(issuePath(pr)+"/comments", q))
	if err != nil {
		return nil, fmt.Errorf("list comments of %s: %w", pr, err)
	}
	return cs, nil
}

// CreateIssueComment posts a conversation comment. It is the one write that
// could act twice, so a 5xx or timeout is returned, not retried: the comment
// may or may not exist, and the caller decides (see retryTransport).
func (c *Client) CreateIssueComment(ctx context.Context, pr ghref.PR, body string) (*gh.IssueComment, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("create comment: %w", err)
	}
	cm, _, err := doJSON[*gh.IssueComment](ctx, c, http.MethodPost, issuePath(pr)+"/comments", map[string]string{"body": body}, false)
	if err != nil {
		return nil, fmt.Errorf("create comment on %s: %w", pr, err)
	}
	return cm, nil
}

// ListReviewComments lists every review (diff) comment of a pull request.
func (c *Client) ListReviewComments(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestComment, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("list review comments: %w", err)
	}
	cs, err := listAll[*gh.PullRequestComment](ctx, c, withQuery(pullPath(pr)+"/comments", nil))
	if err != nil {
		return nil, fmt.Errorf("list review comments of %s: %w", pr, err)
	}
	return cs, nil
}

// ReplyToReviewComment answers an inline review comment in its thread
// (POST /pulls/{n}/comments/{comment_id}/replies). Like CreateIssueComment
// it could act twice, so a 5xx or timeout is returned, not retried.
func (c *Client) ReplyToReviewComment(ctx context.Context, pr ghref.PR, commentID int64, body string) (*gh.PullRequestComment, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("reply to review comment: %w", err)
	}
	u := pullPath(pr) + "/comments/" + strconv.FormatInt(commentID, 10) + "/replies"
	cm, _, err := doJSON[*gh.PullRequestComment](ctx, c, http.MethodPost, u, map[string]string{"body": body}, false)
	if err != nil {
		return nil, fmt.Errorf("reply to review comment %d on %s: %w", commentID, pr, err)
	}
	return cm, nil
}

// RequestReviewers asks logins to review a pull request (again). GitHub
// keeps requested reviewers as a set, so a repeat is harmless and it is
// retried; a login that cannot review the repository (not a collaborator,
// the PR's author) is refused with a *ValidationError.
func (c *Client) RequestReviewers(ctx context.Context, pr ghref.PR, logins ...string) error {
	if err := pr.Validate(); err != nil {
		return fmt.Errorf("request reviewers: %w", err)
	}
	body := map[string][]string{"reviewers": logins}
	if _, err := c.send(ctx, http.MethodPost, pullPath(pr)+"/requested_reviewers", body, nil, true); err != nil {
		return fmt.Errorf("request review of %s from %s: %w", pr, strings.Join(logins, ", "), err)
	}
	return nil
}

// ListReviews lists every review of a pull request.
func (c *Client) ListReviews(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestReview, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("list reviews: %w", err)
	}
	rs, err := listAll[*gh.PullRequestReview](ctx, c, withQuery(pullPath(pr)+"/reviews", nil))
	if err != nil {
		return nil, fmt.Errorf("list reviews of %s: %w", pr, err)
	}
	return rs, nil
}

// ListLabels lists the labels on a pull request.
func (c *Client) ListLabels(ctx context.Context, pr ghref.PR) ([]*gh.Label, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("list labels: %w", err)
	}
	ls, err := listAll[*gh.Label](ctx, c, withQuery(issuePath(pr)+"/labels", nil))
	if err != nil {
		return nil, fmt.Errorf("list labels of %s: %w", pr, err)
	}
	return ls, nil
}

// AddLabels adds labels to a pull request (creating unknown ones in the
// repository) and returns all its labels. Adding a label twice is harmless.
func (c *Client) AddLabels(ctx context.Context, pr ghref.PR, labels ...string) ([]*gh.Label, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("add labels: %w", err)
	}
	ls, _, err := doJSON[[]*gh.Label](ctx, c, http.MethodPost, issuePath(pr)+"/labels", map[string][]string{"labels": labels}, true)
	if err != nil {
		return nil, fmt.Errorf("add labels %q to %s: %w", labels, pr, err)
	}
	return ls, nil
}

// RemoveLabel removes a label from a pull request. A label that is not on
// the PR is ErrNotFound: callers that only want it gone check
// errors.Is(err, ErrNotFound). (A 404 on a retry after the first attempt
// removed it is success.)
func (c *Client) RemoveLabel(ctx context.Context, pr ghref.PR, label string) error {
	if err := pr.Validate(); err != nil {
		return fmt.Errorf("remove label: %w", err)
	}
	if err := c.deleteOnce(ctx, issuePath(pr)+"/labels/"+url.PathEscape(label)); err != nil {
		return fmt.Errorf("remove label %q from %s: %w", label, pr, err)
	}
	return nil
}

// GetCombinedStatus returns the combined commit status of ref (a SHA or
// branch) with every status, across pages.
func (c *Client) GetCombinedStatus(ctx context.Context, repo ghref.Repo, ref string) (*gh.CombinedStatus, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("get combined status: %w", err)
	}
	var out *gh.CombinedStatus
	err := paginate(ctx, c, withQuery(repoPath(repo)+"/commits/"+escapeRef(ref)+"/status", nil), func(page *gh.CombinedStatus) int {
		if page == nil {
			return 0
		}
		if out == nil {
			out = page
		} else {
			out.Statuses = append(out.Statuses, page.Statuses...)
		}
		return len(page.Statuses)
	})
	if err != nil {
		return nil, fmt.Errorf("get combined status of %s@%s: %w", repo, ref, err)
	}
	if out == nil {
		out = &gh.CombinedStatus{}
	}
	return out, nil
}

// StatusInput is a commit status to set (POST /repos/{o}/{r}/statuses/{sha}).
type StatusInput struct {
	// State is pending, success, failure or error.
	State string `json:"state"`
	// Description is one line; GitHub keeps 140 characters.
	Description string `json:"description,omitempty"`
	// TargetURL is where the status links to; empty for none.
	TargetURL string `json:"target_url,omitempty"`
	// Context names the status; a later status with the same context
	// replaces it in the combined status.
	Context string `json:"context"`
}

// CreateStatus sets a commit status on sha (a full SHA: GitHub does not
// take a branch here). Setting the same status again only adds a
// duplicate to the SHA's history, so a retried request is harmless.
func (c *Client) CreateStatus(ctx context.Context, repo ghref.Repo, sha string, in StatusInput) (*gh.RepoStatus, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("create status: %w", err)
	}
	if sha == "" {
		return nil, fmt.Errorf("create status %s on %s: %w", in.Context, repo, errors.New("empty sha"))
	}
	st, _, err := doJSON[*gh.RepoStatus](ctx, c, http.MethodPost, repoPath(repo)+"/statuses/"+url.PathEscape(sha), in, true)
	if err != nil {
		return nil, fmt.Errorf("create status %s on %s@%s: %w", in.Context, repo, sha, err)
	}
	return st, nil
}

// ListCheckRuns lists every check run of ref (a SHA or branch): the latest
// run of each name, GitHub's default filter.
func (c *Client) ListCheckRuns(ctx context.Context, repo ghref.Repo, ref string) ([]*gh.CheckRun, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("list check runs: %w", err)
	}
	runs, err := c.listCheckRuns(ctx, repo, ref, nil)
	if err != nil {
		return nil, fmt.Errorf("list check runs of %s@%s: %w", repo, ref, err)
	}
	return runs, nil
}

// listCheckRuns collects every page of ref's check runs matching q.
func (c *Client) listCheckRuns(ctx context.Context, repo ghref.Repo, ref string, q url.Values) ([]*gh.CheckRun, error) {
	var runs []*gh.CheckRun
	err := paginate(ctx, c, withQuery(repoPath(repo)+"/commits/"+escapeRef(ref)+"/check-runs", q), func(page *gh.ListCheckRunsResults) int {
		if page == nil {
			return 0
		}
		runs = append(runs, page.CheckRuns...)
		return len(page.CheckRuns)
	})
	return runs, err
}

// GetPermission returns login's role on repo: admin, maintain, write, triage,
// read or none. GitHub's role_name is used when present, since "permission"
// folds maintain into write and triage into read.
func (c *Client) GetPermission(ctx context.Context, repo ghref.Repo, login string) (string, error) {
	if err := repo.Validate(); err != nil {
		return "", fmt.Errorf("get permission: %w", err)
	}
	if login == "" {
		return "", fmt.Errorf("get permission on %s: empty login", repo)
	}
	p, _, err := doJSON[*gh.RepositoryPermissionLevel](ctx, c, http.MethodGet,
		repoPath(repo)+"/collaborators/"+url.PathEscape(login)+"/permission", nil, true)
	if err != nil {
		return "", fmt.Errorf("get permission of %s on %s: %w", login, repo, err)
	}
	if p == nil {
		return "none", nil
	}
	if r := p.GetRoleName(); r != "" {
		return r, nil
	}
	if r := p.GetPermission(); r != "" {
		return r, nil
	}
	return "none", nil
}

// Merge methods.
const (
	MergeMethodMerge  = "merge"
	MergeMethodSquash = "squash"
	MergeMethodRebase = "rebase"
)

// MergeOptions are the merge parameters. Method is always sent (empty means
// "merge"), so the repository's default never decides silently. SHA, when
// set, makes GitHub refuse if the head moved (409), which is also what makes
// retrying a merge safe.
type MergeOptions struct {
	Method  string
	SHA     string
	Title   string
	Message string
	// Once makes one attempt: no retry after a 5xx or a timeout, no wait
	// on a rate limit. GitHub's merge call guards the head (SHA) but not
	// the base tip, so a caller that read the tip right before the call
	// (the merger's rule) must not have the call sent again seconds later
	// on a tip it no longer knows; it reads again and decides again.
	Once bool
}

type mergeRequest struct {
	MergeMethod   string `json:"merge_method"`
	SHA           string `json:"sha,omitempty"`
	CommitTitle   string `json:"commit_title,omitempty"`
	CommitMessage string `json:"commit_message,omitempty"`
}

// Merge merges a pull request. A merge cannot act twice (a merged PR is not
// mergeable again), so it is retried on 5xx and timeouts; if a retry is
// refused (405/409) because the first attempt merged after all, Merge checks
// and reports success. Refusals come back as ErrNotMergeable (405) or
// ErrConflict (409).
func (c *Client) Merge(ctx context.Context, pr ghref.PR, opts MergeOptions) (*gh.PullRequestMergeResult, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	m := mergeRequest{MergeMethod: opts.Method, SHA: opts.SHA, CommitTitle: opts.Title, CommitMessage: opts.Message}
	switch m.MergeMethod {
	case "":
		m.MergeMethod = MergeMethodMerge
	case MergeMethodMerge, MergeMethodSquash, MergeMethodRebase:
	default:
		return nil, fmt.Errorf("merge %s: method %q, want merge, squash or rebase", pr, opts.Method)
	}
	cctx, ci := withCall(ctx, true)
	ci.once = opts.Once
	var res gh.PullRequestMergeResult
	_, err := c.send(cctx, http.MethodPut, pullPath(pr)+"/merge", m, &res, true)
	if err != nil && ci.attempts.Load() > 1 && (errors.Is(err, ErrNotMergeable) || errors.Is(err, ErrConflict)) {
		if p, gerr := c.GetPull(ctx, pr); gerr == nil && p.GetMerged() {
			c.log.Warn("github merge retried and refused, but the PR is merged", "pr", pr.String())
			return &gh.PullRequestMergeResult{Merged: gh.Bool(true), SHA: p.MergeCommitSHA, Message: gh.String("Pull Request successfully merged")}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("merge %s (%s): %w", pr, m.MergeMethod, err)
	}
	return &res, nil
}

// UpdateBranch merges the base branch into the PR's head (GitHub does it
// asynchronously and answers 202). expectedHeadSHA, when set, makes GitHub
// refuse with a *ValidationError if the head moved meanwhile; a retry after
// an attempt that did act is refused the same way.
func (c *Client) UpdateBranch(ctx context.Context, pr ghref.PR, expectedHeadSHA string) error {
	if err := pr.Validate(); err != nil {
		return fmt.Errorf("update branch: %w", err)
	}
	body := map[string]string{}
	if expectedHeadSHA != "" {
		body["expected_head_sha"] = expectedHeadSHA
	}
	if _, err := c.send(ctx, http.MethodPut, pullPath(pr)+"/update-branch", body, nil, true); err != nil {
		return fmt.Errorf("update branch of %s: %w", pr, err)
	}
	return nil
}

// IsMerged reports whether a pull request is merged (GitHub answers 204 or
// 404; a PR that does not exist is therefore "not merged").
func (c *Client) IsMerged(ctx context.Context, pr ghref.PR) (bool, error) {
	if err := pr.Validate(); err != nil {
		return false, fmt.Errorf("check merged: %w", err)
	}
	_, err := c.send(ctx, http.MethodGet, pullPath(pr)+"/merge", nil, nil, true)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("check whether %s is merged: %w", pr, err)
}

// DeleteBranch deletes a branch (e.g. after merging). A branch that does not
// exist is ErrNotFound (GitHub says 404 or 422 "Reference does not exist").
func (c *Client) DeleteBranch(ctx context.Context, repo ghref.Repo, branch string) error {
	if err := repo.Validate(); err != nil {
		return fmt.Errorf("delete branch: %w", err)
	}
	if branch == "" {
		return fmt.Errorf("delete branch of %s: empty branch name", repo)
	}
	err := c.deleteOnce(ctx, repoPath(repo)+"/git/refs/heads/"+escapeRef(branch))
	var ve *ValidationError
	if errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.Message), "reference does not exist") {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("delete branch %s of %s: %w", branch, repo, err)
	}
	return nil
}

type rateLimitBody struct {
	Resources *gh.RateLimits `json:"resources"`
}

// RateLimit asks GitHub for the token's rate limits (GET /rate_limit costs
// nothing against them).
func (c *Client) RateLimit(ctx context.Context) (*gh.RateLimits, error) {
	body, _, err := doJSON[rateLimitBody](ctx, c, http.MethodGet, "rate_limit", nil, true)
	if err != nil {
		return nil, fmt.Errorf("get rate limits: %w", err)
	}
	if body.Resources == nil {
		return &gh.RateLimits{}, nil
	}
	return body.Resources, nil
}

// Ping checks that GitHub answers and accepts the credentials, with one
// GET /rate_limit (free against the rate limit) and no retries or waits: a
// readiness probe wants a prompt answer, and asks again soon anyway.
func (c *Client) Ping(ctx context.Context) error {
	ctx, ci := withCall(ctx, true)
	ci.once = true
	if _, _, err := doJSON[rateLimitBody](ctx, c, http.MethodGet, "rate_limit", nil, true); err != nil {
		return fmt.Errorf("ping %s: %w", c.baseURL.Host, err)
	}
	return nil
}

// CurrentUser returns the login the credentials act as (GET /user). With
// GitHub App installation auth GitHub refuses /user (403); use the App's bot
// login instead.
func (c *Client) CurrentUser(ctx context.Context) (string, error) {
	u, _, err := doJSON[*gh.User](ctx, c, http.MethodGet, "user", nil, true)
	if err != nil {
		return "", fmt.Errorf("get current user: %w", err)
	}
	if u.GetLogin() == "" {
		return "", errors.New("get current user: GET /user returned no login")
	}
	return u.GetLogin(), nil
}
