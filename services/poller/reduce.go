package poller

import (
	"maps"
	"reflect"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/state"
)

// reduce folds another service's event (or the operator's watch command)
// into the poller's record of the PR: how what the feedback service, the
// merger and the escalator did reaches the record that only the poller
// writes. It is pure; at is when the event happened (its CloudEvent time)
// and now the poller's clock. It reports whether the record changed, and
// leaves it alone for the types it does not follow.
//
//   - PRWatchRequested, and PRCreated (the PR prloop opened): the
//     worktree and spec path to hand on in PRFeedbackReceived; watching
//     begins now, unless it had already.
//   - PRFeedbackAddressed: the fix cycle and prloop's own push (its head
//     is anchored at the push); it ends the change request it answers,
//     whose items are then addressed and never asked again.
//   - PRFeedbackSkipped and PREscalationRequested on the head being
//     addressed: nobody works on it any more.
//   - PREscalated of the current epoch: the escalation is done (shown by
//     prloop status and explain).
//   - PRMerged: merged and closed; a dry run changes nothing.
//   - PRBranchUpdated: the head the merger made from the approved head,
//     to which the approval carries over.
//   - PRConflictResolveRequested: the merger handed the head's conflict
//     with its base to the feedback service, which will push a resolution
//     or say it did not: a new head is held back meanwhile, as while a
//     change request is addressed, until PRFeedbackAddressed,
//     PRFeedbackSkipped or PREscalationRequested ends it.
//   - PRMergeFailed, candidate_failed: the merger handed the candidate's
//     failure to the feedback service; the next head is held back as for
//     PRConflictResolveRequested.
//   - PRMergeFailed, approval withdrawn, on the approved head: the merger
//     took the PR out of its queue, so the current status is announced
//     again on the next look (a 👍 given back meanwhile would otherwise
//     never be announced, and the PR never queued again).
func reduce(cur state.PR, d events.Data, at, now time.Time) (state.PR, bool) {
	next := cur
	switch d := d.(type) {
	case *events.WatchRequested:
		watched(&next, d.PR, d.Worktree, d.ContextPath, now)
		next.Stopped = false // a watch request undoes "/prloop stop"
	case *events.Created:
		watched(&next, d.PR, d.Worktree, d.ContextPath, now)
	case *events.FeedbackAddressed:
		pushedAt := d.PushedAt
		if pushedAt.IsZero() {
			pushedAt = at
		}
		next.FixCycle = max(cur.FixCycle, d.FixCycle)
		next.PushedHeadSHA, next.PushedAt, next.LastPushAt = d.HeadSHA, pushedAt, pushedAt
		if cur.ConflictHeadSHA != "" && cur.ConflictHeadSHA == d.PreviousHeadSHA {
			// A resolved conflict, not a change request: no feedback was
			// asked, so none is addressed.
			next.ConflictHeadSHA, next.ConflictFixHeadSHA = "", d.HeadSHA
			if cur.FeedbackHeadSHA == d.PreviousHeadSHA {
				next.FeedbackHeadSHA = ""
			}
		} else if cur.FeedbackHeadSHA == d.PreviousHeadSHA {
			next.FeedbackHeadSHA = ""
			addressed := append(append([]string(nil), cur.AddressedItems...), cur.AskedItems...)
			next.AddressedItems = addressed[max(0, len(addressed)-state.MaxAddressedItems):]
			next.AskedItems = nil
		}
	case *events.FeedbackSkipped:
		if cur.FeedbackHeadSHA != "" && cur.FeedbackHeadSHA == d.HeadSHA {
			next.FeedbackHeadSHA = "" // nobody works on it: publish what comes next
		}
		if cur.ConflictHeadSHA == d.HeadSHA {
			next.ConflictHeadSHA = ""
		}
	case *events.EscalationRequested:
		if cur.FeedbackHeadSHA != "" && cur.FeedbackHeadSHA == d.HeadSHA {
			next.FeedbackHeadSHA = "" // the change request is a human's now
		}
		if cur.ConflictHeadSHA == d.HeadSHA {
			next.ConflictHeadSHA = ""
		}
	case *events.ConflictResolveRequested:
		if cur.Closed || d.HeadSHA == "" {
			return cur, false
		}
		// Held like a change request: the resolution's head must not be
		// announced before the feedback service says it is the resolution.
		next.FeedbackHeadSHA, next.ConflictHeadSHA = d.HeadSHA, d.HeadSHA
	case *events.MergeFailed:
		if d.Reason == events.ReasonCandidateFailed {
			if cur.Closed || d.HeadSHA == "" || d.DryRun {
				return cur, false
			}
			// The merger handed the candidate's failure to the feedback
			// service: held like a conflict resolution, which it is a kind
			// of (the base brought in by prloop, no feedback asked).
			next.FeedbackHeadSHA, next.ConflictHeadSHA = d.HeadSHA, d.HeadSHA
			break
		}
		if d.Reason != events.ReasonApprovalWithdrawn || cur.Status != events.StatusApproved ||
			(cur.HeadSHA != d.HeadSHA && cur.MergeUpdatedHeadSHA != d.HeadSHA) {
			return cur, false
		}
		next.Status = ""
	case *events.Escalated:
		if d.Epoch != cur.Epoch || cur.Closed {
			return cur, false // of an epoch a human already resolved
		}
		if _, ok := cur.Escalations[d.Reason]; ok {
			return cur, false
		}
		next.Escalations = maps.Clone(cur.Escalations)
		if next.Escalations == nil {
			next.Escalations = map[events.Reason]time.Time{}
		}
		next.Escalations[d.Reason] = at.UTC()
	case *events.Merged:
		if d.DryRun {
			return cur, false // PRLOOP_DRY_RUN: nothing was merged
		}
		next.Merged, next.Closed = true, true
		if next.ClosedAt.IsZero() {
			next.ClosedAt = now
		}
	case *events.BranchUpdated:
		next.MergeUpdatedHeadSHA = d.HeadSHA
	default:
		return cur, false
	}
	return next, !reflect.DeepEqual(cur, next)
}

// watched folds a request to watch (PRWatchRequested, PRCreated) into the
// record: the worktree and spec path, the PR's URL, and since when.
func watched(next *state.PR, pr ghref.PR, worktree, contextPath string, now time.Time) {
	if worktree != "" {
		next.Worktree = worktree
	}
	if contextPath != "" {
		next.ContextPath = contextPath
	}
	if next.PR.URL == "" {
		next.PR.URL = pr.URL
	}
	if next.WatchedSince.IsZero() {
		next.WatchedSince = now
	}
}
