package events

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prloop/prloop/pkg/ghref"
)

// Type is a CloudEvent type and the last token of the event's subject.
type Type string

// Status is a PR's review status as the poller computes it.
type Status string

// Review statuses, weakest first. Precedence when signals disagree:
// approved > in_progress > changes_requested > pending.
const (
	StatusPending          Status = "pending"
	StatusChangesRequested Status = "changes_requested"
	StatusInProgress       Status = "in_progress"
	StatusApproved         Status = "approved"
)

// Rank orders statuses by precedence; higher wins.
func (s Status) Rank() int {
	switch s {
	case StatusChangesRequested:
		return 1
	case StatusInProgress:
		return 2
	case StatusApproved:
		return 3
	default:
		return 0
	}
}

// Reason is a fixed code for why a PR left the happy path.
type Reason string

// Reason codes carried by ReviewTimeout, PRMergeFailed and escalations.
const (
	ReasonReviewTimeout  Reason = "review_timeout"
	ReasonMaxFixCycles   Reason = "max_fix_cycles"
	ReasonFeedbackFailed Reason = "feedback_failed"
	// ReasonAgentBudgetExhausted says the agent used up the wall time
	// PRLOOP_AGENT_BUDGET allows per PR, across runs and fix cycles.
	ReasonAgentBudgetExhausted Reason = "agent_budget_exhausted"
	ReasonReviewWorkflowFailed Reason = "review_workflow_failed"
	ReasonChecksFailed         Reason = "checks_failed"
	ReasonMergeConflict        Reason = "merge_conflict"
	// ReasonNotMergeable says GitHub would not merge the PR for a reason
	// other than checks or conflicts (a draft, a refused merge).
	ReasonNotMergeable Reason = "not_mergeable"
	// ReasonNotApproved says the merger read the PR's review signals on
	// GitHub and found no approval of the head a PRReviewApproved named:
	// the event was forged, replayed or overtaken. The PR is not queued.
	ReasonNotApproved Reason = "not_approved"
	// ReasonApprovalWithdrawn says a queued PR's approval no longer stands
	// on GitHub (a 👍 removed, a review dismissed, changes requested). The
	// PR left the queue; a fresh approval queues it again.
	ReasonApprovalWithdrawn Reason = "approval_withdrawn"
	// ReasonStaleApproval says a queued PR's head moved to a commit nobody
	// approved and prloop did not make, or the PR was retargeted to another
	// base; the poller reports the new status, and a new approval queues
	// it again.
	ReasonStaleApproval Reason = "stale_approval"
	// ReasonClosed says a queued PR was closed without being merged.
	ReasonClosed Reason = "closed"
	// ReasonUntestedMerge says the merger merged a PR and main's tree
	// afterwards was not the tree CI tested (the speculative queue's
	// candidate, or in the serial queue the head itself): someone pushed
	// to the base between the check and the merge, or GitHub merged
	// differently. The change landed, untested as a whole.
	ReasonUntestedMerge Reason = "untested_merge"
	// ReasonCandidateFailed says the speculative queue removed a PR whose
	// own head is green because its candidate (the PR on top of the
	// current base and the PRs ahead of it) failed while the one before it
	// passed: the PR does not pass on the base it would land on.
	// PRMergeFailed carries the candidate's failing checks, and the
	// feedback service hands them to the agent (bring the base in, then
	// fix) instead of a human being asked.
	ReasonCandidateFailed Reason = "candidate_failed"
	// ReasonDequeued says someone who may approve the PR took it out of
	// its queue with "/prloop dequeue" or "/prloop stop"; "/prloop queue"
	// and a standing approval put it back.
	ReasonDequeued Reason = "dequeued"
)

// Severity says how urgently a human is needed.
type Severity string

// Severity levels, carried from the escalation request to the escalation.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityBlocking Severity = "blocking"
)

// Data is the typed payload of one event type.
type Data interface {
	// EventType is the CloudEvent type this payload belongs to.
	EventType() Type
	// Ref is the pull request the event is about.
	Ref() ghref.PR
}

// Base holds the fields every event's data carries.
type Base struct {
	PR      ghref.PR `json:"pr"`
	HeadSHA string   `json:"head_sha,omitempty"`
	// Title is the PR's title as the publisher last read it from GitHub
	// (the poller's review statuses carry it), cleaned by CleanTitle. It
	// is whatever the PR's author wrote: show it escaped, never act on it.
	Title string `json:"title,omitempty"`
	// PolicyWarning says which of the repository's .github/prloop.yml
	// values the operator's ceilings cut ("ceiling: merge.method=merge"),
	// as the poller's review statuses carry it for the status line.
	PolicyWarning string `json:"policy_warning,omitempty"`
	// MaxFixCycles is the PR's max_fix_cycles when its base's
	// .github/prloop.yml sets it (nil: the operator's
	// PRLOOP_MAX_FIX_CYCLES), as the poller's review statuses carry it
	// for the status line's "cycle 1 of 3".
	MaxFixCycles *int `json:"max_fix_cycles,omitempty"`
}

// MaxTitle bounds a title in an event, in runes.
const MaxTitle = 256

// CleanTitle makes a PR title fit for an event: control and format
// characters (newlines, bidi overrides, zero-width marks) become spaces,
// runs of spaces one, and it is cut to MaxTitle runes.
func CleanTitle(s string) string {
	var b strings.Builder
	n, space := 0, false
	for _, r := range s {
		if n == MaxTitle {
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) || r == utf8.RuneError {
			space = b.Len() > 0
			continue
		}
		if space {
			// A space needs a rune after it, or the cut would leave it
			// trailing (and cleaning the title again would change it).
			if n+1 == MaxTitle {
				break
			}
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// Ref returns the pull request the event is about.
func (b Base) Ref() ghref.PR { return b.PR }

// Head returns the head commit the event is about (empty for commands).
func (b Base) Head() string { return b.HeadSHA }

// PRTitle returns the PR's title the event carries (often none).
func (b Base) PRTitle() string { return b.Title }

// PolicyWarningOf returns the policy warning the event carries.
func (b Base) PolicyWarningOf() string { return b.PolicyWarning }

// MaxFixCyclesOf returns the PR's fix limit the event carries, if any.
func (b Base) MaxFixCyclesOf() *int { return b.MaxFixCycles }

// CreateRequestedNumber is the PR number of PRCreateRequested, a command
// about a pull request that does not exist yet: its subject is
// pr.<owner>.<repo>.0.PRCreateRequested, so that it travels with the
// repository's events ('pr.acme.widgets.>'). No other event has number 0.
const CreateRequestedNumber = 0

// MaxBody bounds a PR body prloop writes when it opens a pull request, in
// bytes.
const MaxBody = 8 << 10

// CheckRef reports whether pr is what an event of type t may be about: a
// pull request (a positive number), or for PRCreateRequested and the
// other RepoLevel types the repository with number 0.
func CheckRef(pr ghref.PR, t Type) error {
	if !RepoLevel(t) {
		return pr.Validate()
	}
	if err := pr.RepoRef().Validate(); err != nil {
		return err
	}
	if pr.Number != RepoNumber {
		return fmt.Errorf("%w: %s is about a repository, not a PR: number %d, want %d", ghref.ErrInvalid, t, pr.Number, RepoNumber)
	}
	return nil
}

// CreateRequested is a command: push Branch from the worktree and open a
// pull request for it into BaseBranch, then watch it. PR names the
// repository with number 0 (CreateRequestedNumber); HeadSHA is the
// branch's head as the requester read it in the worktree, for the event
// id and for people: the feedback service trusts only what its mirror
// takes in. Title (in Base, cleaned by CleanTitle) and Body may be empty:
// then the last commit's subject and body are used.
type CreateRequested struct {
	Base
	// Worktree is the local checkout holding the branch (the coding
	// agent's): prloop takes the branch's commits from it, and the
	// feedback step may work there later.
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
	// BaseBranch is the branch to merge into; empty means the
	// repository's default branch.
	BaseBranch string   `json:"base,omitempty"`
	Body       string   `json:"body,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	Draft      bool     `json:"draft,omitempty"`
	// ContextPath names spec or plan material for the agent's prompt, as
	// in PRWatchRequested.
	ContextPath string `json:"context_path,omitempty"`
	Actor       string `json:"actor,omitempty"`
}

// Created says prloop pushed a branch and opened its pull request (or
// found it already open, Existing): watching begins, as for
// PRWatchRequested. HeadSHA is the head prloop pushed, Title the PR's.
type Created struct {
	Base
	BaseBranch  string `json:"base"`
	Branch      string `json:"branch"`
	Worktree    string `json:"worktree,omitempty"`
	ContextPath string `json:"context_path,omitempty"`
	Actor       string `json:"actor,omitempty"`
	// Existing says the PR was open already (a repeated request).
	Existing bool `json:"existing,omitempty"`
}

// WatchRequested is a command: start watching a PR.
type WatchRequested struct {
	Base
	// Worktree is a local checkout of the PR branch the feedback step may reuse.
	Worktree string `json:"worktree,omitempty"`
	// ContextPath names spec or plan material (e.g. a .specify/ folder) for the agent's prompt.
	ContextPath string `json:"context_path,omitempty"`
	Actor       string `json:"actor,omitempty"`
}

// ReviewPending says the PR is watched and no review signal counts yet.
type ReviewPending struct {
	Base
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
	// MissingReviewers are the quorum's bots that have not responded on
	// the head (quorum protocol only).
	MissingReviewers []string `json:"missing_reviewers,omitempty"`
}

// ReviewInProgress says an authorized reviewer signalled "in review", or
// some of the quorum's bots responded on the head. With a quorum it is
// published again whenever another bot responds.
type ReviewInProgress struct {
	Base
	Status Status `json:"status"`
	Actor  string `json:"actor,omitempty"`
	// QuorumResponded and MissingReviewers are the quorum's bots that have
	// and have not responded on the head (quorum protocol only).
	QuorumResponded  []string `json:"quorum_responded,omitempty"`
	MissingReviewers []string `json:"missing_reviewers,omitempty"`
	// IgnoredFindings are quorum bots' findings so far that request no
	// changes (see IgnoredFinding).
	IgnoredFindings []IgnoredFinding `json:"ignored_findings,omitempty"`
}

// IgnoredFinding is a quorum bot's finding that the review policy found
// not actionable (a nit, a style remark, a "consider …" without a concrete
// change; PRLOOP_FINDING_IGNORE): it requests no changes and is listed so
// that people see what was set aside.
type IgnoredFinding struct {
	Author string `json:"author"`
	// Location is "path:line" for an inline finding.
	Location string `json:"location,omitempty"`
	URL      string `json:"url,omitempty"`
	// Reason names the rule or pattern that set it aside, never the bot's
	// own text.
	Reason string `json:"reason"`
}

// MaxIgnoredFindings bounds the ignored findings one event lists.
const MaxIgnoredFindings = 50

// FeedbackReceived says changes were requested on HeadSHA.
type FeedbackReceived struct {
	Base
	Status     Status   `json:"status"`
	FixCycle   int      `json:"fix_cycle"`
	CommentIDs []int64  `json:"comment_ids,omitempty"`
	ReviewIDs  []int64  `json:"review_ids,omitempty"`
	Actor      string   `json:"actor,omitempty"`
	Reviewers  []string `json:"reviewers,omitempty"`
	// Epoch is the PR's escalation epoch (see "Event ids"): the feedback
	// service's escalation request for this change request carries it.
	Epoch int `json:"epoch,omitempty"`
	// Worktree and ContextPath are the watch request's, as the poller
	// recorded them: the feedback service works there and reads the spec
	// from there, without reading anyone's records.
	Worktree    string `json:"worktree,omitempty"`
	ContextPath string `json:"context_path,omitempty"`
	// Anchor is when HeadSHA became the head as far as the poller knows,
	// and AddressedItems the keys (review.ItemKey) of feedback earlier fixes
	// addressed: the feedback service gathers the feedback on the head as
	// the poller judged it (older signals and addressed items do not
	// count). A zero Anchor means unknown, and then nothing is addressed.
	Anchor         time.Time `json:"anchor,omitempty"`
	AddressedItems []string  `json:"addressed_items,omitempty"`
	// IgnoredFindings are quorum bots' findings on the head that request
	// no changes: the fix leaves them out.
	IgnoredFindings []IgnoredFinding `json:"ignored_findings,omitempty"`
	// FailedChecks are gating checks that failed on the head when the
	// change request was published: the agent addresses both in one run
	// (see PRChecksFailed).
	FailedChecks []FailedCheck `json:"failed_checks,omitempty"`
	// CommandID is the "/prloop fix" comment that made this change
	// request (docs/commands.md), 0 when the reviewers' signals did: the
	// feedback service checks it on GitHub and then gathers what the
	// command asks for (review.FixItems), even where the protocols would
	// not have asked.
	CommandID int64 `json:"command_id,omitempty"`
}

// FeedbackAddressed says a fix was pushed; HeadSHA is the new head.
type FeedbackAddressed struct {
	Base
	PreviousHeadSHA string `json:"previous_head_sha"`
	FixCycle        int    `json:"fix_cycle"`
	// PushedAt is when prloop pushed the fix: review signals older than it
	// do not count on the new head.
	PushedAt time.Time `json:"pushed_at,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	// Agent summarises the agent's run that made the fix (a preset's).
	Agent *AgentRunSummary `json:"agent,omitempty"`
}

// FeedbackSkipped says the feedback service ended its handling of the
// change request on HeadSHA without pushing a fix and without calling a
// human: the head moved, the PR was closed or carries the escalation label,
// or no feedback was left to address. It tells the poller that nobody is
// working on that head any more, so that it publishes the PR's next status.
type FeedbackSkipped struct {
	Base
	FixCycle int    `json:"fix_cycle"`
	Actor    string `json:"actor,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// ReviewApproved says HeadSHA was approved.
type ReviewApproved struct {
	Base
	Status    Status   `json:"status"`
	Actor     string   `json:"actor,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
	// Anchor is when HeadSHA became the head as far as the poller knows:
	// review signals older than it did not count for the approval, and do
	// not count when the merger verifies it on GitHub. Zero means unknown,
	// and then no comment counts.
	Anchor time.Time `json:"anchor,omitempty"`
	// BaseBranch is the base the approval is for: an approval is for a
	// head on a base, and the merger refuses to merge the PR into any
	// other. Empty when unknown (a poller from before it was sent).
	BaseBranch string `json:"base,omitempty"`
	// BaseSince is when the poller saw the PR retargeted to BaseBranch
	// (zero: not retargeted while watched): approvals older than it did
	// not count, and do not count when the merger verifies the approval.
	BaseSince time.Time `json:"base_since,omitzero"`
	// Epoch is the PR's escalation epoch; a merge failure that needs a
	// human carries it on to the escalator.
	Epoch int `json:"epoch,omitempty"`
	// FixCycle is the poller's count of the fixes prloop pushed to the PR:
	// the merger hands it on in PRConflictResolveRequested, since a
	// resolved conflict is a fix cycle too.
	FixCycle int `json:"fix_cycle,omitempty"`
	// IgnoredFindings are quorum bots' findings on the head that did not
	// stand in the way of the approval.
	IgnoredFindings []IgnoredFinding `json:"ignored_findings,omitempty"`
}

// ReviewTimeout says no approval arrived within the review timeout.
type ReviewTimeout struct {
	Base
	Reason           Reason   `json:"reason"`
	MissingReviewers []string `json:"missing_reviewers,omitempty"`
	Detail           string   `json:"detail,omitempty"`
	// Epoch is the PR's escalation epoch the timeout belongs to.
	Epoch int `json:"epoch,omitempty"`
}

// MergeQueued says the PR entered its base branch's merge queue.
type MergeQueued struct {
	Base
	// Position is the PR's place in its base branch's queue, first come
	// first served: 1 is being merged or next, 2 has one PR ahead of it.
	Position   int    `json:"position"`
	BaseBranch string `json:"base,omitempty"`
	// Mode is the queue's mode, "serial" or "speculative"
	// (PRLOOP_QUEUE_MODE); empty means serial.
	Mode string `json:"mode,omitempty"`
	// Ahead lists the PR numbers queued ahead of this one, first come
	// first: in speculative mode the first PRLOOP_QUEUE_DEPTH of the queue
	// are tested together, so these are the PRs whose changes the PR's
	// candidate will include (its batch).
	Ahead []int `json:"ahead,omitempty"`
	// Priority says the PR carries the priority label (PRLOOP_PRIORITY_LABEL
	// or the base's merge.priority_label): it goes ahead of every PR
	// without it, after those already riding in candidates. The merger
	// publishes PRMergeQueued again when the label is added or removed
	// while the PR is queued.
	Priority bool `json:"priority,omitempty"`
	// ETA is the merger's estimate of when the PR merges, as it queued
	// it; absent from a merger that does not estimate.
	ETA *QueueETA `json:"eta,omitempty"`
}

// QueueETA is the merger's estimate of how long a queued PR waits until
// it merges (docs/queue.md, ETA): its Position, the batch it rides in
// (Depth PRs are tested at once; 1 in a serial queue) and the median CI
// time measured on its base, one CI run per batch up to its own
// (pkg/eta's Estimate). With fewer than three measurements it is unknown:
// Known is false and Seconds 0.
type QueueETA struct {
	Known   bool    `json:"known"`
	Seconds float64 `json:"seconds,omitempty"`
	// CIMedianSeconds is the median CI time the estimate is made from,
	// over the base's latest Measurements runs (candidates in a
	// speculative queue, else the heads prloop pushed).
	CIMedianSeconds float64 `json:"ci_median_seconds,omitempty"`
	Measurements    int     `json:"measurements"`
	Depth           int     `json:"depth"`
}

// Candidate states carried by MergeCandidate.
const (
	// CandidateBuilt: the candidate commit is pushed and CI runs on it.
	CandidateBuilt = "built"
	// CandidateInvalidated: the candidate no longer stands for what would
	// be merged (the base moved, a PR ahead left or changed); it is not
	// merged, and a new one is built.
	CandidateInvalidated = "invalidated"
	// CandidateRerun: the candidate failed, and its failed GitHub Actions
	// jobs are re-run once (PRLOOP_QUEUE_RETRY_FAILED) before its PR is
	// removed; Detail names them. It still stands.
	CandidateRerun = "rerun"
)

// MergeCandidate says the speculative queue built, or gave up, the
// candidate commit the PR rides in: the exact result of merging, onto
// BaseSHA, the PRs Ahead and then this PR at HeadSHA, pushed as Branch so
// that CI tests it. Only a green candidate's PRs are merged, and main's
// tree after each merge is checked to equal the candidate's.
type MergeCandidate struct {
	Base
	BaseBranch string `json:"base,omitempty"`
	// State is CandidateBuilt, CandidateInvalidated or CandidateRerun.
	State string `json:"state"`
	// Candidate is the candidate commit; Tree its tree; Branch the
	// prloop-owned branch it was pushed as (prloop/queue/<base>/<n>).
	Candidate string `json:"candidate"`
	Tree      string `json:"tree,omitempty"`
	Branch    string `json:"branch,omitempty"`
	// BaseSHA is the base branch's tip the candidate starts from.
	BaseSHA string `json:"base_sha,omitempty"`
	// Position is the candidate's place in the batch (1 is the base tip
	// plus the first PR); Ahead are the PRs merged into it before this
	// one, in order. Both are as built: a candidate stacked on a proven
	// batch before that batch merged (so that its CI runs meanwhile) is
	// kept afterwards, and its Ahead still names the PRs merged since.
	Position int   `json:"position"`
	Ahead    []int `json:"ahead,omitempty"`
	// Detail says why a candidate was invalidated.
	Detail string `json:"detail,omitempty"`
}

// ConflictResolveRequested is a command from the merger to the feedback
// service (PRLOOP_RESOLVE_CONFLICTS): HeadSHA conflicts with BaseSHA, the
// tip of BaseBranch; hand the agent the merge of the base into the head,
// conflict markers and all, verify its resolution and push it. The PR
// left the merge queue; the resolved head needs review again. The feedback
// service answers with PRFeedbackAddressed (the resolution is a fix cycle)
// or, when the agent does not resolve it, PREscalationRequested with
// reason merge_conflict.
type ConflictResolveRequested struct {
	Base
	BaseBranch string `json:"base"`
	BaseSHA    string `json:"base_sha"`
	Detail     string `json:"detail,omitempty"`
	// Epoch is the PR's escalation epoch, carried on to an escalation.
	Epoch int `json:"epoch,omitempty"`
	// FixCycle is the fixes prloop pushed to the PR before, as the
	// approval said (PRReviewApproved's fix_cycle): the resolution is
	// the next, bounded by PRLOOP_MAX_FIX_CYCLES.
	FixCycle int `json:"fix_cycle,omitempty"`
}

// MergeWaiting says the first PR of a merge queue waits for checks on its
// head before the merger merges it: the checks that have not passed yet,
// by name. Published when that set changes; empty once none is left.
type MergeWaiting struct {
	Base
	BaseBranch string   `json:"base,omitempty"`
	Checks     []string `json:"checks"`
}

// Merged says prloop merged the PR.
type Merged struct {
	Base
	MergeSHA    string `json:"merge_sha"`
	MergeMethod string `json:"merge_method,omitempty"`
	Actor       string `json:"actor,omitempty"`
	// DryRun says prloop only would have merged (PRLOOP_DRY_RUN): nothing
	// changed on GitHub and MergeSHA is empty.
	DryRun bool `json:"dry_run,omitempty"`
}

// MergeFailed says prloop gave up merging the PR.
type MergeFailed struct {
	Base
	Reason Reason `json:"reason"`
	Detail string `json:"detail,omitempty"`
	// DryRun says this is what prloop would have done (PRLOOP_DRY_RUN); no
	// escalation was requested.
	DryRun bool `json:"dry_run,omitempty"`
	// Checks are, for reason candidate_failed, the failing checks of the
	// candidate, which the feedback service hands to the agent.
	Checks []FailedCheck `json:"checks,omitempty"`
	// Candidate is, for candidate_failed, the candidate commit that failed.
	Candidate string `json:"candidate,omitempty"`
	// BaseBranch and BaseSHA are, for candidate_failed, the base branch
	// and its tip when the PR was removed.
	BaseBranch string `json:"base,omitempty"`
	BaseSHA    string `json:"base_sha,omitempty"`
	// Epoch is, for candidate_failed, the PR's escalation epoch, carried
	// on to an escalation.
	Epoch int `json:"epoch,omitempty"`
	// FixCycle is, for candidate_failed, the fixes prloop pushed to the PR
	// before, as the approval said: the agent's fix is the next, bounded
	// like every CI fix.
	FixCycle int `json:"fix_cycle,omitempty"`
}

// Closed says the PR was closed, or merged outside prloop; watching stops.
type Closed struct {
	Base
	Merged bool   `json:"merged"`
	Actor  string `json:"actor,omitempty"`
}

// EscalationRequested asks the escalator to bring in a human.
type EscalationRequested struct {
	Base
	Reason              Reason   `json:"reason"`
	Severity            Severity `json:"severity"`
	FixCycle            int      `json:"fix_cycle,omitempty"`
	Detail              string   `json:"detail,omitempty"`
	LastError           string   `json:"last_error,omitempty"`
	MissingReviewers    []string `json:"missing_reviewers,omitempty"`
	HumanReviewRequired bool     `json:"human_review_required,omitempty"`
	Actor               string   `json:"actor,omitempty"`
	// Epoch is the PR's escalation epoch the request belongs to, from the
	// event it follows from: the escalator ignores a request of an epoch a
	// human already resolved (PREscalationResolved).
	Epoch int `json:"epoch,omitempty"`
	// Agent summarises the agent's last run, when a preset ran it.
	Agent *AgentRunSummary `json:"agent,omitempty"`
}

// ActionLabel is the action in Escalated.Actions that says the escalation
// label was applied.
const ActionLabel = "label"

// Escalated says a human was called, and how.
type Escalated struct {
	Base
	Reason   Reason   `json:"reason"`
	Severity Severity `json:"severity"`
	Actions  []string `json:"actions"`
	Detail   string   `json:"detail,omitempty"`
	// Epoch is the PR's escalation epoch the escalation belongs to: how
	// many escalations a human had resolved before it (see "Event ids").
	Epoch int `json:"epoch,omitempty"`
}

// EscalationResolved says a human resolved the PR's escalation by removing
// the escalation label: the loop resumes in the new escalation Epoch, with
// the fix cycle back at 0. Requests of older epochs are old news.
type EscalationResolved struct {
	Base
	// Epoch is the new escalation epoch: the escalations resolved so far.
	Epoch  int    `json:"epoch"`
	Detail string `json:"detail,omitempty"`
}

// BranchUpdated says the merger brought the approved head PreviousHeadSHA
// up to date with its base itself (Method "update-branch" or "rebase"),
// which made HeadSHA: the approval carries over to it, since prloop made
// the change and no one else pushed.
type BranchUpdated struct {
	Base
	PreviousHeadSHA string `json:"previous_head_sha"`
	Method          string `json:"method,omitempty"`
}
