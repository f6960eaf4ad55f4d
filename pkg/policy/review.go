package policy

import (
	"context"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/review"
)

// ReviewPolicy is base (the operator's review policy) with the protocols,
// quorum and approval_survives_push of e.
func (e Effective) ReviewPolicy(base review.Policy) review.Policy {
	out := base
	out.Protocols = nil
	for _, p := range e.Protocols.V {
		if p == "native" {
			p = string(review.ProtocolReviews)
		}
		out.Protocols = append(out.Protocols, review.Protocol(p))
	}
	out.Quorum = review.ParseReviewers(strings.Join(e.Quorum.V, ","))
	out.ApprovalSurvivesPush = e.ApprovalSurvivesPush.V
	return out
}

// HumanApproved reports whether one of approvers is a person: not a bot
// ("[bot]" logins), not one of the quorum's reviewers, not prloop itself.
// A PR that changes the policy file needs one (ChangesPolicy).
func (e Effective) HumanApproved(approvers []string, self string) bool {
	for _, a := range approvers {
		if strings.HasSuffix(strings.ToLower(a), "[bot]") || strings.EqualFold(a, self) {
			continue
		}
		isQuorum := false
		for _, q := range review.ParseReviewers(strings.Join(e.Quorum.V, ",")) {
			isQuorum = isQuorum || strings.EqualFold(q.Login, a)
		}
		if !isQuorum {
			return true
		}
	}
	return false
}

// NeedsHuman is the hold of a PR that changes the policy file and has no
// human approval.
const NeedsHuman = "waiting for a human approval: this PR changes " + Path

// Comparer compares a head with its base: the GitHub client's Compare,
// whose base commit is the base branch's tip and whose merge base is
// where the head left it.
type Comparer interface {
	Compare(ctx context.Context, repo ghref.Repo, base, head string) (github.Comparison, error)
}

// ChangesPolicy reports whether head changes the policy file against
// mergeBase, where it left its base: the file differs between the two
// (added, changed or removed). Only blob SHAs are compared: the head's
// file is never used as a policy.
func (l *Loader) ChangesPolicy(ctx context.Context, repo ghref.Repo, mergeBase, head string) (bool, error) {
	a, err := l.blob(ctx, repo, mergeBase)
	if err != nil {
		return false, err
	}
	b, err := l.blob(ctx, repo, head)
	if err != nil {
		return false, err
	}
	return a != b, nil
}

// blob is the policy file's blob SHA at commit sha ("" without a file).
func (l *Loader) blob(ctx context.Context, repo ghref.Repo, sha string) (string, error) {
	c, err := l.load(ctx, repo, sha)
	return c.blob, err
}
