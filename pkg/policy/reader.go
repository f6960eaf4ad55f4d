package policy

import (
	"context"
	"log/slog"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
)

// GitHub is the part of the GitHub client a Reader takes: the base tip,
// files at commits, comparisons, team memberships.
type GitHub interface {
	FileReader
	Comparer
	GetCommit(ctx context.Context, repo ghref.Repo, ref string) (*gh.RepositoryCommit, error)
	IsTeamMember(ctx context.Context, org, slug, login string) (bool, error)
}

// Reader is what each service holds to ask the base's policy: the
// operator's settings and, unless repository policies are off or the
// service's GitHub cannot read them (a test's narrow fake), a Loader.
// Every service reads for itself through its own cache; none records a
// policy or tells another service of one.
type Reader struct {
	// Op is the operator's defaults and ceilings.
	Op     Operator
	gh     GitHub
	loader *Loader
}

// NewReader returns a reader over g (used when it is a GitHub and
// settings.RepoPolicy is on) that lets auth look up team reviewers.
func NewReader(op Operator, settings Settings, g any, auth *review.Authorization) *Reader {
	op.Ceilings.MaxFixCycles, op.Ceilings.MergeMethods = settings.MaxFixCyclesCeiling, settings.MergeMethods
	r := &Reader{Op: op}
	if pg, ok := g.(GitHub); ok && settings.RepoPolicy {
		r.gh, r.loader = pg, NewLoader(pg)
		if auth != nil {
			auth.WithTeams(pg.IsTeamMember)
		}
	}
	return r
}

// Reads reports whether the reader reads repository files.
func (r *Reader) Reads() bool { return r.loader != nil }

// Base is where a PR's base stands: the branch's tip now, and the
// commit the head left it at.
type Base struct {
	Tip, MergeBase string
}

// At is the effective policy of repo's base branch now, with where the
// base stands for head ("" when the reader reads no files). One
// conditional request (a comparison of head with the branch, or the
// branch's commit without a head) reads the tip again on every call: a
// base that moved is a new policy.
func (r *Reader) At(ctx context.Context, repo ghref.Repo, branch, head string) (Effective, Base, error) {
	if r.loader == nil || branch == "" {
		return Resolve(r.Op, nil, branch), Base{}, nil
	}
	var b Base
	if head != "" {
		c, err := r.gh.Compare(ctx, repo, branch, head)
		if err != nil {
			return Effective{}, b, err
		}
		b = Base{Tip: c.BaseSHA, MergeBase: c.MergeBaseSHA}
	} else {
		tip, err := r.gh.GetCommit(ctx, repo, branch)
		if err != nil {
			return Effective{}, b, err
		}
		b.Tip = tip.GetSHA()
	}
	e, err := r.AtTip(ctx, repo, branch, b.Tip)
	return e, b, err
}

// AtTip is the effective policy of repo's base branch whose tip is tip.
func (r *Reader) AtTip(ctx context.Context, repo ghref.Repo, branch, tip string) (Effective, error) {
	if r.loader == nil || branch == "" {
		return Resolve(r.Op, nil, branch), nil
	}
	return r.loader.Effective(ctx, r.Op, repo, branch, tip)
}

// ChangesPolicy reports whether head changes the policy file against
// mergeBase (false when the reader reads no files).
func (r *Reader) ChangesPolicy(ctx context.Context, repo ghref.Repo, mergeBase, head string) (bool, error) {
	if r.loader == nil || mergeBase == "" {
		return false, nil
	}
	return r.loader.ChangesPolicy(ctx, repo, mergeBase, head)
}

// Review is the review policy and reviewer check of one evaluation under
// e: base (the operator's review policy) and auth's configured reviewers
// where e leaves them.
func (e Effective) Review(ctx context.Context, base review.Policy, auth *review.Authorization, repo ghref.Repo, log *slog.Logger) (review.Policy, *review.Permissions) {
	if e.Invalid != nil {
		return base, auth.For(ctx, repo, log)
	}
	if e.Reviewers.From == FromOperator {
		return e.ReviewPolicy(base), auth.For(ctx, repo, log)
	}
	return e.ReviewPolicy(base), auth.ForReviewers(ctx, repo, e.Reviewers.V, log)
}
