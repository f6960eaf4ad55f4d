package merger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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
}

// ApprovalCheck is CheckApproval's answer.
type ApprovalCheck struct {
	Approved  bool
	Approvers []string
	// Why explains a refusal, for PRMergeFailed's detail.
	Why string
}

// unknownAnchor is an anchor no signal is newer than.
var unknownAnchor = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// CheckApproval recomputes the review verdict the way the poller does, and
// says whether it allows merging in.Head: ApprovedHead must be approved
// now, and when Head is a head prloop made from it, no reviewer may have
// asked for changes on Head (the poller's rule for a carried approval). It
// is pure.
func CheckApproval(sig review.Signals, in ApprovalInput, pol review.Policy, authorized review.Authorizer) ApprovalCheck {
	anchor := in.Anchor
	if anchor.IsZero() {
		anchor = unknownAnchor
	}
	v := review.Evaluate(sig, review.Head{SHA: in.ApprovedHead, Anchor: anchor, Author: in.Author}, pol, authorized)
	if v.Status != events.StatusApproved {
		why := fmt.Sprintf("GitHub shows no approval of %s by an authorized reviewer (review status %s)", ghref.ShortSHA(in.ApprovedHead), v.Status)
		if in.Anchor.IsZero() {
			why += "; reactions and comments cannot count: the approval did not say when the head was first seen"
		}
		return ApprovalCheck{Why: why}
	}
	if in.Head != "" && in.Head != in.ApprovedHead {
		cur := review.Evaluate(sig, review.Head{SHA: in.Head, Anchor: anchor, Author: in.Author}, pol, authorized)
		if cur.Status == events.StatusChangesRequested {
			return ApprovalCheck{Why: fmt.Sprintf("%s asked for changes on %s, which prloop made from the approved %s", cur.Actor, ghref.ShortSHA(in.Head), ghref.ShortSHA(in.ApprovedHead))}
		}
	}
	return ApprovalCheck{Approved: true, Approvers: v.Approvers}
}

// verify reads the review signals of pr from GitHub and checks that they
// approve merging head, a head approved on approvedHead or made by prloop
// from it; author is the PR's author and anchor the approved head's
// (zero: unknown, and then no reaction or comment counts).
func (s *Service) verify(ctx context.Context, pr ghref.PR, author, approvedHead, head string, anchor time.Time, log *slog.Logger) (ApprovalCheck, error) {
	since := anchor
	if since.IsZero() {
		since = s.d.Now() // no comment can count: read none
	}
	sig, err := review.Gather(ctx, s.d.GitHub, pr, since)
	if err != nil {
		return ApprovalCheck{}, err
	}
	perms := s.auth.For(ctx, pr.RepoRef(), log)
	in := ApprovalInput{ApprovedHead: approvedHead, Head: head, Anchor: anchor, Author: author}
	check := CheckApproval(sig, in, s.policy, perms.Authorized)
	if err := perms.Err(); err != nil {
		// An approver whose permission is unknown is neither counted nor
		// refused: the check is made again later.
		return ApprovalCheck{}, fmt.Errorf("verify the approval of %s: %w", pr, err)
	}
	return check, nil
}
