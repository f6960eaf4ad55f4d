package poller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// Observation is what one evaluation of a PR saw.
type Observation struct {
	HeadSHA string
	// Anchor is when HeadSHA became the head (used only when it is new).
	Anchor time.Time
	// Base is the PR's base branch ("" when the read did not show it), and
	// BaseSince when it became the base (used only when it is new; see
	// baseSince).
	Base      string
	BaseSince time.Time
	Author    string
	URL       string
	// Title is the PR's title, cleaned (events.CleanTitle); the status
	// events carry it for pages and people, never for decisions.
	Title   string
	Verdict review.Verdict
	// Fingerprint is the probe's summary of the PR, and RecheckAt when it
	// can be trusted to show the next activity (zero: already).
	Fingerprint string
	RecheckAt   time.Time
	// Labels are the PR's labels, and Updated GitHub's updated_at of the
	// read that showed them.
	Labels  []string
	Updated time.Time
	Now     time.Time
	// Checks are the head's checks as judged (checks.go); nil when not
	// read.
	Checks *CheckFacts
	// Hold is why the repository's policy holds the verdict back (see
	// policyHold): the status is published as pending with it as detail.
	Hold string
	// PolicyWarning says what of the policy file the operator's ceilings
	// cut; the review statuses carry it to the status line.
	PolicyWarning string
	// MaxFixCycles is the PR's fix limit when the base's policy file sets
	// it (nil: the operator's); the review statuses carry it to the
	// status line.
	MaxFixCycles *int
	// FixCommand is the "/prloop fix" comment that makes the verdict's
	// change request (commands.go), 0 for the reviewers' own.
	FixCommand int64
}

// Timing holds the policy knobs decide needs.
type Timing struct {
	ReviewTimeout time.Duration
	// EscalationLabel marks an escalated PR; its removal resumes the loop.
	EscalationLabel string
	// ApprovalSurvivesConflictFix carries an approval over to the head the
	// agent's conflict resolution made (PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX).
	ApprovalSurvivesConflictFix bool
}

// Emit is an event to publish with the id parts that make it unique.
type Emit struct {
	Data  events.Data
	Parts []string
}

// Decision is what to publish and the state to store afterwards.
type Decision struct {
	Emits []Emit
	Next  state.PR
	// Hold says the observation must not be acted on yet: nothing is
	// published or stored, so the next evaluation looks again.
	Hold bool
}

// holdsNewHead reports whether an observed head must wait: while the change
// request on the current head is being addressed (from PRFeedbackReceived
// until PRFeedbackAddressed, PRFeedbackSkipped or an escalation ends it), a
// new head is either the fix itself or a push that raced it, and only the
// feedback service can say which. Publishing anything about it before the
// feedback service has spoken would let subscribers read "waiting for review
// on X" before "X is the fix": a PR's events must read in causal order.
func holdsNewHead(cur state.PR, head string) bool {
	return cur.FeedbackHeadSHA != "" && cur.FeedbackHeadSHA == cur.HeadSHA && head != "" && head != cur.HeadSHA
}

// decide is the poller's state machine: from the stored state and a fresh
// observation, it derives the events to publish and the next state. It is
// pure, so every rule is table-tested.
//
//   - A new head resets the published status: the first evaluation of every
//     head publishes its status, so the merger hears PRReviewApproved for the
//     exact head that was approved.
//   - Each change of status publishes exactly one event, whose id carries the
//     head and the transition number: a retry after a crash republishes the
//     same id, which JetStream drops.
//   - While the change request on a head is being addressed (from
//     PRFeedbackReceived until PRFeedbackAddressed or an escalation), no
//     second PRFeedbackReceived is published for that head.
//   - A new head seen while the change request on the current head is
//     being addressed is held back (holdsNewHead) until the feedback
//     service ends that change request.
//   - A failed review workflow is escalated once per head; ReviewTimeout is
//     published once per watch. Both once per escalation epoch: their ids
//     carry it, and removing the escalation label starts a new one.
func decide(cur state.PR, obs Observation, tm Timing) Decision {
	if holdsNewHead(cur, obs.HeadSHA) {
		return Decision{Next: cur, Hold: true}
	}
	next := cur
	next.Author = obs.Author
	if obs.URL != "" {
		next.PR.URL = obs.URL
	}
	next.Fingerprint, next.RecheckAt = obs.Fingerprint, obs.RecheckAt
	// resolved: the head moved to the agent's resolution of a conflict and
	// the approval carries over to it; the merger took the PR out of its
	// queue, so the approval is published anew for the new head.
	resolved := false
	if obs.HeadSHA != "" && obs.HeadSHA != cur.HeadSHA {
		next.HeadSHA = obs.HeadSHA
		resolved = carriesResolution(cur, obs.HeadSHA, tm)
		if resolved {
			next.MergeUpdatedHeadSHA, next.Status = obs.HeadSHA, ""
		} else if !carriesApproval(cur, obs.HeadSHA) {
			next.HeadAnchor = obs.Anchor
			next.Status = "" // publish the new head's status, whatever it is
		}
	}
	if retargeted(cur, obs.Base) {
		// An approval is for a head on a base: the new base's status is
		// published anew, and no approval from before counts (the
		// verdict was made with BaseSince), nor does one prloop carried
		// over to a head it made against the old base.
		next.BaseSince, next.Status, next.MergeUpdatedHeadSHA = obs.BaseSince, "", ""
		resolved = false
	}
	if obs.Base != "" {
		next.BaseRef = obs.Base
	}
	if next.WatchedSince.IsZero() {
		next.WatchedSince = obs.Now
	}
	resumeAfterEscalation(&next, obs.Labels, obs.Updated, obs.Now, tm)
	v := obs.Verdict
	if v.Quorum != nil {
		next.MissingReviewers = v.Quorum.Missing
	}

	out := resumed(cur, next)
	base := events.Base{PR: next.PR, HeadSHA: next.HeadSHA, Title: obs.Title, PolicyWarning: obs.PolicyWarning, MaxFixCycles: obs.MaxFixCycles}
	status := v.Status
	if obs.Hold != "" {
		status = events.StatusPending // the policy holds the verdict back: policyHold
	}
	holdMoved := status == events.StatusPending && obs.Hold != cur.PolicyHold
	next.PolicyHold = obs.Hold
	if (resolved || next.Status == events.StatusApproved && next.HeadSHA == next.MergeUpdatedHeadSHA) && status != events.StatusChangesRequested {
		// The merger brought the approved head up to date itself: the
		// approval stands until a reviewer asks for changes.
		status = events.StatusApproved
	}
	suppressed := status == events.StatusChangesRequested && next.FeedbackHeadSHA == next.HeadSHA
	// While the quorum is incomplete, each bot's response is news for the
	// status line ("2 of 3 bot reviews: waiting for …"): the same status is
	// published again when the set of missing bots changes.
	quorumMoved := v.Quorum != nil && status == next.Status && (status == events.StatusInProgress || status == events.StatusPending) &&
		!slices.Equal(cur.MissingReviewers, next.MissingReviewers)
	if (status != next.Status || quorumMoved || holdMoved) && !suppressed {
		next.Transitions++
		parts := []string{ghref.EventSHA(next.HeadSHA), strconv.Itoa(next.Transitions)}
		var responded []string
		if v.Quorum != nil {
			responded = v.Quorum.Responded
		}
		switch status {
		case events.StatusApproved:
			out = append(out, Emit{Data: &events.ReviewApproved{
				Base: base, Status: status, Actor: v.Actor, Approvers: v.Approvers, Anchor: next.HeadAnchor, Epoch: next.Epoch, FixCycle: next.FixCycle,
				BaseBranch: next.BaseRef, BaseSince: next.BaseSince,
				IgnoredFindings: ignoredFindings(v.Ignored),
			}, Parts: parts})
		case events.StatusInProgress:
			out = append(out, Emit{Data: &events.ReviewInProgress{
				Base: base, Status: status, Actor: v.Actor,
				QuorumResponded: responded, MissingReviewers: next.MissingReviewers, IgnoredFindings: ignoredFindings(v.Ignored),
			}, Parts: parts})
		case events.StatusChangesRequested:
			out = append(out, Emit{Data: &events.FeedbackReceived{
				Base: base, Status: status, FixCycle: next.FixCycle, Actor: v.Actor,
				CommentIDs: v.CommentIDs(), ReviewIDs: v.ReviewIDs(), Reviewers: authors(v.Feedback),
				Epoch: next.Epoch, Worktree: next.Worktree, ContextPath: next.ContextPath,
				Anchor: next.HeadAnchor, AddressedItems: slices.Clone(next.AddressedItems),
				IgnoredFindings: ignoredFindings(v.Ignored), CommandID: obs.FixCommand,
			}, Parts: parts})
			next.FeedbackHeadSHA = next.HeadSHA
			next.AskedItems = nil
			for _, it := range v.Feedback {
				next.AskedItems = append(next.AskedItems, it.Key())
			}
		default:
			out = append(out, Emit{Data: &events.ReviewPending{Base: base, Status: events.StatusPending, Detail: obs.Hold, MissingReviewers: next.MissingReviewers}, Parts: parts})
			status = events.StatusPending
		}
		next.Status = status
	}

	var fr *events.FeedbackReceived
	for _, e := range out {
		if d, ok := e.Data.(*events.FeedbackReceived); ok {
			fr = d
		}
	}
	out = append(out, checksFailed(&next, obs.Checks, fr)...)

	if v.Quorum != nil && len(v.Quorum.Failed) > 0 && next.WorkflowFailedHead != next.HeadSHA {
		next.WorkflowFailedHead = next.HeadSHA
		out = append(out, Emit{Data: &events.EscalationRequested{
			Base: base, Reason: events.ReasonReviewWorkflowFailed, Severity: events.SeverityBlocking,
			FixCycle: next.FixCycle, Detail: describeFailures(v.Quorum.Failed), HumanReviewRequired: true, Actor: "poller",
			Epoch: next.Epoch,
		}, Parts: []string{ghref.EventSHA(next.HeadSHA), events.EpochPart(next.Epoch)}})
	}
	out = append(out, timeout(&next, obs.Now, tm)...)
	return Decision{Emits: out, Next: next}
}

// retargeted reports whether the PR's base moved from the recorded one to
// base. The first base seen is no move: watching began on it.
func retargeted(cur state.PR, base string) bool {
	return base != "" && cur.BaseRef != "" && base != cur.BaseRef
}

// baseSince is when the PR was put on base, as far as the poller can
// tell: the recorded moment while the base stays, now when it moved.
// Review signals are judged with it before decide stores it.
func baseSince(cur state.PR, base string, now time.Time) time.Time {
	if retargeted(cur, base) {
		return now
	}
	return cur.BaseSince
}

// carriesApproval reports whether a move of the head to sha keeps the
// approval: only when the merger made that head itself by updating the
// approved branch with its base (update-branch or rebase).
func carriesApproval(cur state.PR, sha string) bool {
	return cur.Status == events.StatusApproved && sha != "" && sha == cur.MergeUpdatedHeadSHA
}

// carriesResolution reports whether a move of the head to sha keeps the
// approval because sha is the agent's verified resolution of the approved
// head's conflict with its base, and PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX
// allows that.
func carriesResolution(cur state.PR, sha string, tm Timing) bool {
	return tm.ApprovalSurvivesConflictFix && cur.Status == events.StatusApproved && sha != "" && sha == cur.ConflictFixHeadSHA
}

// resumeAfterEscalation resets a PR whose escalation label a human
// removed: a new escalation epoch begins, the fix cycle starts again at 0
// and the current status is published anew, so a pending change request
// reaches the agent again and the next failure is escalated again. It
// reports whether it changed next.
//
// A removal is a read without the label after a read that showed it (or
// after the escalator said it applied it, see Service.labelled), and no
// older than that read by GitHub's updated_at, which every label change
// moves: a read from before the label was applied proves nothing. Nothing
// here depends on when the poller happens to look, or on whether the
// escalator recorded its escalation yet: a label removed within a poll
// interval of being applied resumes the loop all the same, and a label put
// on by hand pauses it until it is removed.
func resumeAfterEscalation(next *state.PR, labels []string, updated, now time.Time, tm Timing) bool {
	if tm.EscalationLabel == "" {
		return false
	}
	if slices.ContainsFunc(labels, func(l string) bool { return strings.EqualFold(l, tm.EscalationLabel) }) {
		if next.EscalationLabelSeen && !updated.After(next.EscalationLabelSeenAt) {
			return false
		}
		next.EscalationLabelSeen, next.EscalationLabelSeenAt = true, updated
		return true
	}
	if !next.EscalationLabelSeen || updated.Before(next.EscalationLabelSeenAt) {
		return false
	}
	resumeEscalation(next, now)
	return true
}

// resumeEscalation starts a new escalation epoch: the fix cycle at 0 and
// the current status published anew. A human's removal of the label does
// it (resumeAfterEscalation), and so does "/prloop retry" when there is no
// label to remove (planCommands).
func resumeEscalation(next *state.PR, now time.Time) {
	next.Epoch++
	next.Escalations, next.EscalationLabelSeen, next.EscalationLabelSeenAt = nil, false, time.Time{}
	next.FixCycle, next.FeedbackHeadSHA, next.WorkflowFailedHead, next.FixCommandHead = 0, "", "", ""
	next.Checks = state.ChecksRecord{FlakyPasses: next.Checks.FlakyPasses} // the same failure is news again
	next.Status, next.ReviewTimeoutSent, next.WatchedSince = "", false, now
}

// timeout returns ReviewTimeout when it is due, and marks it sent. The
// poller calls it on every tick for every watched PR, without fetching.
func timeout(next *state.PR, now time.Time, tm Timing) []Emit {
	if tm.ReviewTimeout <= 0 || next.ReviewTimeoutSent || next.Closed || next.Stopped || next.Status == events.StatusApproved || next.WatchedSince.IsZero() {
		return nil
	}
	waited := now.Sub(next.WatchedSince)
	if waited < tm.ReviewTimeout {
		return nil
	}
	next.ReviewTimeoutSent = true
	detail := fmt.Sprintf("no approval %s after watching began", waited.Round(time.Second))
	if len(next.MissingReviewers) > 0 {
		detail += "; still waiting for " + strings.Join(next.MissingReviewers, ", ")
	}
	return []Emit{{Data: &events.ReviewTimeout{
		Base: events.Base{PR: next.PR, HeadSHA: next.HeadSHA}, Reason: events.ReasonReviewTimeout,
		MissingReviewers: next.MissingReviewers, Detail: detail, Epoch: next.Epoch,
	}, Parts: []string{events.EpochPart(next.Epoch)}}}
}

// resumed announces a new escalation epoch: a human removed the escalation
// label between cur and next, and the loop resumes.
func resumed(cur, next state.PR) []Emit {
	if next.Epoch == cur.Epoch {
		return nil
	}
	return []Emit{{Data: &events.EscalationResolved{
		Base: events.Base{PR: next.PR, HeadSHA: next.HeadSHA}, Epoch: next.Epoch,
		Detail: "the escalation label was removed; the loop resumes with the fix cycle at 0",
	}, Parts: []string{events.EpochPart(next.Epoch)}}}
}

func describeFailures(failed map[string]string) string {
	var parts []string
	for _, who := range slices.Sorted(maps.Keys(failed)) {
		parts = append(parts, fmt.Sprintf("%s reported %q", who, failed[who]))
	}
	return "review workflow failed: " + strings.Join(parts, "; ")
}

func authors(items []review.Item) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		if !seen[it.Author] {
			seen[it.Author] = true
			out = append(out, it.Author)
		}
	}
	return out
}

// ignoredFindings lists the findings the quorum's classifier set aside, as
// events carry them (at most events.MaxIgnoredFindings).
func ignoredFindings(items []review.Item) []events.IgnoredFinding {
	var out []events.IgnoredFinding
	for _, it := range items[:min(len(items), events.MaxIgnoredFindings)] {
		out = append(out, events.IgnoredFinding{Author: it.Author, Location: it.Location(), URL: it.URL, Reason: it.Why})
	}
	return out
}
