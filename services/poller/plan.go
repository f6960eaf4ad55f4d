package poller

import (
	"time"

	"github.com/prloop/prloop/pkg/state"
)

// listing is what the poller read of a PR before evaluating it: the open
// pulls list's entry (or a fresh read of the PR), the open issues list's
// summary, and what the last evaluation from a list read.
type listing struct {
	pull pullInfo
	// issue is the PR's summary in the open issues list; nil when the PR
	// was read on its own (a kick, a webhook, a recheck), which is fresh.
	issue *issueInfo
	// last is what the last evaluation from a list read of the PR, if any.
	last *seenSignals
}

// evaluationKind is what an evaluation of a PR does, as planEvaluation
// decides it.
type evaluationKind int

// The kinds of evaluation.
const (
	// evalSkip: nothing to evaluate (a merged PR, or a new head held back).
	evalSkip evaluationKind = iota
	// evalFetchFresh: the list may be older than what prloop knows; read
	// the PR itself and evaluate that.
	evalFetchFresh
	// evalNoSignals: the PR is untouched since it was opened, so no review
	// signal can exist; read none, anchor at its creation.
	evalNoSignals
	// evalReactionsOnly: only the reactions moved since the last
	// evaluation's lists; re-read the reactions and keep the rest.
	evalReactionsOnly
	// evalGather: read the PR's review signals, counting those after Anchor.
	evalGather
)

// evaluationPlan is what planEvaluation decided.
type evaluationPlan struct {
	Kind evaluationKind
	// Anchor is when the head became the head as far as prloop knows:
	// review signals older than it do not count on it.
	Anchor time.Time
	// Why says why an evaluation is skipped, for the log ("" when there
	// is nothing to say).
	Why string
}

// planEvaluation decides how to evaluate a PR from its record and what was
// listed of it, reading nothing: the policy of evaluate, which only carries
// it out. now is when the lists were read.
//
//   - A merged PR never opens again: a list read before the merge must not
//     bring it back and publish its status a second time.
//   - A PR seen open in a list after it was seen closed is a reopen, or a
//     list older than the close: only a fresh read tells.
//   - A new head is held back while the change request on the current one
//     is being addressed (holdsNewHead).
//   - A list that still shows the head prloop's own push replaced is older
//     than the push (supersededByOwnPush): only a fresh read tells.
//   - The anchor of a new head is never the commit's own dates (see
//     anchorOf).
func planEvaluation(cur state.PR, l listing, now time.Time) evaluationPlan {
	head, listed := l.pull.head, l.issue != nil
	switch {
	case cur.Merged:
		return evaluationPlan{Kind: evalSkip}
	case cur.Stopped:
		return evaluationPlan{Kind: evalSkip, Why: `not watched after "/prloop stop" until a watch request`}
	case cur.Closed && listed:
		return evaluationPlan{Kind: evalFetchFresh}
	case holdsNewHead(cur, head):
		return evaluationPlan{Kind: evalSkip, Why: "new head held back until the change request on the old one ends"}
	case listed && supersededByOwnPush(cur, head):
		return evaluationPlan{Kind: evalFetchFresh}
	case cur.HeadSHA == "" && untouched(l.pull, l.issue):
		// Nothing has happened since the PR was opened: no signal can
		// exist, and any later one is newer than its creation. Anchoring
		// there spares five requests per PR when watching begins on a
		// large repo.
		return evaluationPlan{Kind: evalNoSignals, Anchor: l.pull.created}
	case onlyReactionsMoved(cur, l):
		return evaluationPlan{Kind: evalReactionsOnly, Anchor: cur.HeadAnchor}
	}
	return evaluationPlan{Kind: evalGather, Anchor: anchorOf(cur, head, now)}
}

// onlyReactionsMoved reports whether the last evaluation's lists still
// hold for the PR but for its reactions (GitHub moves updated_at for
// everything else). That holds only for lists read ListSettle after the
// last activity: updated_at has whole seconds, and a comment in the same
// second as the one before it moves nothing.
func onlyReactionsMoved(cur state.PR, l listing) bool {
	if l.last == nil || l.issue == nil {
		return false
	}
	head := l.pull.head
	return l.last.head == head && head == cur.HeadSHA && l.last.updated == activityKey(l.pull, l.issue) &&
		l.last.listedAt.After(latest(l.pull.updated, l.issue.updated).Add(ListSettle))
}

// anchorOf is when head became the PR's head as far as prloop knows: the
// record's anchor for the head it knows, the time of prloop's own push
// for the head it pushed, and otherwise now, when prloop first saw it.
// Never the commit's own dates: its author sets them, and a backdated
// commit would let an old 👍 approve it. (An untouched PR proves more:
// its head came with it, see planEvaluation.)
func anchorOf(cur state.PR, head string, now time.Time) time.Time {
	switch {
	case head == cur.HeadSHA:
		return cur.HeadAnchor
	case head == cur.PushedHeadSHA && !cur.PushedAt.IsZero():
		return cur.PushedAt
	}
	return now
}

// supersededByOwnPush reports whether head is the head prloop's own push of
// a fix replaced: the feedback service reported the push (PushedHeadSHA)
// after GitHub showed it, so a read that still shows the old head is older
// than the push.
func supersededByOwnPush(cur state.PR, head string) bool {
	return cur.PushedHeadSHA != "" && cur.PushedHeadSHA != cur.HeadSHA && head == cur.HeadSHA
}

// decideEvaluation is decide on the record as the compare-and-set reads
// it, with the /prloop commands seen (planCommands): a PR merged or
// stopped meanwhile, or closed while a list showed it open, is left alone
// (see planEvaluation), and a reopened PR resumes as if watching began
// now. It returns the command plan of the decision to store (empty when
// held).
func decideEvaluation(cur state.PR, obs Observation, listed bool, tm Timing, cmds []commandSeen, facts commandFacts) (Decision, commandPlan) {
	if cur.Merged || cur.Stopped || (cur.Closed && listed) {
		return Decision{Next: cur, Hold: true}, commandPlan{}
	}
	if cur.Closed {
		cur.Closed, cur.ClosedAt, cur.Merged = false, time.Time{}, false
		cur.Status, cur.ReviewTimeoutSent, cur.WatchedSince = "", false, obs.Now
	}
	cp := planCommands(cur, cmds, facts)
	o := obs
	switch {
	case cp.Fix != nil:
		o.Verdict, o.FixCommand = withFix(o.Verdict, cp.Fix, cp.Fixer), cp.FixComment
	case cur.FixCommandHead == obs.HeadSHA && cur.FeedbackHeadSHA == obs.HeadSHA:
		// The change request "/prloop fix" made stands until its fix ends.
		o.Verdict = withFix(o.Verdict, o.Verdict.Feedback, o.Verdict.Actor)
	}
	dec := decide(cp.Next, o, tm)
	if dec.Hold {
		return dec, commandPlan{}
	}
	dec.Emits = append(cp.Emits, dec.Emits...)
	return dec, cp
}
