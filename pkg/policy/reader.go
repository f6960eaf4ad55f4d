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

// At is the effective policy of repo's base branch now, and the tip it
// was read at ("" without files). The tip is read again on every call
// (a conditional request): a base that moved is a new policy.
func (r *Reader) At(ctx context.Context, repo ghref.Repo, branch string) (Effective, string, error) {
	if r.loader == nil || branch == "" {
		return Resolve(r.Op, nil, branch), "", nil
	}
	tip, err := r.gh.GetCommit(ctx, repo, branch)
	if err != nil {
		return Effective{}, "", err
	}
	e, err := r.AtTip(ctx, repo, branch, tip.GetSHA())
	return e, tip.GetSHA(), err
}

// AtTip is the effective policy of repo's base branch whose tip is tip.
func (r *Reader) AtTip(ctx context.Context, repo ghref.Repo, branch, tip string) (Effective, error) {
	if r.loader == nil || branch == "" {
		return Resolve(r.Op, nil, branch), nil
	}
	return r.loader.Effective(ctx, r.Op, repo, branch, tip)
}

// ChangesPolicy reports whether head changes the policy file against the
// base whose tip is tip (false without files).
func (r *Reader) ChangesPolicy(ctx context.Context, repo ghref.Repo, tip, head string) (bool, error) {
	if r.loader == nil || tip == "" {
		return false, nil
	}
	return r.loader.ChangesPolicy(ctx, r.gh, repo, tip, head)
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
