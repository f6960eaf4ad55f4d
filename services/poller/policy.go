package poller

import (
	"context"
	"log/slog"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
)

// policyGitHub is the part of the GitHub client that reading repository
// policies takes: a GitHub without it (a test's narrow fake) holds every
// repository to the operator's settings.
type policyGitHub interface {
	policy.FileReader
	policy.Comparer
	GetCommit(ctx context.Context, repo ghref.Repo, ref string) (*gh.RepositoryCommit, error)
	IsTeamMember(ctx context.Context, org, slug, login string) (bool, error)
}

// policies reads each base's .github/prloop.yml (pkg/policy, the one
// owner of policy facts) for the verdicts the poller computes.
type policies struct {
	gh     policyGitHub // nil: operator settings only
	loader *policy.Loader
	op     policy.Operator
}

func newPolicies(cfg Config, g GitHub, auth *review.Authorization) *policies {
	p := &policies{op: operatorOf(cfg)}
	if pg, ok := g.(policyGitHub); ok && cfg.RepoPolicy {
		p.gh, p.loader = pg, policy.NewLoader(pg)
		auth.WithTeams(pg.IsTeamMember)
	}
	return p
}

// operatorOf is what the poller's settings say of a policy.
func operatorOf(cfg Config) policy.Operator {
	return policy.Operator{
		Protocols: cfg.ReviewProtocols, Reviewers: cfg.Reviewers, Quorum: policy.SplitList(cfg.RequiredReviewers),
		ApprovalSurvivesPush: cfg.ApprovalSurvivesPush, ReviewTimeout: cfg.ReviewTimeout,
		MaxFixCycles: cfg.MaxFixCycles, EscalationLabel: cfg.EscalationLabel,
		Ceilings: policy.Ceilings{MaxFixCycles: cfg.MaxFixCyclesCeiling, MergeMethods: cfg.MergeMethods},
	}
}

// judgement is how one evaluation judges a PR under its base's policy.
type judgement struct {
	eff    policy.Effective
	review review.Policy
	perms  *review.Permissions
	timing Timing
	// changes says the PR changes the policy file.
	changes bool
}

// judge reads the effective policy of pr on base (its tip now) and what
// the evaluation needs of it. An error is a failed read: the evaluation
// is made again on the next probe, never under an older policy.
func (s *Service) judge(ctx context.Context, pr ghref.PR, base, head string, log *slog.Logger) (judgement, error) {
	j := judgement{review: s.policy, timing: s.timing, perms: s.auth.For(ctx, pr.RepoRef(), log)}
	p := s.pol
	if p.gh == nil || base == "" {
		j.eff = policy.Resolve(p.op, nil, base)
		return j, nil
	}
	tip, err := p.gh.GetCommit(ctx, pr.RepoRef(), base)
	if err != nil {
		return j, err
	}
	if j.eff, err = p.loader.Effective(ctx, p.op, pr.RepoRef(), base, tip.GetSHA()); err != nil {
		return j, err
	}
	if j.eff.Invalid != nil {
		return j, nil // policyHold says it; nothing else of the file is used
	}
	if j.changes, err = p.loader.ChangesPolicy(ctx, p.gh, pr.RepoRef(), tip.GetSHA(), head); err != nil {
		return j, err
	}
	j.review = j.eff.ReviewPolicy(s.policy)
	if j.eff.Reviewers.From != policy.FromOperator {
		j.perms = s.auth.ForReviewers(ctx, pr.RepoRef(), j.eff.Reviewers.V, log)
	}
	j.timing.ReviewTimeout = j.eff.ReviewTimeout.V
	j.timing.EscalationLabel = j.eff.EscalationLabel.V
	return j, nil
}

// policyHold is why the policy holds the verdict v back, or "": an
// invalid file on the base holds everything (no approval reaches the
// merger, no change request reaches the agent: the repository fails
// closed on that base while watching and the status line go on), and a PR
// that changes the file is approved only by a person.
func (j judgement) policyHold(v review.Verdict, self string) string {
	switch {
	case j.eff.Invalid != nil:
		return j.eff.Invalid.Error()
	case j.changes && v.Status == events.StatusApproved && !j.eff.HumanApproved(v.Approvers, self):
		return policy.NeedsHuman
	}
	return ""
}
