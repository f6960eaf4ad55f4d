package github

import (
	"context"
	"fmt"
	"net/http"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// GetCommit fetches a commit (a SHA or branch name), with its parents.
func (c *Client) GetCommit(ctx context.Context, repo ghref.Repo, ref string) (*gh.RepositoryCommit, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("get commit: %w", err)
	}
	if ref == "" {
		return nil, fmt.Errorf("get commit of %s: empty ref", repo)
	}
	rc, _, err := doJSON[*gh.RepositoryCommit](ctx, c, http.MethodGet, repoPath(repo)+"/commits/"+escapeRef(ref), nil, true)
	if err != nil {
		return nil, fmt.Errorf("get commit %s of %s: %w", ref, repo, err)
	}
	return rc, nil
}

// GetCommitDate returns the committer date of a commit (a SHA or branch
// name). GitHub's API gives no push time; the poller anchors a newly watched
// PR's review signals at its head commit's committer date instead.
func (c *Client) GetCommitDate(ctx context.Context, repo ghref.Repo, ref string) (time.Time, error) {
	rc, err := c.GetCommit(ctx, repo, ref)
	if err != nil {
		return time.Time{}, err
	}
	d := rc.GetCommit().GetCommitter().GetDate().Time
	if d.IsZero() {
		return time.Time{}, fmt.Errorf("get commit %s of %s: no committer date in the response", ref, repo)
	}
	return d, nil
}

// Comparison is what GitHub's comparison of two commits says of how they
// relate (GET /repos/{owner}/{repo}/compare/{base}...{head}).
type Comparison struct {
	// Status is identical, ahead (head has commits base lacks), behind
	// (base has commits head lacks) or diverged (both).
	Status string
	// AheadBy counts the commits of head not in base, BehindBy those of
	// base not in head: base is an ancestor of head exactly when BehindBy
	// is 0.
	AheadBy, BehindBy int
	// BaseSHA is the commit base named when GitHub compared (a branch's
	// tip then), BaseTree its tree; MergeBaseSHA is the merge base of the
	// two.
	BaseSHA, BaseTree, MergeBaseSHA string
}

// Compare compares head with base (branch names or SHAs of repo). It asks
// for one commit of the list, which it does not return: the counts cover
// them all.
func (c *Client) Compare(ctx context.Context, repo ghref.Repo, base, head string) (Comparison, error) {
	if err := repo.Validate(); err != nil {
		return Comparison{}, fmt.Errorf("compare: %w", err)
	}
	if base == "" || head == "" {
		return Comparison{}, fmt.Errorf("compare %q with %q in %s: empty ref", head, base, repo)
	}
	cc, _, err := doJSON[*gh.CommitsComparison](ctx, c, http.MethodGet,
		repoPath(repo)+"/compare/"+escapeRef(base)+"..."+escapeRef(head)+"?per_page=1", nil, true)
	if err != nil {
		return Comparison{}, fmt.Errorf("compare %s with %s in %s: %w", head, base, repo, err)
	}
	if cc.Status == nil || cc.BehindBy == nil || cc.GetBaseCommit().GetSHA() == "" {
		return Comparison{}, fmt.Errorf("compare %s with %s in %s: the answer lacks status, behind_by or base_commit", head, base, repo)
	}
	return Comparison{
		Status: cc.GetStatus(), AheadBy: cc.GetAheadBy(), BehindBy: cc.GetBehindBy(),
		BaseSHA: cc.GetBaseCommit().GetSHA(), BaseTree: cc.GetBaseCommit().GetCommit().GetTree().GetSHA(),
		MergeBaseSHA: cc.GetMergeBaseCommit().GetSHA(),
	}, nil
}
