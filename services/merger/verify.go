package merger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
)

// ApprovalInput is what CheckApproval judges the signals against.
type ApprovalInput struct {
	// ApprovedHead is the head a reviewer must have approved; Head the head
	// that would be merged: ApprovedHead, or a head prloop verifiably made
	// from it by bringing it up to date with its base.
	ApprovedHead, Head string
	// Anchor is when ApprovedHead became the head, as the poller's
	// PRReviewApproved says; zero when unknown, and then no reaction or comment can count,
	// since nothing proves it came after the head. Native reviews are
	// judged by their commit_id and need no anchor.
	Anchor time.Time
	// Author is the PR's author, whose signals never count.
	Author string
	// ApprovedBase is the base the approval is for, and Base the PR's base
	// now: an approval is for a head on a base, and a PR retargeted since
	// needs a new one. Either empty: not compared (unknown).
	ApprovedBase, Base string
	// BaseSince is when the poller saw the PR retargeted to ApprovedBase
	// (zero: never): approvals older than it do not count.
	BaseSince time.Time
}

// ApprovalCheck is CheckApproval's answer.
type ApprovalCheck struct {
	Approved  bool
	Approvers []string
	// Why explains a refusal, for PRMergeFailed's detail, and Reason is
	// its code: approval_withdrawn, or stale_approval for an approval of
	// another base.
	Why    string
	Reason events.Reason
}

// unknownAnchor is an anchor no signal is newer than.
var unknownAnchor = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// CheckApproval recomputes the review verdict the way the poller does, and
// says whether it allows merging in.Head into in.Base: the PR must still
// target the base the approval is for, ApprovedHead must be approved now
// (each reviewer's latest signal, with any current change request
// blocking: review.Evaluate), and when Head is a head prloop made from it,
// no reviewer may have asked for changes on Head (the poller's rule for a
// carried approval). It is pure.
func CheckApproval(sig review.Signals, in ApprovalInput, pol review.Policy, authorized review.Authorizer) ApprovalCheck {
	if in.ApprovedBase != "" && in.Base != "" && in.Base != in.ApprovedBase {
		return ApprovalCheck{Reason: events.ReasonStaleApproval,
			Why: fmt.Sprintf("given for base %s, and the PR now targets %s: a new base needs a new approval", in.ApprovedBase, in.Base)}
	}
	anchor := in.Anchor
	if anchor.IsZero() {
		anchor = unknownAnchor
	}
	v := review.Evaluate(sig, review.Head{SHA: in.ApprovedHead, Anchor: anchor, BaseSince: in.BaseSince, Author: in.Author}, pol, authorized)
	if v.Status != events.StatusApproved {
		why := fmt.Sprintf("GitHub shows no approval of %s by an authorized reviewer (review status %s)", ghref.ShortSHA(in.ApprovedHead), v.Status)
		if in.Anchor.IsZero() {
			why += "; reactions and comments cannot count: the approval did not say when the head was first seen"
		}
		return ApprovalCheck{Why: why, Reason: events.ReasonApprovalWithdrawn}
	}
	if in.Head != "" && in.Head != in.ApprovedHead {
		cur := review.Evaluate(sig, review.Head{SHA: in.Head, Anchor: anchor, BaseSince: in.BaseSince, Author: in.Author}, pol, authorized)
		if cur.Status == events.StatusChangesRequested {
			return ApprovalCheck{Reason: events.ReasonApprovalWithdrawn,
				Why: fmt.Sprintf("%s asked for changes on %s, which prloop made from the approved %s", cur.Actor, ghref.ShortSHA(in.Head), ghref.ShortSHA(in.ApprovedHead))}
		}
	}
	return ApprovalCheck{Approved: true, Approvers: v.Approvers}
}

// approvalOf is what the entry's approval must show on GitHub for the PR
// as p shows it now: its head approved, for the base it was queued for.
func (e Entry) approvalOf(p *gh.PullRequest) ApprovalInput {
	return ApprovalInput{
		ApprovedHead: e.ApprovedHead, Head: e.Head, Anchor: e.Anchor, Author: p.GetUser().GetLogin(),
		ApprovedBase: e.Base, Base: p.GetBase().GetRef(), BaseSince: e.BaseSince,
	}
}

// verify reads the review signals of pr from GitHub and checks that they
// approve what in says (CheckApproval); an unknown anchor means no
// reaction or comment counts.
func (s *Service) verify(ctx context.Context, pr ghref.PR, in ApprovalInput, log *slog.Logger) (ApprovalCheck, error) {
	since := in.Anchor
	if since.IsZero() {
		since = s.d.Now() // no comment can count: read none
	}
	sig, err := review.Gather(ctx, s.d.GitHub, pr, since)
	if err != nil {
		return ApprovalCheck{}, err
	}
	base := in.ApprovedBase
	if base == "" {
		base = in.Base
	}
	pol, perms, err := s.readReviewPolicy(ctx, pr, base, log)
	if err != nil {
		return ApprovalCheck{}, err
	}
	check := CheckApproval(sig, in, pol, perms.Authorized)
	if err := perms.Err(); err != nil {
		// An approver whose permission is unknown is neither counted nor
		// refused: the check is made again later.
		return ApprovalCheck{}, fmt.Errorf("verify the approval of %s: %w", pr, err)
	}
	return check, nil
}
