package merger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// ChecksState is the verdict on a head's checks.
type ChecksState int

// Check verdicts.
const (
	// ChecksGreen: every check that reported passed, every expected check
	// (required for the base, or seen on an earlier head) reported, and
	// either something reported or nothing was expected.
	ChecksGreen ChecksState = iota
	// ChecksPending: nothing failed and something has not finished or has
	// not reported yet.
	ChecksPending
	// ChecksFailed: a status or a finished check run did not pass.
	ChecksFailed
)

// String names the verdict for logs.
func (s ChecksState) String() string {
	switch s {
	case ChecksGreen:
		return "green"
	case ChecksPending:
		return "pending"
	case ChecksFailed:
		return "failed"
	}
	return fmt.Sprintf("ChecksState(%d)", int(s))
}

// Checks is what the commit statuses and check runs of a head say.
type Checks struct {
	State ChecksState
	// Failed and Pending name the contexts and check runs in those states;
	// Pending also names each expected check that has not reported, as
	// "<name> (not reported)".
	Failed, Pending []string
	// Missing names the expected checks that have not reported on the head.
	Missing []string
	// Waiting names, bare and once each, every check the head still waits
	// for: pending statuses and check runs, and the missing ones
	// (PRMergeWaiting's checks).
	Waiting []string
	// Reported names every check that reported on the head (status
	// contexts and check run names, prloop's own status or check run
	// excepted): what the merger remembers for the PR's later heads.
	Reported []string
}

// Summary describes the checks in a few words for logs and escalations.
func (c Checks) Summary() string {
	switch c.State {
	case ChecksFailed:
		return "failed: " + strings.Join(c.Failed, ", ")
	case ChecksPending:
		return "pending: " + strings.Join(c.Pending, ", ")
	}
	return "green"
}

// ChecksInput is what EvaluateChecks looks at.
type ChecksInput struct {
	// Required names the checks the base requires (its branch rules and
	// PRLOOP_REQUIRED_CHECKS): status contexts or check run names.
	Required []string
	// Seen names the checks that reported on earlier heads of the PR.
	Seen []string
	// Own is prloop's own status context (PRLOOP_STATUS_CONTEXT), also the
	// name of its check run under GitHub App auth: never a check.
	Own string
	// Combined is GitHub's combined status of the head, which holds the
	// latest status per context; Runs are the head's check runs.
	Combined *gh.CombinedStatus
	Runs     []*gh.CheckRun
}

// EvaluateChecks decides whether a head's checks allow a merge. A head is
// green only when every check that reported on it passed and every
// expected check (required, or seen on an earlier head) reported: right
// after a push or a branch update CI has often not registered anything yet,
// and an empty list then means "not yet", not "nothing to wait for". A head
// with no checks at all is green only when nothing is expected. A name is
// matched against status contexts and check run names alike, as GitHub's
// required checks are. When a check ran more than once, its latest run
// counts.
func EvaluateChecks(in ChecksInput) Checks {
	var c Checks
	reported := map[string]bool{}
	var statuses []*gh.RepoStatus
	if in.Combined != nil {
		statuses = in.Combined.Statuses
	}
	for _, st := range statuses {
		if st == nil || (in.Own != "" && st.GetContext() == in.Own) {
			continue
		}
		reported[st.GetContext()] = true
		name := "status " + st.GetContext()
		switch st.GetState() {
		case "success":
		case "pending":
			c.Pending = append(c.Pending, name)
			c.Waiting = append(c.Waiting, st.GetContext())
		default: // failure, error
			c.Failed = append(c.Failed, name)
		}
	}
	latest := latestRuns(in)
	for name, r := range latest {
		reported[name] = true
		name = "check " + name
		switch {
		case r.GetStatus() != "completed":
			c.Pending = append(c.Pending, name)
			c.Waiting = append(c.Waiting, r.GetName())
		case r.GetConclusion() == "success", r.GetConclusion() == "neutral", r.GetConclusion() == "skipped":
		default: // failure, cancelled, timed_out, action_required, stale, startup_failure
			c.Failed = append(c.Failed, name+" ("+r.GetConclusion()+")")
		}
	}
	for _, name := range slices.Concat(in.Required, in.Seen) {
		if name == "" || name == in.Own || reported[name] || slices.Contains(c.Missing, name) {
			continue
		}
		c.Missing = append(c.Missing, name)
		c.Pending = append(c.Pending, name+" (not reported)")
		c.Waiting = append(c.Waiting, name)
	}
	for name := range reported {
		c.Reported = append(c.Reported, name)
	}
	slices.Sort(c.Failed)
	slices.Sort(c.Pending)
	slices.Sort(c.Missing)
	slices.Sort(c.Reported)
	slices.Sort(c.Waiting)
	c.Waiting = slices.Compact(c.Waiting)
	switch {
	case len(c.Failed) > 0:
		c.State = ChecksFailed
	case len(c.Pending) > 0:
		c.State = ChecksPending
	}
	return c
}

// latestRuns is the latest run of each check run name among in.Runs,
// prloop's own excepted: a check that ran more than once counts by it.
func latestRuns(in ChecksInput) map[string]*gh.CheckRun {
	latest := map[string]*gh.CheckRun{}
	for _, r := range in.Runs {
		if r == nil || (in.Own != "" && r.GetName() == in.Own) {
			continue
		}
		if cur, ok := latest[r.GetName()]; !ok || r.GetID() > cur.GetID() {
			latest[r.GetName()] = r
		}
	}
	return latest
}

// PRView is what the merger reads of a pull request before acting on it.
type PRView struct {
	Open    bool
	Merged  bool
	Draft   bool
	HeadSHA string
	BaseRef string
	// MergeableState is GitHub's mergeable_state: clean, unstable, behind,
	// blocked, dirty, draft, has_hooks or unknown ("" when absent). It is a
	// hint only: dirty starts the conflict path and unknown waits, but
	// whether the head is up to date is computed (Input.Behind), because
	// GitHub says "behind" only when the base requires branches to be up to
	// date, and "blocked" or "unstable" hide it even then.
	MergeableState string
	// BaseSHA is the base tip GitHub compared the PR with (for a
	// conflict's event); MergeSHA the merge commit of a merged PR.
	BaseSHA, MergeSHA string
}

// ViewOf extracts a PRView from GitHub's answer.
func ViewOf(p *gh.PullRequest) PRView {
	return PRView{
		Open: p.GetState() == "open", Merged: p.GetMerged(), Draft: p.GetDraft(),
		HeadSHA: p.GetHead().GetSHA(), BaseRef: p.GetBase().GetRef(), MergeableState: p.GetMergeableState(),
		BaseSHA: p.GetBase().GetSHA(), MergeSHA: p.GetMergeCommitSHA(),
	}
}

// Action is what the merger does next with a queued PR.
type Action int

// Actions, in the order Decide considers them.
const (
	// ActWait: look again after the poll interval (checks pending,
	// mergeability not computed yet).
	ActWait Action = iota
	// ActMerge: merge the head now.
	ActMerge
	// ActUpdate: bring the head up to date with its base, then look again.
	ActUpdate
	// ActDrop: leave the queue without merging and without escalating
	// (closed, stale or withdrawn approval), publishing PRMergeFailed with
	// Decision.Reason; a fresh approval queues the PR again.
	ActDrop
	// ActMerged: the PR is already merged.
	ActMerged
	// ActFail: give up and ask a human (Decision.Reason says why).
	ActFail
)

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case ActWait:
		return "wait"
	case ActMerge:
		return "merge"
	case ActUpdate:
		return "update"
	case ActDrop:
		return "drop"
	case ActMerged:
		return "merged"
	case ActFail:
		return "fail"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is Decide's answer.
type Decision struct {
	Action Action
	// Reason is set for ActFail and ActDrop.
	Reason events.Reason
	// Why explains the decision in words, for logs and escalations.
	Why string
}

// Input is everything Decide looks at.
type Input struct {
	PR PRView
	// Head is the head the approval applies to: the approved head, or the
	// head prloop made from it by updating the branch.
	Head string
	// Approval is the verdict recomputed from the review signals on
	// GitHub (CheckApproval); read only for an open PR still on Head.
	Approval ApprovalCheck
	// Behind says the base tip is not an ancestor of the head (GitHub's
	// comparison of the two, behind_by > 0): merging it would land a tree
	// no check ran on, so the head is brought up to date first.
	Behind bool
	// RequireChecks is PRLOOP_REQUIRE_CHECKS; Checks is read only when set.
	RequireChecks bool
	Checks        Checks
	// Waited is how long the merger has been waiting on this head;
	// ChecksTimeout is how long it may.
	Waited, ChecksTimeout time.Duration
}

// Decide says what to do with a queued PR, from a fresh read of GitHub. It
// is pure: every input comes from the caller. A merge is decided only for a
// head that contains the base tip (not Behind), so that the tree main gets
// is the head's own, the one its checks ran on.
func Decide(in Input) Decision {
	pr := in.PR
	switch {
	case pr.Merged:
		return Decision{Action: ActMerged, Why: "already merged"}
	case !pr.Open:
		return Decision{Action: ActDrop, Reason: events.ReasonClosed, Why: "closed without merging"}
	case pr.HeadSHA != in.Head:
		return Decision{Action: ActDrop, Reason: events.ReasonStaleApproval,
			Why: fmt.Sprintf("stale approval: head moved from %s to %s, which nobody approved and prloop did not make", ghref.ShortSHA(in.Head), ghref.ShortSHA(pr.HeadSHA))}
	case !in.Approval.Approved:
		// Also a PR retargeted since its approval: an approval is for a
		// head on a base (CheckApproval).
		reason := in.Approval.Reason
		if reason == "" {
			reason = events.ReasonApprovalWithdrawn
		}
		return Decision{Action: ActDrop, Reason: reason, Why: "approval withdrawn: " + in.Approval.Why}
	case pr.Draft || pr.MergeableState == "draft":
		return Decision{Action: ActFail, Reason: events.ReasonNotMergeable, Why: "the PR is a draft"}
	case pr.MergeableState == "dirty":
		return Decision{Action: ActFail, Reason: events.ReasonMergeConflict, Why: "the PR conflicts with its base branch " + pr.BaseRef}
	case in.RequireChecks && in.Checks.State == ChecksFailed:
		return Decision{Action: ActFail, Reason: events.ReasonChecksFailed, Why: "required checks " + in.Checks.Summary()}
	case in.Behind && !unknown(pr.MergeableState):
		// While GitHub computes mergeability, a conflict may be coming:
		// wait for it (below) rather than ask for an update.
		return Decision{Action: ActUpdate, Why: "the head lacks the tip of its base branch " + pr.BaseRef}
	}
	timedOut := in.Waited >= in.ChecksTimeout
	switch {
	case in.RequireChecks && in.Checks.State == ChecksPending && timedOut:
		return Decision{Action: ActFail, Reason: events.ReasonChecksFailed,
			Why: fmt.Sprintf("required checks still pending after %s: %s", in.ChecksTimeout, strings.Join(in.Checks.Pending, ", "))}
	case in.RequireChecks && in.Checks.State == ChecksPending:
		return Decision{Action: ActWait, Why: "checks " + in.Checks.Summary()}
	case unknown(pr.MergeableState):
		if timedOut {
			return Decision{Action: ActFail, Reason: events.ReasonNotMergeable, Why: fmt.Sprintf("GitHub did not compute mergeability within %s", in.ChecksTimeout)}
		}
		return Decision{Action: ActWait, Why: "GitHub is computing mergeability"}
	}
	return Decision{Action: ActMerge, Why: "up to date with " + pr.BaseRef + " (mergeable_state " + pr.MergeableState + ")"}
}

// unknown reports a mergeable_state GitHub has not computed yet.
func unknown(state string) bool { return state == "" || state == "unknown" }
