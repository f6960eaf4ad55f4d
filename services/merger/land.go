package merger

import (
	"fmt"
	"strings"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// The merge rule, once.
//
// Whatever path leads to a merge (the serial queue's Step, the
// speculative queue's land, a PR back after its conflict was resolved,
// which goes through one of those again), the core consults mayLand
// before it emits a merge command, and the executor (Service.merge)
// consults it again right before the merge call; its verdict alone lets
// the call go. The other decisions (Decide, chooseMerge) only choose what
// to do next (update, wait, build candidates, merge), never whether this
// merge may happen.

// landRefusal says why mayLand refused a merge; landAllowed is its yes.
type landRefusal int

// mayLand's answers.
const (
	// landAllowed: the merge may be made.
	landAllowed landRefusal = iota
	// refusedApproval: the approval does not stand on GitHub now
	// (CheckApproval's verdict: withdrawn, a change request, a retarget).
	refusedApproval
	// refusedHead: the PR's head is not the head the approval applies to.
	refusedHead
	// refusedBase: the PR targets another base than the one the approval
	// was given for.
	refusedBase
	// refusedTip: the tested commit was not built on the base tip that is
	// the tip now (serial: the head lacks the tip; speculative: the base
	// moved since the candidate, or the previous merge, left it).
	refusedTip
	// refusedUntested: the tested commit does not carry the head that
	// would be merged, so main would get a tree nobody tested.
	refusedUntested
	// refusedChecks: CI has not passed the tested commit: a check failed,
	// is pending, or an expected one has not reported.
	refusedChecks
)

// String names the answer for logs.
func (r landRefusal) String() string {
	switch r {
	case landAllowed:
		return "allowed"
	case refusedApproval:
		return "approval"
	case refusedHead:
		return "head"
	case refusedBase:
		return "base"
	case refusedTip:
		return "tip"
	case refusedUntested:
		return "untested"
	case refusedChecks:
		return "checks"
	}
	return fmt.Sprintf("landRefusal(%d)", int(r))
}

// landing is one merge about to be made: everything mayLand judges,
// read by the caller right before the merge call.
type landing struct {
	// Head is the PR's head now, the SHA the merge call names; Approved
	// is the head the approval applies to (the approved head, or prloop's
	// own update of it: the entry's Head).
	Head, Approved string
	// Base is the PR's base branch now; ApprovedBase the base the
	// approval is for (the one the entry was queued for).
	Base, ApprovedBase string
	// Approval is the verdict CheckApproval gave on GitHub's review
	// signals in this pass (the current policy, each reviewer's latest
	// signal).
	Approval ApprovalCheck

	// Tested is the commit whose tree main gets from this merge, the one
	// CI must have passed: serial, the head itself; speculative, the
	// PR's candidate (the base plus the PRs up to this one). TestedHead
	// is the PR head that commit carries: serial, Tested itself;
	// speculative, the head the candidate was built from.
	Tested, TestedHead string
	// Candidate says Tested is a candidate prloop built and pushed: CI
	// must have reported on it, since a CI that ignores prloop's
	// candidate branches reports nothing, and nothing is no pass.
	Candidate bool
	// BuiltOn is the base tip Tested was built on (serial: the newest
	// base commit the head contains, their merge base; speculative: the
	// tip the batch was built on, or the previous merge of the batch
	// left), Tip the base tip read right before the merge.
	BuiltOn, Tip string

	// RequireChecks is PRLOOP_REQUIRE_CHECKS: off, CI is not asked.
	RequireChecks bool
	// Required names the checks the base's rules and
	// PRLOOP_REQUIRED_CHECKS require; Seen those that reported on any
	// head of the PRs, or candidate of the queue, the tree carries. Each
	// must have reported on Tested, and passed.
	Required, Seen []string
	// Reports is what reported on Tested (its statuses and check runs,
	// prloop's own context); its Required and Seen are not read.
	Reports ChecksInput
}

// landVerdict is mayLand's answer.
type landVerdict struct {
	Refusal landRefusal
	// Why says, for a refusal, what stands in the way, for logs and
	// escalations.
	Why string
	// Reason is the PRMergeFailed reason of a PR that leaves the queue for
	// it: an approval that no longer stands (CheckApproval's reason, or
	// stale_approval for another base).
	Reason events.Reason
}

// ok reports whether the merge may be made.
func (v landVerdict) ok() bool { return v.Refusal == landAllowed }

// mayLand says whether the merge described by l may be made: whether the
// exact tree main gets is one CI passed, approved on exactly this head and
// this base by the current policy, built on the base tip that is still
// the tip. Every merge path calls it right before the merge call, and
// nothing else decides at that point. It is pure.
func mayLand(l landing) landVerdict {
	refuse := func(r landRefusal, format string, args ...any) landVerdict {
		return landVerdict{Refusal: r, Why: fmt.Sprintf(format, args...)}
	}
	switch {
	case l.Head == "" || l.Head != l.Approved:
		return refuse(refusedHead, "the head is %s, and the approval applies to %s", short(l.Head), short(l.Approved))
	case l.Base == "" || l.Base != l.ApprovedBase:
		v := refuse(refusedBase, "the PR targets %q, and the approval was given for %q: a new base needs a new approval", l.Base, l.ApprovedBase)
		v.Reason = events.ReasonStaleApproval
		return v
	case !l.Approval.Approved:
		v := refuse(refusedApproval, "approval withdrawn: %s", l.Approval.Why)
		v.Reason = l.Approval.Reason
		if v.Reason == "" {
			v.Reason = events.ReasonApprovalWithdrawn
		}
		return v
	case l.Tip == "" || l.BuiltOn != l.Tip:
		return refuse(refusedTip, "%s was built on %s of %s, whose tip is now %s", short(l.Tested), short(l.BuiltOn), l.Base, short(l.Tip))
	case l.Tested == "" || l.TestedHead != l.Head:
		return refuse(refusedUntested, "the tested commit %s carries the head %s, not %s", short(l.Tested), short(l.TestedHead), short(l.Head))
	case !l.RequireChecks:
		return landVerdict{}
	}
	in := l.Reports
	in.Required, in.Seen = l.Required, l.Seen
	c := EvaluateChecks(in)
	if l.Candidate {
		c = candidateChecks(in)
	}
	if c.State != ChecksGreen {
		return refuse(refusedChecks, "CI has not passed %s: %s", short(l.Tested), c.Summary())
	}
	return landVerdict{}
}

// short is a SHA for people, or "(none)".
func short(sha string) string {
	if strings.TrimSpace(sha) == "" {
		return "(none)"
	}
	return ghref.ShortSHA(sha)
}
