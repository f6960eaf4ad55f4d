package github

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// CreateCommentReaction adds the token's reaction (e.g. "eyes",
// "confused") to a conversation comment of a pull request
// (POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions).
// GitHub answers an existing identical reaction with 200, so retries
// cannot double it.
func (c *Client) CreateCommentReaction(ctx context.Context, pr ghref.PR, commentID int64, content string) error {
	if err := pr.Validate(); err != nil {
		return fmt.Errorf("create comment reaction: %w", err)
	}
	u := repoPath(pr.RepoRef()) + "/issues/comments/" + strconv.FormatInt(commentID, 10) + "/reactions"
	if _, _, err := doJSON[reactionJSON](ctx, c, http.MethodPost, u, map[string]string{"content": content}, true); err != nil {
		return fmt.Errorf("create %q reaction on comment %d of %s: %w", content, commentID, pr, err)
	}
	return nil
}

// EditIssueComment replaces the body of a conversation comment
// (PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}). The same
// body twice is the same comment, so it is retried.
func (c *Client) EditIssueComment(ctx context.Context, pr ghref.PR, commentID int64, body string) (*gh.IssueComment, error) {
	if err := pr.Validate(); err != nil {
		return nil, fmt.Errorf("edit comment: %w", err)
	}
	u := repoPath(pr.RepoRef()) + "/issues/comments/" + strconv.FormatInt(commentID, 10)
	cm, _, err := doJSON[*gh.IssueComment](ctx, c, http.MethodPatch, u, map[string]string{"body": body}, true)
	if err != nil {
		return nil, fmt.Errorf("edit comment %d of %s: %w", commentID, pr, err)
	}
	return cm, nil
}
