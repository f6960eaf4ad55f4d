package merger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

// The merger's pure core.
//
// A pass over a queued entry is observe → Step → store → execute: the
// shell reads what the entry needs (observe, guided by wants), Step
// decides from the entry, that observation and the policy alone, the
// shell stores the next entry with the events Step decided in its outbox,
// publishes them, and then carries out Step's commands. What a command
// found out (a merge made, refused or withheld by mayLand, an update
// pushed or conflicting) comes back to Step as the next observation's
// Outcome. Step decides everything: what to do next (Decide), the
// announcements made once (PRBranchUpdated, PRMergeWaiting), the backoff
// after errors and its reset, refusals, and what a half-done step
// (the entry's Intent) means after a crash. The only merge rule is
// mayLand: Step consults it before it emits a merge command, and the
// executor consults it again right before the merge call, with the base
// tip read last.

// Intent is the one step an entry started on GitHub and has not seen
// through: written before the step, so that a replica taking over after a
// crash can tell the step prloop made from someone else's push.
type Intent struct {
	// Kind is intentUpdate or intentMerge.
	Kind string `json:"kind"`
	// Head is the head the step started from (an update) or was made for
	// (a merge).
	Head string `json:"head"`
	// To is the head an update will produce, when known before the push
	// (a rebase).
	To string `json:"to,omitempty"`
	// Tree is the tree main must have after the merge: the head's tree CI
	// passed (serial) or the green candidate's (speculative).
	Tree string `json:"tree,omitempty"`
}

// Intent kinds.
const (
	intentUpdate = "update"
	intentMerge  = "merge"
)

// updating reports the head an update was started from ("" when none).
func (e Entry) updating() string {
	if e.Intent != nil && e.Intent.Kind == intentUpdate {
		return e.Intent.Head
	}
	return ""
}

// merging reports the merge the entry started (nil when none).
func (e Entry) merging() *Intent {
	if e.Intent != nil && e.Intent.Kind == intentMerge {
		return e.Intent
	}
	return nil
}

// Policy is what Step takes from the merger's configuration.
type Policy struct {
	RequireChecks    bool
	ChecksTimeout    time.Duration
	PollInterval     time.Duration
	MergeRetries     int
	DryRun           bool
	ResolveConflicts bool
	DeleteBranch     bool
	// UpdateMethod names PRBranchUpdated's method.
	UpdateMethod string
	MergeMethod  string
	// QueueDepth is how many PRs of a speculative queue ride in
	// candidates at once.
	QueueDepth int
	// RetryFailed re-runs a failed candidate's Actions jobs once before
	// its PR leaves (PRLOOP_QUEUE_RETRY_FAILED, flaky.go).
	RetryFailed bool
}

// policy is the configuration's Policy.
func (c Config) policy() Policy {
	return Policy{
		RequireChecks: c.RequireChecks, ChecksTimeout: c.ChecksTimeout, PollInterval: c.PollInterval,
		MergeRetries: c.MergeRetries, DryRun: c.DryRun, ResolveConflicts: c.ResolveConflicts, DeleteBranch: c.DeleteBranch,
		UpdateMethod: c.UpdateMethod, MergeMethod: c.MergeMethod, QueueDepth: c.queueDepth(),
		RetryFailed: c.RetryFailed,
	}
}

// Observation is everything the shell read for one Step.
type Observation struct {
	Now time.Time
	// Err is a read that failed (GitHub or git unreachable): the entry
	// backs off, and only maxFailures in a row give up.
	Err error
	// Outcome, when set, is what the command Step emitted last found out;
	// Step judges it alone, nothing else is read.
	Outcome *Outcome

	// PR is the PR now.
	PR PRView
	// Own, read when an update prloop started moved the head (wants): is
	// the new head prloop's own update of the entry's head (madeFrom)?
	Own *bool
	// Adopted, read when the head moved to one prloop did not make:
	// GitHub's verdict on that head approved in its own right.
	Adopted *ApprovalCheck
	// MergedTree is the tree of the PR's merge commit, read when the PR is
	// merged and the entry started that merge (crash recovery).
	MergedTree string

	// Read only for an open PR on the entry's head:
	//
	// Approval is CheckApproval's verdict on GitHub's review signals.
	Approval ApprovalCheck
	// Checks is what reported on the head, with Required filled in (read
	// only under PRLOOP_REQUIRE_CHECKS; Seen is the entry's).
	Checks *ChecksInput
	// Compare is how the head stands to its base's tip.
	Compare headVsBase
	// Tip is the base tip, read last (the speculative queue's merges).
	Tip string
	// Settings are how the base's policy has the PR merged, read before
	// the tip at the tip the candidate was built on (the speculative
	// queue's merges): nil when not read, and the executor reads them.
	Settings *mergeSettings
	// Freezes are the repository's queue freezes, read with the head: a
	// merge waits while frozen holds its base (freeze.go).
	Freezes []Freeze
}

// Outcome is what a command found out.
type Outcome struct {
	Kind outcomeKind
	// Head is an update's new head.
	Head string
	// MergeSHA and MergedTree are a merge's commit and its tree.
	MergeSHA, MergedTree string
	// Err is the refusal or error, for refused, transient and conflict.
	Err error
	// Verdict is mayLand's refusal, for withheld.
	Verdict landVerdict
	// BaseSHA is the base tip a conflict was found with.
	BaseSHA string
	// Settings are how a merge was made (the base's policy: method,
	// branch deletion), for merged; nil for a merge found made (a lost
	// answer after a restart), which the operator's settings describe.
	Settings *mergeSettings
	// Freeze is the freeze that held the merge, for held.
	Freeze Freeze
}

// with is o with the settings its merge was made with.
func (o Outcome) with(ms mergeSettings) Outcome {
	if o.Kind == merged {
		o.Settings = &ms
	}
	return o
}

// outcomeKind names what a command found out.
type outcomeKind int

// Outcomes.
const (
	// updated: the branch update made Outcome.Head, prloop's own.
	updated outcomeKind = iota + 1
	// updateConflict: the update (a rebase) conflicts with the base.
	updateConflict
	// updateStale: the head moved during the update to one prloop did not
	// make; the next look drops the stale approval.
	updateStale
	// merged: the PR merged (the call's answer, or a lost answer found
	// merged after all).
	merged
	// refused: GitHub refused the update or merge (405, 409, 422).
	refused
	// withheld: mayLand refused the merge right before the call.
	withheld
	// transient: the command failed for a reason a later pass may not
	// meet (GitHub or git unreachable).
	transient
	// held: a queue freeze held the merge right before the call.
	held
)

// Command is one side effect Step asks the shell to carry out: a closed
// set (cmdUpdate, cmdMerge, cmdDeleteBranch), executed after the next
// entry and its events are stored.
type Command interface{ command() }

// cmdUpdate brings the head (From) up to date with its base.
type cmdUpdate struct{ From string }

// cmdMerge merges Head, whose merge must leave Tree on the base, if
// mayLand still lets Landing through with the base tip read right before
// the call.
type cmdMerge struct {
	Head, Tree string
	Landing    landing
	// Settings, when set, are the base's policy for the merge, read
	// before the tip Landing holds: the executor does not read them
	// again, so that nothing stands between that read of the tip and the
	// merge call.
	Settings *mergeSettings
}

// cmdDeleteBranch deletes the merged PR's head branch when it lives in
// the base repository.
type cmdDeleteBranch struct{}

func (cmdUpdate) command()       {}
func (cmdMerge) command()        {}
func (cmdDeleteBranch) command() {}

// outEvent is an event Step decided, with the parts of its id: the shell
// builds it into the entry's outbox.
type outEvent struct {
	Data  events.Data
	Parts []string
}

// Transition is Step's answer.
type Transition struct {
	// Next is the entry to store.
	Next Entry
	// Events are published once Next is stored (through its outbox).
	Events []outEvent
	// Commands run after the events, in order.
	Commands []Command
	// Leave, when set, is how the entry leaves its queue (a metrics
	// result): it is removed once its events are out.
	Leave string
	// Wait says to look again after the poll interval; otherwise at once
	// (or, with Next.NotBefore in the future, when the backoff ends).
	Wait bool
	// Why says what was decided, for logs.
	Why string
}

// Wants is what observe must read for an entry, besides the PR.
type Wants struct {
	// Own: whether the moved head is prloop's own update; Adopt: whether it
	// is approved in its own right; MergedTree: the merge commit's tree.
	Own, Adopt, MergedTree bool
	// OnHead: the approval, checks and comparison of the entry's head.
	OnHead bool
}

// wants says what observe reads for e, given the PR as GetPull showed it.
// It is pure.
func wants(e Entry, v PRView) Wants {
	live := v.Open && !v.Merged
	var w Wants
	switch {
	case v.Merged:
		w.MergedTree = e.merging() != nil && e.merging().Head == v.HeadSHA
	case !live:
	case v.HeadSHA == e.Head:
		w.OnHead = e.updating() == ""
	case e.updating() == e.Head:
		w.Own = true
	default:
		w.Adopt = true
	}
	return w
}

// Step decides what happens to the entry e of a serial queue, given what
// the shell observed and the policy. It is pure: everything it looks at is
// in its arguments, and everything it does is in its answer.
func Step(e Entry, o Observation, pol Policy) Transition {
	if o.Outcome != nil {
		return afterCommand(e, *o.Outcome, o.Now, pol)
	}
	if o.Err != nil {
		return backOff(e, o.Err, o.Now, pol)
	}
	v := o.PR
	live := v.Open && !v.Merged
	next := e
	var evs []outEvent
	switch {
	case live && v.HeadSHA != e.Head && e.updating() == e.Head && o.Own != nil && *o.Own:
		// Crash recovery: prloop's own update landed, and the replica that
		// made it stopped before it said so.
		next.Head, next.Intent, next.WaitingSince = v.HeadSHA, nil, o.Now
		return Transition{Next: next, Events: announceUpdate(&next, pol), Why: "resuming after prloop's own branch update"}
	case live && e.updating() != "":
		// An update that did not finish, or not as prloop's: it vouches for
		// nothing from now on.
		next.Intent = nil
		return Transition{Next: next, Why: "the branch update prloop started did not make the head; the approval does not carry over"}
	case live && v.HeadSHA != e.Head && o.Adopted != nil && o.Adopted.Approved:
		next.ApprovedHead, next.Head, next.Anchor, next.Approvers = v.HeadSHA, v.HeadSHA, time.Time{}, o.Adopted.Approvers
		next.WaitingSince, next.Intent, next.Refusals = o.Now, nil, 0
		return Transition{Next: next, Why: "the head moved to one approved in its own right; going on with it"}
	}
	evs = append(evs, announceUpdate(&next, pol)...)
	if next.WaitingSince.IsZero() {
		next.WaitingSince = o.Now
	}
	onHead := live && v.HeadSHA == e.Head
	var checks Checks
	var reports ChecksInput
	if pol.RequireChecks && onHead && o.Checks != nil {
		reports = *o.Checks
		reports.Seen = e.SeenChecks
		checks = EvaluateChecks(reports)
		next.SeenChecks = union(e.SeenChecks, checks.Reported)
		evs = append(evs, announceWaiting(&next, checks)...)
	}
	d := Decide(Input{
		PR: v, Head: e.Head, Approval: o.Approval, Behind: o.Compare.behind, RequireChecks: pol.RequireChecks, Checks: checks,
		Waited: o.Now.Sub(next.WaitingSince), ChecksTimeout: pol.ChecksTimeout,
	})
	t := Transition{Next: next, Events: evs, Why: d.Action.String() + ": " + d.Why}
	switch d.Action {
	case ActWait:
		// The pass went through: earlier errors are not in a row.
		t.Next.Failures, t.Wait = 0, true
		return t
	case ActMerged, ActDrop, ActFail:
		return then(t, exit(next, v, d, o.MergedTree, pol))
	case ActUpdate:
		if f, ok := frozen(o.Freezes, e.Base, o.Now); ok && pol.DryRun {
			return then(t, hold(t.Next, f))
		}
		if pol.DryRun {
			return then(t, dryRunMerged(next, pol))
		}
		t.Next.Intent = &Intent{Kind: intentUpdate, Head: e.Head}
		t.Commands = []Command{cmdUpdate{From: e.Head}}
		return t
	}
	// ActMerge.
	f, isFrozen := frozen(o.Freezes, e.Base, o.Now)
	if isFrozen && pol.DryRun {
		return then(t, hold(t.Next, f))
	}
	if pol.DryRun {
		return then(t, dryRunMerged(next, pol))
	}
	l := landing{
		Head: v.HeadSHA, Approved: e.Head, Base: v.BaseRef, ApprovedBase: e.Base, Approval: o.Approval,
		Tested: v.HeadSHA, TestedHead: v.HeadSHA, BuiltOn: o.Compare.mergeBase,
		RequireChecks: pol.RequireChecks, Required: reports.Required, Seen: reports.Seen, Reports: reports,
	}
	// The tip as the comparison saw it: the head holds it (not behind), so
	// it is their merge base. The executor reads it again right before
	// the call.
	probe := l
	probe.Tip = o.Compare.mergeBase
	if verdict := mayLand(probe); !verdict.ok() {
		return then(t, withhold(next, verdict, pol))
	}
	if isFrozen {
		// Everything else lets it merge: it merges once unfrozen.
		return then(t, hold(t.Next, f))
	}
	t.Next.Intent = &Intent{Kind: intentMerge, Head: v.HeadSHA, Tree: o.Compare.tree}
	t.Commands = []Command{cmdMerge{Head: v.HeadSHA, Tree: o.Compare.tree, Landing: l}}
	return t
}

// exit is the transition of an entry that leaves its queue on Decide's
// d (ActMerged, ActDrop, ActFail), in either queue mode: a merge prloop
// made (the entry's merge intent, the PR merged on that head) is checked
// against the tree CI passed (landed), one made by someone else only
// leaves, a conflict goes through conflicted.
func exit(e Entry, v PRView, d Decision, mergedTree string, pol Policy) Transition {
	switch d.Action {
	case ActMerged:
		if m := e.merging(); m != nil && m.Head == v.HeadSHA {
			return landed(e, v.MergeSHA, mergedTree, pol)
		}
		return Transition{Next: e, Leave: metrics.MergeMergedElsewhere, Why: "merged outside prloop"}
	case ActDrop:
		return drop(e, d.Reason, d.Why, pol)
	}
	if d.Reason == events.ReasonMergeConflict {
		return conflicted(e, v.BaseSHA, d.Why, pol)
	}
	return fail(e, d.Reason, d.Why, pol)
}

// then is t's entry and events followed by u's decision about them.
func then(t, u Transition) Transition {
	u.Events = append(slices.Clone(t.Events), u.Events...)
	if u.Why == "" {
		u.Why = t.Why
	}
	return u
}

// afterCommand judges what a command found out.
func afterCommand(e Entry, out Outcome, now time.Time, pol Policy) Transition {
	next := e
	switch out.Kind {
	case updated:
		next.Head, next.Intent, next.WaitingSince = out.Head, nil, now
		return Transition{Next: next, Events: announceUpdate(&next, pol), Why: "branch updated; waiting for the new head's checks"}
	case updateConflict:
		next.Intent = nil
		return conflicted(next, out.BaseSHA, fmt.Sprintf("rebasing onto %s conflicts: %v", e.Base, out.Err), pol)
	case updateStale:
		next.Intent = nil
		return Transition{Next: next, Why: "the head moved during the branch update"}
	case merged:
		if ms := out.Settings; ms != nil {
			pol.MergeMethod, pol.DeleteBranch = ms.Method, ms.DeleteBranch
		}
		return landed(next, out.MergeSHA, out.MergedTree, pol)
	case refused:
		// Refused and not merged (or not updated): nothing of ours to
		// recognise later.
		next.Intent = nil
		return refuse(next, "GitHub", out.Err, pol)
	case withheld:
		next.Intent = nil
		return withhold(next, out.Verdict, pol)
	case held:
		next.Intent = nil
		return hold(next, out.Freeze)
	}
	// transient: a merge that may have gone through keeps its intent, so
	// that the PR found merged later is recognised as prloop's; a failed
	// update vouches for nothing.
	if e.updating() != "" {
		next.Intent = nil
	}
	return backOff(next, out.Err, now, pol)
}

// landed finishes a merge prloop made of e's intent: main's tree after it
// (mergedTree) must be the tree CI passed (the intent's). When it is not,
// the change landed, but not as tested, and a human is called
// (untested_merge). Either way the PR merged and leaves the queue.
func landed(e Entry, mergeSHA, mergedTree string, pol Policy) Transition {
	m := e.merging()
	head, tree := e.Head, ""
	if m != nil {
		head, tree = m.Head, m.Tree
	}
	var evs []outEvent
	why := "merged"
	if tree == "" || mergedTree != tree {
		why = fmt.Sprintf("merged %s as %s, whose tree %s is not the tree %s CI passed: the base branch %s moved before the merge, and main may hold an untested combination",
			short(head), short(mergeSHA), short(mergedTree), short(tree), e.Base)
		evs = append(evs, outEvent{Data: &events.EscalationRequested{
			Base: events.Base{PR: e.PR, HeadSHA: head}, Reason: events.ReasonUntestedMerge, Severity: events.SeverityBlocking,
			Detail: why, Actor: Name, Epoch: e.Epoch,
		}, Parts: []string{string(events.ReasonUntestedMerge), mergeSHA}})
	}
	evs = append(evs, outEvent{Data: &events.Merged{
		Base: events.Base{PR: e.PR, HeadSHA: head}, MergeSHA: mergeSHA, MergeMethod: pol.MergeMethod, Actor: Name,
	}, Parts: []string{head}})
	t := Transition{Next: e, Events: evs, Leave: metrics.MergeMerged, Why: why}
	if pol.DeleteBranch {
		t.Commands = []Command{cmdDeleteBranch{}}
	}
	return t
}

// withhold handles a merge mayLand refused: an approval that no longer
// stands, or one for another base, makes the entry leave; anything else
// (the base tip moved since it was compared, the PR changed since it was
// read) is counted like a merge GitHub refused, and the next pass decides
// what to do (update, wait).
func withhold(e Entry, v landVerdict, pol Policy) Transition {
	if v.Refusal == refusedApproval || v.Refusal == refusedBase {
		return drop(e, v.Reason, v.Why, pol)
	}
	return refuse(e, "prloop's merge rule", fmt.Errorf("%s: %s", v.Refusal, v.Why), pol)
}

// refuse counts a refused merge or update; past PRLOOP_MERGE_RETRIES a
// human is asked, before that the next look comes after the poll
// interval.
func refuse(e Entry, who string, err error, pol Policy) Transition {
	e.Refusals++
	e.LastError = err.Error()
	if e.Refusals > pol.MergeRetries {
		return fail(e, events.ReasonNotMergeable, fmt.Sprintf("%s refused %d times: %v", who, e.Refusals, err), pol)
	}
	return Transition{Next: e, Wait: true, Why: fmt.Sprintf("%s refused (attempt %d of %d): %v", who, e.Refusals, pol.MergeRetries+1, err)}
}

// backOff records a transient error about the entry and delays it (and
// with it its queue) with exponential backoff; after maxFailures in a row
// the merger gives up.
func backOff(e Entry, cause error, now time.Time, pol Policy) Transition {
	e.LastError = cause.Error()
	var delay time.Duration
	var giveUp bool
	e.Failures, delay, giveUp = backoff(e.Failures, pol.PollInterval)
	if giveUp {
		return fail(e, events.ReasonNotMergeable, fmt.Sprintf("gave up after %d errors in a row: %v", e.Failures, cause), pol)
	}
	e.NotBefore = now.Add(delay)
	return Transition{Next: e, Why: fmt.Sprintf("will retry in %s after %d errors in a row: %v", delay, e.Failures, cause)}
}

// backoff is what one more transient error does to an entry that had
// failures in a row before it: the new count, and the wait before the
// next attempt (the poll interval, doubling with each error, at most five
// minutes), or that the merger gives up, at maxFailures. A pass that goes
// through resets the count, so that errors far apart, each followed by an
// answer, never add up. It is pure.
func backoff(failures int, poll time.Duration) (int, time.Duration, bool) {
	n := failures + 1
	if n >= maxFailures {
		return n, 0, true
	}
	return n, retryPolicy(poll).Delay(n), false
}

// announceUpdate is PRBranchUpdated for the entry's head when prloop made
// it and has not said so yet; it records in e that it is said. The event
// leaves through the outbox, so it is never lost, and its id (the head and
// the approval's sequence) makes a repeat harmless.
func announceUpdate(e *Entry, pol Policy) []outEvent {
	if e.Head == e.ApprovedHead || e.UpdateAnnounced == e.Head {
		return nil
	}
	method := "update-branch"
	if pol.UpdateMethod == UpdateRebase {
		method = "rebase"
	}
	e.UpdateAnnounced = e.Head
	return []outEvent{{Data: &events.BranchUpdated{
		Base: events.Base{PR: e.PR, HeadSHA: e.Head}, PreviousHeadSHA: e.ApprovedHead, Method: method,
	}, Parts: []string{ghref.EventSHA(e.Head), strconv.FormatUint(e.Seq, 10)}}}
}

// announceWaiting is PRMergeWaiting with the checks the head waits for
// whenever that set changed since the entry last said so for this head,
// and an empty list once none is left (nothing when there never was one);
// it records in e what it said. The event id is the head, the entry's
// count of announcements and the names: a set that comes back (a check
// re-run) is a new event.
func announceWaiting(e *Entry, c Checks) []outEvent {
	said := e.WaitingHead == e.Head
	if (!said && len(c.Waiting) == 0) || (said && slices.Equal(c.Waiting, e.WaitingFor)) {
		return nil
	}
	e.Announced++
	sum := sha256.Sum256([]byte(strings.Join(c.Waiting, "\n")))
	e.WaitingHead, e.WaitingFor = e.Head, slices.Clone(c.Waiting)
	return []outEvent{{Data: &events.MergeWaiting{
		Base: events.Base{PR: e.PR, HeadSHA: e.Head}, BaseBranch: e.Base, Checks: slices.Clone(c.Waiting),
	}, Parts: []string{e.Head, strconv.Itoa(e.Announced), hex.EncodeToString(sum[:8])}}}
}

// fail gives up on the entry: it asks for a human (reason and why) and
// publishes PRMergeFailed; a dry run only the latter. Both ids carry the
// entry's approval sequence: a retry repeats them, while the same failure
// after a human removed the label (a new approval, a new entry) is news.
func fail(e Entry, reason events.Reason, why string, pol Policy) Transition {
	b := events.Base{PR: e.PR, HeadSHA: e.Head}
	parts := []string{string(reason), e.Head, strconv.FormatUint(e.Seq, 10)}
	var evs []outEvent
	if !pol.DryRun {
		evs = append(evs, outEvent{Data: &events.EscalationRequested{
			Base: b, Reason: reason, Severity: events.SeverityBlocking, Detail: why, LastError: e.LastError, Actor: Name, Epoch: e.Epoch,
		}, Parts: parts})
	}
	evs = append(evs, outEvent{Data: &events.MergeFailed{Base: b, Reason: reason, Detail: why, DryRun: pol.DryRun}, Parts: parts})
	return Transition{Next: e, Events: evs, Leave: metrics.MergeFailed, Why: "merge failed; a human is needed: " + why}
}

// drop takes the entry out of its queue without merging and without
// asking for a human, and says so with PRMergeFailed: no exit from a
// queue is silent.
func drop(e Entry, reason events.Reason, why string, pol Policy) Transition {
	return Transition{Next: e, Events: []outEvent{{Data: &events.MergeFailed{
		Base: events.Base{PR: e.PR, HeadSHA: e.Head}, Reason: reason, Detail: why, DryRun: pol.DryRun,
	}, Parts: []string{string(reason), e.Head, strconv.FormatUint(e.Seq, 10)}}}, Leave: metrics.MergeDropped, Why: "left the merge queue without merging: " + why}
}

// conflicted takes the entry out of its queue because its head conflicts
// with its base; baseSHA is the base tip it conflicts with ("" when
// unknown). Every path that finds a conflict (Decide's merge_conflict, a
// conflicting rebase, a speculative candidate) goes through it. With
// PRLOOP_RESOLVE_CONFLICTS off (or in a dry run) it is fail with reason
// merge_conflict; with it on, the command PRConflictResolveRequested for
// the feedback service comes first (so the PR never leaves without the
// agent asked) and then PRMergeFailed, and no human is asked. The ids
// carry the head, the base tip and the approval's sequence.
func conflicted(e Entry, baseSHA, why string, pol Policy) Transition {
	if !pol.ResolveConflicts || pol.DryRun {
		return fail(e, events.ReasonMergeConflict, why, pol)
	}
	b := events.Base{PR: e.PR, HeadSHA: e.Head}
	parts := []string{ghref.EventSHA(e.Head), ghref.EventSHA(baseSHA), strconv.FormatUint(e.Seq, 10)}
	detail := why + "; the coding agent was asked to resolve the conflict (PRLOOP_RESOLVE_CONFLICTS)"
	return Transition{Next: e, Events: []outEvent{
		{Data: &events.ConflictResolveRequested{Base: b, BaseBranch: e.Base, BaseSHA: baseSHA, Detail: why, Epoch: e.Epoch, FixCycle: e.FixCycle}, Parts: parts},
		{Data: &events.MergeFailed{Base: b, Reason: events.ReasonMergeConflict, Detail: detail}, Parts: append([]string{string(events.ReasonMergeConflict)}, parts...)},
	}, Leave: metrics.MergeFailed, Why: "merge conflict handed to the coding agent: " + why}
}

// dryRunMerged publishes what a merge would have been, and leaves.
func dryRunMerged(e Entry, pol Policy) Transition {
	return Transition{Next: e, Events: []outEvent{{Data: &events.Merged{
		Base: events.Base{PR: e.PR, HeadSHA: e.Head}, MergeMethod: pol.MergeMethod, Actor: Name, DryRun: true,
	}, Parts: []string{"dry-run", e.Head}}}, Leave: metrics.MergeDryRun, Why: "dry run: published what the merge would be; nothing changed on GitHub"}
}
