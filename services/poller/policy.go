package poller

import (
	"context"
	"log/slog"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
)

// newPolicies is the poller's reader of each base's .github/prloop.yml
// (pkg/policy, the one owner of policy facts).
func newPolicies(cfg Config, g GitHub, auth *review.Authorization) *policy.Reader {
	op := policy.FromReview(cfg.PolicyConfig)
	op.ReviewTimeout, op.MaxFixCycles, op.EscalationLabel = cfg.ReviewTimeout, cfg.MaxFixCycles, cfg.EscalationLabel
	op.QueueMode, op.QueueDepth, op.FixChecks = cfg.QueueMode, cfg.QueueDepth, cfg.FixChecksMode()
	op.PriorityLabel = cfg.PriorityLabel
	return policy.NewReader(op, cfg.Settings, g, auth)
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
	eff, at, err := s.pol.At(ctx, pr.RepoRef(), base, head)
	if err != nil {
		return judgement{}, err
	}
	j := judgement{eff: eff, timing: s.timing}
	j.review, j.perms = eff.Review(ctx, s.policy, s.auth, pr.RepoRef(), log)
	if eff.Invalid != nil {
		return j, nil // policyHold says it; nothing else of the file is used
	}
	if j.changes, err = s.pol.ChangesPolicy(ctx, pr.RepoRef(), at.MergeBase, head); err != nil {
		return judgement{}, err
	}
	j.timing.ReviewTimeout, j.timing.EscalationLabel = eff.ReviewTimeout.V, eff.EscalationLabel.V
	s.timings.Store(pr.RepoRef().Key()+"\x00"+base, j.timing)
	return j, nil
}

// timingOf is the timing the base's policy set at its last evaluation, or
// the operator's before one.
func (s *Service) timingOf(repo ghref.Repo, base string) Timing {
	if tm, ok := s.timings.Load(repo.Key() + "\x00" + base); ok {
		return tm.(Timing)
	}
	return s.timing
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

// maxFixCycles is the PR's fix limit when the base's file sets it (or a
// ceiling cut what it set), for the status line; nil leaves the
// operator's PRLOOP_MAX_FIX_CYCLES, which the line knows already.
func (j judgement) maxFixCycles() *int {
	if j.eff.MaxFixCycles.From == policy.FromOperator {
		return nil
	}
	return &j.eff.MaxFixCycles.V
}

// recheck has a PR held by an invalid file evaluated again every poll
// interval: fixing the file moves the base, not the PR, and the PR
// recovers without anyone touching it.
func (j judgement) recheck(obs *Observation, every time.Duration) {
	if j.eff.Invalid == nil {
		return
	}
	if at := obs.Now.Add(every); obs.RecheckAt.IsZero() || obs.RecheckAt.After(at) {
		obs.RecheckAt = at
	}
}
