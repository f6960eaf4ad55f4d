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
