package merger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
)

// ChecksState is the verdict on a head's checks.
type ChecksState int

// Check verdicts.
const (
	// ChecksGreen: every status and check run passed, or there are none.
	ChecksGreen ChecksState = iota
	// ChecksPending: nothing failed and something has not finished.
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
	// Failed and Pending name the contexts and check runs in those states.
	Failed, Pending []string
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

// EvaluateChecks combines the commit statuses (GitHub's combined status,
// which holds the latest status per context) and the check runs of one head.
// A head with neither counts as green, although GitHub calls its combined
// state "pending". When a check ran more than once, its latest run counts.
func EvaluateChecks(combined *gh.CombinedStatus, runs []*gh.CheckRun) Checks {
	var c Checks
	var statuses []*gh.RepoStatus
	if combined != nil {
		statuses = combined.Statuses
	}
	for _, st := range statuses {
		name := "status " + st.GetContext()
		switch st.GetState() {
		case "success":
		case "pending":
			c.Pending = append(c.Pending, name)
		default: // failure, error
			c.Failed = append(c.Failed, name)
		}
	}
	latest := map[string]*gh.CheckRun{}
	for _, r := range runs {
		if r == nil {
			continue
		}
		if cur, ok := latest[r.GetName()]; !ok || r.GetID() > cur.GetID() {
			latest[r.GetName()] = r
		}
	}
	for name, r := range latest {
		name = "check " + name
		switch {
		case r.GetStatus() != "completed":
			c.Pending = append(c.Pending, name)
		case r.GetConclusion() == "success", r.GetConclusion() == "neutral", r.GetConclusion() == "skipped":
		default: // failure, cancelled, timed_out, action_required, stale, startup_failure
			c.Failed = append(c.Failed, name+" ("+r.GetConclusion()+")")
		}
	}
	slices.Sort(c.Failed)
	slices.Sort(c.Pending)
	switch {
	case len(c.Failed) > 0:
		c.State = ChecksFailed
	case len(c.Pending) > 0:
		c.State = ChecksPending
	}
	return c
}

// PRView is what the merger reads of a pull request before acting on it.
type PRView struct {
	Open    bool
	Merged  bool
	Draft   bool
	HeadSHA string
	BaseRef string
	// MergeableState is GitHub's mergeable_state: clean, unstable, behind,
	// blocked, dirty, draft, has_hooks or unknown ("" when absent).
	MergeableState string
}

// ViewOf extracts a PRView from GitHub's answer.
func ViewOf(p *gh.PullRequest) PRView {
	return PRView{
		Open: p.GetState() == "open", Merged: p.GetMerged(), Draft: p.GetDraft(),
		HeadSHA: p.GetHead().GetSHA(), BaseRef: p.GetBase().GetRef(), MergeableState: p.GetMergeableState(),
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
	// ActRequeue: the PR's base changed; move the entry to the new base's
	// queue, where it is verified and merged in turn.
	ActRequeue
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
	case ActRequeue:
		return "requeue"
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
	// Base is the base branch the PR was queued for.
	Base string
	// Approval is the verdict recomputed from the review signals on
	// GitHub (CheckApproval); read only for an open PR still on Head.
	Approval ApprovalCheck
	// RequireChecks is PRLOOP_REQUIRE_CHECKS; Checks is read only when set.
	RequireChecks bool
	Checks        Checks
	// Waited is how long the merger has been waiting on this head;
	// ChecksTimeout is how long it may.
	Waited, ChecksTimeout time.Duration
}

// Decide says what to do with a queued PR, from a fresh read of GitHub. It
// is pure: every input comes from the caller.
func Decide(in Input) Decision {
	pr := in.PR
	switch {
	case pr.Merged:
		return Decision{Action: ActMerged, Why: "already merged"}
	case !pr.Open:
		return Decision{Action: ActDrop, Reason: events.ReasonClosed, Why: "closed without merging"}
	case pr.HeadSHA != in.Head:
		return Decision{Action: ActDrop, Reason: events.ReasonStaleApproval,
			Why: fmt.Sprintf("stale approval: head moved from %s to %s, which nobody approved and prloop did not make", short(in.Head), short(pr.HeadSHA))}
	case in.Base != "" && pr.BaseRef != in.Base:
		return Decision{Action: ActRequeue, Why: fmt.Sprintf("base changed from %s to %s after approval", in.Base, pr.BaseRef)}
	case !in.Approval.Approved:
		return Decision{Action: ActDrop, Reason: events.ReasonApprovalWithdrawn, Why: "approval withdrawn: " + in.Approval.Why}
	case pr.Draft || pr.MergeableState == "draft":
		return Decision{Action: ActFail, Reason: events.ReasonNotMergeable, Why: "the PR is a draft"}
	case pr.MergeableState == "dirty":
		return Decision{Action: ActFail, Reason: events.ReasonMergeConflict, Why: "the PR conflicts with its base branch " + pr.BaseRef}
	case in.RequireChecks && in.Checks.State == ChecksFailed:
		return Decision{Action: ActFail, Reason: events.ReasonChecksFailed, Why: "required checks " + in.Checks.Summary()}
	case pr.MergeableState == "behind":
		return Decision{Action: ActUpdate, Why: "the head is behind its base branch " + pr.BaseRef}
	}
	timedOut := in.Waited >= in.ChecksTimeout
	switch {
	case in.RequireChecks && in.Checks.State == ChecksPending && timedOut:
		return Decision{Action: ActFail, Reason: events.ReasonChecksFailed,
			Why: fmt.Sprintf("required checks still pending after %s: %s", in.ChecksTimeout, strings.Join(in.Checks.Pending, ", "))}
	case in.RequireChecks && in.Checks.State == ChecksPending:
		return Decision{Action: ActWait, Why: "checks " + in.Checks.Summary()}
	case pr.MergeableState == "" || pr.MergeableState == "unknown":
		if timedOut {
			return Decision{Action: ActFail, Reason: events.ReasonNotMergeable, Why: fmt.Sprintf("GitHub did not compute mergeability within %s", in.ChecksTimeout)}
		}
		return Decision{Action: ActWait, Why: "GitHub is computing mergeability"}
	}
	return Decision{Action: ActMerge, Why: "mergeable (" + pr.MergeableState + ")"}
}

// short abbreviates a SHA for messages.
func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}
