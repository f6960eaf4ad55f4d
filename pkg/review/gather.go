package review

import (
	"context"
	"fmt"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// Source is the part of the GitHub client that Gather reads.
type Source interface {
	ListReactions(ctx context.Context, pr ghref.PR) ([]github.Reaction, error)
	ListIssueComments(ctx context.Context, pr ghref.PR, since time.Time) ([]*gh.IssueComment, error)
	ListReviews(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestReview, error)
	ListReviewComments(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestComment, error)
}

var _ Source = (*github.Client)(nil)

// Gather reads every review signal on pr, fully paginated. Conversation
// comments are read from since on (the head's anchor: older ones cannot
// count); reactions, reviews and inline comments are read whole because
// GitHub offers no per-PR filter for them, and conditional requests make an
// unchanged list free.
func Gather(ctx context.Context, src Source, pr ghref.PR, since time.Time) (Signals, error) {
	var sig Signals
	var err error
	if sig.Reactions, err = GatherReactions(ctx, src, pr); err != nil {
		return sig, err
	}
	comments, err := src.ListIssueComments(ctx, pr, since)
	if err != nil {
		return sig, fmt.Errorf("gather signals of %s: %w", pr, err)
	}
	for _, c := range comments {
		sig.Comments = append(sig.Comments, Comment{ID: c.GetID(), User: user(c.User), Body: c.GetBody(), CreatedAt: c.GetCreatedAt().Time, URL: c.GetHTMLURL(), Association: c.GetAuthorAssociation()})
	}
	reviews, err := src.ListReviews(ctx, pr)
	if err != nil {
		return sig, fmt.Errorf("gather signals of %s: %w", pr, err)
	}
	for _, r := range reviews {
		sig.Reviews = append(sig.Reviews, Review{ID: r.GetID(), User: user(r.User), State: r.GetState(), Body: r.GetBody(), CommitID: r.GetCommitID(), SubmittedAt: r.GetSubmittedAt().Time, URL: r.GetHTMLURL()})
	}
	rcs, err := src.ListReviewComments(ctx, pr)
	if err != nil {
		return sig, fmt.Errorf("gather signals of %s: %w", pr, err)
	}
	for _, c := range rcs {
		line := c.GetLine()
		if line == 0 {
			line = c.GetOriginalLine()
		}
		sig.ReviewComments = append(sig.ReviewComments, ReviewComment{
			ID: c.GetID(), ReviewID: c.GetPullRequestReviewID(), User: user(c.User), Path: c.GetPath(), Line: line,
			Body: c.GetBody(), DiffHunk: c.GetDiffHunk(), CommitID: c.GetCommitID(), CreatedAt: c.GetCreatedAt().Time,
			InReplyTo: c.GetInReplyTo(), URL: c.GetHTMLURL(),
		})
	}
	return sig, nil
}

func user(u *gh.User) User {
	if u == nil {
		return User{}
	}
	return User{Login: u.GetLogin(), Bot: u.GetType() == "Bot"}
}

// ReactionLister is the part of the GitHub client GatherReactions reads.
type ReactionLister interface {
	ListReactions(ctx context.Context, pr ghref.PR) ([]github.Reaction, error)
}

// GatherReactions reads only the reactions on pr: what a change of the
// reactions rollup alone calls for.
func GatherReactions(ctx context.Context, src ReactionLister, pr ghref.PR) ([]Reaction, error) {
	reactions, err := src.ListReactions(ctx, pr)
	if err != nil {
		return nil, fmt.Errorf("gather reactions of %s: %w", pr, err)
	}
	out := make([]Reaction, 0, len(reactions))
	for _, r := range reactions {
		out = append(out, Reaction{ID: r.ID, Content: r.Content, User: User{Login: r.User, Bot: r.UserType == "Bot"}, CreatedAt: r.CreatedAt})
	}
	return out, nil
}
