package merger

import (
	"context"
	"log/slog"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
)

// The merger asks the base's .github/prloop.yml (pkg/policy, the one
// owner of policy facts) three things, here and nowhere else: how to
// merge a PR (method, required checks, delete branch), whose approval
// counts when it re-verifies one, and whether the policy holds the merge
// back (an invalid file on the base; a PR that changes the file without a
// person's approval).

// policies is the merger's reader of repository policies.
type policies struct {
	*policy.Reader
}

func newPolicies(cfg Config, g GitHub, auth *review.Authorization) *policies {
	op := policy.FromReview(cfg.PolicyConfig)
	op.MergeMethod, op.RequiredChecks, op.DeleteBranch = cfg.MergeMethod, cfg.requiredChecks(), cfg.DeleteBranch
	op.QueueMode, op.QueueDepth, op.PriorityLabel = cfg.QueueMode, cfg.QueueDepth, cfg.priorityLabel()
	return &policies{Reader: policy.NewReader(op, cfg.Settings, g, auth)}
}

// readReviewPolicy reads the review policy and reviewer check the approval of pr
// on base is verified with: the poller's, from the same file.
func (s *Service) readReviewPolicy(ctx context.Context, pr ghref.PR, base string, log *slog.Logger) (review.Policy, *review.Permissions, error) {
	e, _, err := s.pol.At(ctx, pr.RepoRef(), base, "")
	if err != nil {
		return review.Policy{}, nil, err
	}
	pol, perms := e.Review(ctx, s.policy, s.auth, pr.RepoRef(), log)
	return pol, perms, nil
}

// mergeSettings is how a PR is merged under its base's policy.
type mergeSettings struct {
	Method         string
	RequiredChecks []string
	DeleteBranch   bool
	// Hold, when set, says why the policy lets the PR not merge now.
	Hold string
}

// readMergeSettings reads how pr, whose head is head and whose approval names
// approvers, is merged into base, whose tip is tip (the tip the merge is
// made on), and whether the base's policy holds it back.
func (s *Service) readMergeSettings(ctx context.Context, pr ghref.PR, base, tip, head string, approvers []string) (mergeSettings, error) {
	e, err := s.pol.AtTip(ctx, pr.RepoRef(), base, tip)
	if err != nil {
		return mergeSettings{}, err
	}
	ms := mergeSettings{Method: e.MergeMethod.V, RequiredChecks: e.RequiredChecks.V, DeleteBranch: e.DeleteBranch.V}
	if e.Invalid != nil {
		ms.Hold = e.Invalid.Error()
		return ms, nil
	}
	var changes bool
	if s.pol.Reads() {
		c, err := s.d.GitHub.Compare(ctx, pr.RepoRef(), tip, head)
		if err != nil {
			return mergeSettings{}, err
		}
		if changes, err = s.pol.ChangesPolicy(ctx, pr.RepoRef(), c.MergeBaseSHA, head); err != nil {
			return mergeSettings{}, err
		}
	}
	if changes && !e.HumanApproved(approvers, s.d.Self) {
		ms.Hold = policy.NeedsHuman
	}
	return ms, nil
}

// readPolicyChecks reads the checks the base's policy requires (the operator's
// PRLOOP_REQUIRED_CHECKS without a file).
func (s *Service) readPolicyChecks(ctx context.Context, repo ghref.Repo, base string) ([]string, error) {
	e, _, err := s.pol.At(ctx, repo, base, "")
	if err != nil {
		return nil, err
	}
	return e.RequiredChecks.V, nil
}
