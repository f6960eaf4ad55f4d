package prstatus_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

var (
	pr1  = ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	pr2  = ghref.PR{Owner: "acme", Repo: "widgets", Number: 2}
	pr3  = ghref.PR{Owner: "acme", Repo: "gadgets", Number: 3}
	opts = prstatus.Options{MaxFixCycles: 2, Label: "human-review-required"}
)

const (
	headA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	headB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	cand  = "c0ffee1c0ffee1c0ffee1c0ffee1c0ffee1c0ff"
	cand2 = "c0ffee2c0ffee2c0ffee2c0ffee2c0ffee2c0ff"
	tip   = "ba5e123ba5e123ba5e123ba5e123ba5e123ba5e"
)

func base(pr ghref.PR, head string) events.Base { return events.Base{PR: pr, HeadSHA: head} }

// dayWait is the feedback service's PRAgentWaiting on pr1's headA for the
// day's agent budget, in state.
func dayWait(state string) *events.AgentWaiting {
	return &events.AgentWaiting{Base: base(pr1, headA), State: state, Reason: events.AgentWaitDailyBudget,
		SpentUSD: 10.3712, BudgetUSD: 10, ResumeAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
}

func TestLine_EveryTrigger(t *testing.T) {
	t.Parallel()
	approved := &events.ReviewApproved{Base: base(pr1, headA), Status: events.StatusApproved, Approvers: []string{"alice"}}
	queued := &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main"}
	// The speculative queue: pr1 queued behind #41, riding in candidate 2.
	pr41, pr42 := pr1.RepoRef().PR(41), pr1.RepoRef().PR(42)
	specQueued := &events.MergeQueued{Base: base(pr1, headA), Position: 2, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41}}
	built := &events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateBuilt, Candidate: cand,
		Branch: "prloop/queue/main/2", BaseSHA: tip, Position: 2, Ahead: []int{41}}
	invalidated := &events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateInvalidated, Candidate: cand,
		Branch: "prloop/queue/main/2", BaseSHA: tip, Position: 2, Ahead: []int{41}, Detail: "main moved to 0d15ea5"}
	riding := "in the merge queue of main, rides in candidate 2 (with #41 ahead) on prloop/queue/main/2 at c0ffee1: "
	conflict := &events.ConflictResolveRequested{Base: base(pr1, headA), BaseBranch: "main", BaseSHA: tip, Detail: "both modified a.go", Epoch: 1}
	prioQueued := &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", Priority: true}
	repo0 := events.Base{PR: pr1.RepoRef().PR(events.RepoNumber)}
	freezeAsked := &events.QueueFreezeRequested{Base: repo0, BaseBranch: "main", Reason: "release 2.0"}
	frozen := &events.QueueFrozen{Base: repo0, BaseBranch: "main", Reason: "release 2.0"}
	tests := []struct {
		name   string
		events []events.Data
		want   prstatus.Line
	}{
		{name: "no event", want: prstatus.Line{State: prstatus.Pending, Text: "not watched by prloop"}},
		{name: "watched", events: []events.Data{&events.WatchRequested{Base: base(pr1, "")}},
			want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "opened by prloop", events: []events.Data{
			&events.CreateRequested{Base: base(ghref.PR{Owner: "acme", Repo: "widgets"}, headA), Worktree: "/w", Branch: "feature/x"},
			&events.Created{Base: base(pr1, headA), Branch: "feature/x", BaseBranch: "main"},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "pending", events: []events.Data{&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending}},
			want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "invalid policy file on the base", events: []events.Data{&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending,
			Detail: `.github/prloop.yml:4: unknown key "reviwers" (did you mean "reviewers"?)`}},
			want: prstatus.Line{State: prstatus.Error, Text: `.github/prloop.yml:4: unknown key "reviwers" (did you mean "reviewers"?)`}},
		{name: "policy file fixed", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending, Detail: `.github/prloop.yml:4: unknown key "reviwers"`},
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "a change of the policy file waits for a person", events: []events.Data{&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending,
			Detail: "waiting for a human approval: this PR changes .github/prloop.yml"}},
			want: prstatus.Line{State: prstatus.Pending, Text: "waiting for a human approval: this PR changes .github/prloop.yml"}},
		{name: "a ceiling cut the policy file", events: []events.Data{
			&events.ReviewApproved{Base: events.Base{PR: pr1, HeadSHA: headA, PolicyWarning: "ceiling: merge.method=merge"}, Status: events.StatusApproved, Approvers: []string{"alice"}},
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by alice (ceiling: merge.method=merge)"}},
		{name: "a later status without the cut drops the warning", events: []events.Data{
			&events.ReviewPending{Base: events.Base{PR: pr1, HeadSHA: headA, PolicyWarning: "ceiling: merge.method=merge"}, Status: events.StatusPending},
			approved,
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "approved after the hold", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending, Detail: "waiting for a human approval: this PR changes .github/prloop.yml"},
			approved,
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "reviewing", events: []events.Data{&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "alice"}},
			want: prstatus.Line{State: prstatus.Pending, Text: "👀 alice is reviewing"}},
		{name: "changes requested, agent fixing", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice — agent fixing (cycle 1 of 2)"}},
		{name: "the base's policy file sets the fix limit", events: []events.Data{
			&events.FeedbackReceived{Base: events.Base{PR: pr1, HeadSHA: headA, MaxFixCycles: ptr(4)}, Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice — agent fixing (cycle 1 of 4)"}},
		{name: "the policy's fix limit holds for failing checks", events: []events.Data{
			&events.ReviewPending{Base: events.Base{PR: pr1, HeadSHA: headA, MaxFixCycles: ptr(1)}, Status: events.StatusPending},
			&events.ChecksFailed{Base: base(pr1, headA), Round: 2, Checks: []events.FailedCheck{{Name: "test"}}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "agent fixing failing checks: test (cycle 1 of 1)"}},
		{name: "a later status without a file's limit is the operator's again", events: []events.Data{
			&events.ReviewPending{Base: events.Base{PR: pr1, HeadSHA: headA, MaxFixCycles: ptr(4)}, Status: events.StatusPending},
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice — agent fixing (cycle 1 of 2)"}},
		{name: "second cycle", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Actor: "bob", FixCycle: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by bob — agent fixing (cycle 2 of 2)"}},
		{name: "the agent waits for the day's budget", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			dayWait(events.AgentWaitStarted),
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting: the agents' daily budget ($10.37 of $10.00) is spent; resumes at 00:00 UTC"}},
		{name: "the wait is over when the run starts", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			dayWait(events.AgentWaitStarted), dayWait(events.AgentWaitEnded),
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice — agent fixing (cycle 1 of 2)"}},
		{name: "a new head ends the wait", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			dayWait(events.AgentWaitStarted),
			&events.ReviewPending{Base: base(pr1, headB), Status: events.StatusPending},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "an escalation ends the wait", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			dayWait(events.AgentWaitStarted),
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonAgentBudgetExhausted},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: agent budget exhausted (label human-review-required)"}},
		{name: "failing checks handed to the agent", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending},
			&events.ChecksFailed{Base: base(pr1, headA), Round: 2, Checks: []events.FailedCheck{{Name: "test"}, {Name: "lint\nx"}}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "agent fixing failing checks: test, lint x (cycle 1 of 2)"}},
		{name: "failing checks re-run", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending},
			&events.ChecksFailed{Base: base(pr1, headA), Round: 1, Checks: []events.FailedCheck{{Name: "test"}}},
			&events.FeedbackSkipped{Base: base(pr1, headA), Detail: "re-running"},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "failing checks fixed: review again", events: []events.Data{
			&events.ChecksFailed{Base: base(pr1, headA), Round: 2, Checks: []events.FailedCheck{{Name: "test"}}},
			&events.FeedbackAddressed{Base: base(pr1, headB), PreviousHeadSHA: headA, FixCycle: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "conflict handed to the agent", events: []events.Data{
			approved, queued,
			&events.ConflictResolveRequested{Base: base(pr1, headA), BaseBranch: "main", BaseSHA: headB},
			&events.MergeFailed{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "conflicts with main at bbbbbbb — agent resolving (cycle 1 of 2)"}},
		{name: "conflict resolved: review again", events: []events.Data{
			approved, queued,
			&events.ConflictResolveRequested{Base: base(pr1, headA), BaseBranch: "main", BaseSHA: headB},
			&events.FeedbackAddressed{Base: base(pr1, headB), PreviousHeadSHA: headA, FixCycle: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "conflict the agent could not resolve", events: []events.Data{
			approved, queued,
			&events.ConflictResolveRequested{Base: base(pr1, headA), BaseBranch: "main", BaseSHA: headB},
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: merge conflict (label human-review-required)"}},
		{name: "fix pushed: review again", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			&events.FeedbackAddressed{Base: base(pr1, headB), PreviousHeadSHA: headA, FixCycle: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "change request skipped", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}},
			&events.FeedbackSkipped{Base: base(pr1, headA)},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice"}},
		{name: "approved, not queued", events: []events.Data{approved},
			want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "approved and first in the queue", events: []events.Data{approved, queued},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "second in the queue", events: []events.Data{
			&events.MergeQueued{Base: base(pr2, headB), Position: 1, BaseBranch: "main"}, approved, queued,
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 2nd in the merge queue for main"}},
		{name: "moves up when the one ahead merges", events: []events.Data{
			&events.MergeQueued{Base: base(pr2, headB), Position: 1, BaseBranch: "main"}, approved, queued,
			&events.Merged{Base: base(pr2, headB), MergeSHA: headB},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "other repositories' queues do not count", events: []events.Data{
			&events.MergeQueued{Base: base(pr3, headB), Position: 1, BaseBranch: "main"}, approved, queued,
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "waiting for checks", events: []events.Data{approved, queued,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — waiting for checks: ci/build, lint"}},
		{name: "left the queue", events: []events.Data{approved, queued,
			&events.MergeFailed{Base: base(pr1, headA), Reason: events.ReasonApprovalWithdrawn},
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "escalated", events: []events.Data{approved, queued,
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
			&events.MergeFailed{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
			&events.Escalated{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: merge conflict (label human-review-required)"}},
		{name: "escalation resolved: the loop resumes", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}, FixCycle: 2},
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonMaxFixCycles},
			&events.Escalated{Base: base(pr1, headA), Reason: events.ReasonMaxFixCycles},
			&events.EscalationResolved{Base: base(pr1, headA), Epoch: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by alice"}},
		{name: "the merger's branch update keeps the approval", events: []events.Data{approved, queued,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build"}},
			&events.BranchUpdated{Base: base(pr1, headB), PreviousHeadSHA: headA, Method: "update-branch"},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "review timeout", events: []events.Data{
			&events.ReviewTimeout{Base: base(pr1, headA), Reason: events.ReasonReviewTimeout},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: review timeout (label human-review-required)"}},
		{name: "a new review status clears the escalation", events: []events.Data{
			&events.Escalated{Base: base(pr1, headA), Reason: events.ReasonReviewTimeout},
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "carol"},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "👀 carol is reviewing"}},
		{name: "quorum incomplete: who is still missing", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending, MissingReviewers: []string{"coderabbitai[bot]", "copilot", "gemini"}},
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "coderabbitai[bot]",
				QuorumResponded: []string{"coderabbitai[bot]"}, MissingReviewers: []string{"copilot", "gemini"}},
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "coderabbitai[bot]",
				QuorumResponded: []string{"coderabbitai[bot]", "copilot"}, MissingReviewers: []string{"gemini"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "2 of 3 bot reviews: waiting for gemini"}},
		{name: "quorum not started", events: []events.Data{
			&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending, MissingReviewers: []string{"copilot", "gemini"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "0 of 2 bot reviews: waiting for copilot, gemini"}},
		{name: "a human's eyes beside an incomplete quorum", events: []events.Data{
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "alice", MissingReviewers: []string{"gemini"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "👀 alice is reviewing; 0 of 1 bot reviews: waiting for gemini"}},
		{name: "another bot's response keeps the escalation", events: []events.Data{
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "copilot",
				QuorumResponded: []string{"copilot"}, MissingReviewers: []string{"gemini", "openai"}},
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonReviewWorkflowFailed},
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "copilot",
				QuorumResponded: []string{"copilot", "openai"}, MissingReviewers: []string{"gemini"}},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: review workflow failed (label human-review-required)"}},
		{name: "approved with nits set aside", events: []events.Data{
			&events.ReviewApproved{Base: base(pr1, headA), Status: events.StatusApproved, Approvers: []string{"copilot", "gemini"},
				IgnoredFindings: []events.IgnoredFinding{{Author: "gemini", Location: "main.go:3", Reason: "nit"}, {Author: "gemini", Reason: "nit"}}},
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by copilot, gemini; 2 bot findings set aside"}},
		{name: "fixing a bug, a nit set aside", events: []events.Data{
			&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: []string{"copilot"},
				IgnoredFindings: []events.IgnoredFinding{{Author: "gemini", Reason: "nit"}}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "changes requested by copilot — agent fixing (cycle 1 of 2); 1 bot finding set aside"}},
		{name: "a new head forgets the quorum and the findings", events: []events.Data{
			&events.ReviewInProgress{Base: base(pr1, headA), Status: events.StatusInProgress, Actor: "copilot",
				QuorumResponded: []string{"copilot"}, MissingReviewers: []string{"gemini"}, IgnoredFindings: []events.IgnoredFinding{{Author: "copilot", Reason: "nit"}}},
			&events.ReviewApproved{Base: base(pr1, headB), Status: events.StatusApproved, Approvers: []string{"alice"}},
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "merged", events: []events.Data{approved, queued, &events.Merged{Base: base(pr1, headA), MergeSHA: "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2"}},
			want: prstatus.Line{State: prstatus.Success, Text: "merged as a1b2c3d"}},
		{name: "closed", events: []events.Data{approved, &events.Closed{Base: base(pr1, headA)}},
			want: prstatus.Line{State: prstatus.Pending, Text: "closed without merging"}},
		{name: "merged outside prloop", events: []events.Data{&events.Closed{Base: base(pr1, headA), Merged: true}},
			want: prstatus.Line{State: prstatus.Success, Text: "merged"}},
		{name: "a serial queue's Ahead does not change its place", events: []events.Data{approved,
			&events.MergeQueued{Base: base(pr1, headA), Position: 2, BaseBranch: "main", Mode: "serial", Ahead: []int{41}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "speculative: queued with its batch", events: []events.Data{approved,
			&events.MergeQueued{Base: base(pr1, headA), Position: 3, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41, 42}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "queued 3rd on main, tested together with #41, #42"}},
		{name: "speculative: first in line, tested alone", events: []events.Data{approved,
			&events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", Mode: prstatus.Speculative},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "queued 1st on main"}},
		{name: "speculative: a PR ahead that merged leaves the batch", events: []events.Data{
			&events.MergeQueued{Base: base(pr41, headB), Position: 1, BaseBranch: "main", Mode: prstatus.Speculative},
			&events.MergeQueued{Base: base(pr42, headB), Position: 2, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41}},
			approved,
			&events.MergeQueued{Base: base(pr1, headA), Position: 3, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41, 42}},
			&events.Merged{Base: base(pr41, headB), MergeSHA: headB},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "queued 2nd on main, tested together with #42"}},
		{name: "candidate built: CI running", events: []events.Data{approved, specQueued, built},
			want: prstatus.Line{State: prstatus.Pending, Text: riding + "CI running"}},
		{name: "candidate waits for checks", events: []events.Data{approved, specQueued, built,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: riding + "waiting for checks: ci/build, lint"}},
		{name: "checks named on the candidate are not a new head", events: []events.Data{approved, specQueued, built,
			&events.MergeWaiting{Base: base(pr1, cand), BaseBranch: "main", Checks: []string{"ci/build"}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: riding + "waiting for checks: ci/build"}},
		{name: "candidate green", events: []events.Data{approved, specQueued, built,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build"}},
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: riding + "checks passed, merging"}},
		{name: "candidate invalidated", events: []events.Data{approved, specQueued, built,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build"}}, invalidated,
		}, want: prstatus.Line{State: prstatus.Pending, Text: "in the merge queue of main, candidate c0ffee1 invalidated (main moved to 0d15ea5); a new one is being built"}},
		{name: "a new candidate after an invalidated one starts its CI afresh", events: []events.Data{approved, specQueued, built,
			&events.MergeWaiting{Base: base(pr1, headA), BaseBranch: "main", Checks: []string{"ci/build"}}, invalidated,
			&events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateBuilt, Candidate: cand2,
				Branch: "prloop/queue/main/1", BaseSHA: tip, Position: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "in the merge queue of main, rides in candidate 1 on prloop/queue/main/1 at c0ffee2: CI running"}},
		{name: "an invalidation's detail is cleaned", events: []events.Data{approved, specQueued,
			&events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateInvalidated, Candidate: cand,
				Detail: "check\n\x1b[2Jfailed\u202e"},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "in the merge queue of main, candidate c0ffee1 invalidated (check [2Jfailed); a new one is being built"}},
		{name: "a long branch gives way to the CI's progress", events: []events.Data{approved, specQueued,
			&events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateBuilt, Candidate: cand,
				Branch: "prloop/queue/main/" + strings.Repeat("x", 80), Position: 2, Ahead: []int{41}},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "in the merge queue of main, rides in candidate 2 (with #41 ahead) at c0ffee1: CI running"}},
		{name: "a candidate given up after the PR left the queue", events: []events.Data{approved, specQueued, built,
			&events.MergeFailed{Base: base(pr1, headA), Reason: events.ReasonApprovalWithdrawn}, invalidated,
		}, want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "the candidate leaves with the PR; queued again, none yet", events: []events.Data{approved, specQueued, built,
			&events.MergeFailed{Base: base(pr1, headA), Reason: events.ReasonChecksFailed}, specQueued,
		}, want: prstatus.Line{State: prstatus.Pending, Text: "queued 2nd on main, tested together with #41"}},
		{name: "conflict: the agent is resolving it", events: []events.Data{approved, specQueued, built, conflict},
			want: prstatus.Line{State: prstatus.Pending, Text: "conflicts with main at ba5e123 — agent resolving (cycle 1 of 2)"}},
		{name: "conflict resolved: review again", events: []events.Data{approved, queued, conflict,
			&events.FeedbackAddressed{Base: base(pr1, headB), PreviousHeadSHA: headA, FixCycle: 1},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "conflict the agent could not resolve", events: []events.Data{approved, queued, conflict,
			&events.EscalationRequested{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
			&events.Escalated{Base: base(pr1, headA), Reason: events.ReasonMergeConflict},
		}, want: prstatus.Line{State: prstatus.Error, Text: "needs a human: merge conflict (label human-review-required)"}},
		{name: "a push by the author ends the conflict", events: []events.Data{approved, queued, conflict,
			&events.ReviewPending{Base: base(pr1, headB), Status: events.StatusPending},
		}, want: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"}},
		{name: "priority", events: []events.Data{approved, prioQueued},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main (priority)"}},
		{name: "priority, speculative", events: []events.Data{approved, &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", Mode: prstatus.Speculative, Priority: true}},
			want: prstatus.Line{State: prstatus.Pending, Text: "queued 1st on main (priority)"}},
		{name: "the label removed while queued", events: []events.Data{approved, prioQueued, queued},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "asked to freeze: not frozen until the merger says so", events: []events.Data{approved, queued, freezeAsked},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "queue frozen", events: []events.Data{approved, queued, frozen},
			want: prstatus.Line{State: prstatus.Pending, Text: "queue frozen: release 2.0 — approved by alice — 1st in the merge queue for main"}},
		{name: "queue frozen before the PR joined it", events: []events.Data{frozen, approved, specQueued, built},
			want: prstatus.Line{State: prstatus.Pending, Text: "queue frozen: release 2.0 — in the merge queue of main, rides in candidate 2 (with #41 ahead) at c0ffee1: CI running"}},
		{name: "every base frozen, until a time", events: []events.Data{approved, queued,
			&events.QueueFrozen{Base: repo0, Reason: "incident", Until: time.Date(2026, 1, 2, 18, 0, 0, 0, time.UTC)}},
			want: prstatus.Line{State: prstatus.Pending, Text: "queue frozen: incident (until Jan 2 18:00 UTC) — approved by alice — 1st in the merge queue for main"}},
		{name: "another base frozen", events: []events.Data{approved, queued, &events.QueueFrozen{Base: repo0, BaseBranch: "release", Reason: "x"}},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "unfrozen", events: []events.Data{approved, queued, frozen, &events.QueueUnfrozen{Base: repo0, BaseBranch: "main", Detail: "lifted"}},
			want: prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
		{name: "a frozen queue says nothing of a PR not in it", events: []events.Data{frozen, approved},
			want: prstatus.Line{State: prstatus.Success, Text: "approved by alice"}},
		{name: "a /prloop command taken changes nothing by itself: its effect comes with the owner's events",
			events: []events.Data{approved, queued, &events.CommandReceived{Base: base(pr1, headA), Command: events.CommandExplain, CommentID: 7, Author: "alice"}},
			want:   prstatus.Line{State: prstatus.Pending, Text: "approved by alice — 1st in the merge queue for main"}},
	}
	covered := map[events.Type]bool{}
	for _, tc := range tests {
		for _, e := range tc.events {
			covered[e.EventType()] = true
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := prstatus.NewBoard()
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, e := range tc.events {
				b.Apply(e, at.Add(time.Duration(i)*time.Second))
			}
			assert.Equal(t, tc.want, b.Line(pr1, opts))
		})
	}
	for _, typ := range events.Types {
		assert.True(t, covered[typ], "no case applies a %s", typ)
	}
}

func TestLine_ClippedToWhatGitHubKeeps(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	many := make([]string, 40)
	for i := range many {
		many[i] = "réviewer" + strings.Repeat("x", i%3)
	}
	b.Apply(&events.FeedbackReceived{Base: base(pr1, headA), Status: events.StatusChangesRequested, Reviewers: many}, time.Now())
	l := b.Line(pr1, opts)
	assert.LessOrEqual(t, len(l.Text), prstatus.MaxText)
	assert.True(t, utf8.ValidString(l.Text))
	assert.True(t, strings.HasSuffix(l.Text, "…"))
}

func TestBoard_QueueInOrder(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	at := time.Now()
	b.Apply(&events.MergeQueued{Base: base(pr2, headB), BaseBranch: "main"}, at)
	b.Apply(&events.MergeQueued{Base: base(pr1, headA), BaseBranch: "main"}, at.Add(time.Second))
	b.Apply(&events.MergeQueued{Base: base(pr2, headB), BaseBranch: "main"}, at.Add(2*time.Second)) // a redelivery keeps its place
	q := b.Queue(pr1.RepoRef(), "main")
	require.Len(t, q, 2)
	assert.Equal(t, []ghref.PR{pr2, pr1}, []ghref.PR{q[0].PR, q[1].PR})
	assert.Equal(t, at, q[0].QueuedAt)
	assert.Equal(t, 2, b.Position(pr1))
	assert.Equal(t, events.TypeMergeQueued, b.Get(pr2).Last)
}

func TestBoard_KeepsTheURLALaterEventBrings(t *testing.T) {
	t.Parallel()
	withURL := pr1
	withURL.URL = "https://github.com/acme/widgets/pull/1"
	b := prstatus.NewBoard()
	b.Apply(&events.WatchRequested{Base: base(pr1, "")}, time.Now())
	assert.Empty(t, b.Get(pr1).PR.URL, "a watch request names no URL")
	b.Apply(&events.ReviewPending{Base: base(withURL, headA), Status: events.StatusPending}, time.Now())
	b.Apply(&events.MergeQueued{Base: base(pr1, headA), BaseBranch: "main"}, time.Now())
	assert.Equal(t, withURL.URL, b.Get(pr1).PR.URL, "the poller's URL is kept, an event without one does not clear it")
}

func TestBoard_KeepsTheTitleALaterEventBrings(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	b.Apply(&events.WatchRequested{Base: base(pr1, "")}, time.Now())
	assert.Empty(t, b.Get(pr1).Title, "a watch request names no title")
	b.Apply(&events.ReviewPending{Base: events.Base{PR: pr1, HeadSHA: headA, Title: "Add widgets"}, Status: events.StatusPending}, time.Now())
	b.Apply(&events.MergeQueued{Base: base(pr1, headA), BaseBranch: "main"}, time.Now())
	assert.Equal(t, "Add widgets", b.Get(pr1).Title, "an event without a title keeps the last one")
	b.Apply(&events.ReviewApproved{Base: events.Base{PR: pr1, HeadSHA: headA, Title: "Add gadgets"}, Status: events.StatusApproved}, time.Now())
	assert.Equal(t, "Add gadgets", b.Get(pr1).Title, "a renamed PR's new title")
}

// TestBoard_ForgetsClosedPRsAfterRetention: a closed PR leaves the board
// once its last event is older than the retention; an open PR stays
// however quiet it is.
func TestBoard_ForgetsClosedPRsAfterRetention(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.Apply(&events.ReviewPending{Base: base(pr1, headA), Status: events.StatusPending}, t0)
	b.Apply(&events.Merged{Base: base(pr1, headA), MergeSHA: headB}, t0)
	b.Apply(&events.Closed{Base: base(pr1, headA), Merged: true}, t0)
	b.Apply(&events.ReviewPending{Base: base(pr2, headB), Status: events.StatusPending}, t0)
	later := t0.Add(prstatus.Retain - time.Hour)
	for range 300 {
		b.Apply(&events.ReviewPending{Base: base(pr3, headB), Status: events.StatusPending}, later)
	}
	require.NotNil(t, b.Get(pr1), "within the retention")
	for range 300 {
		b.Apply(&events.ReviewPending{Base: base(pr3, headB), Status: events.StatusPending}, t0.Add(prstatus.Retain+time.Hour))
	}
	assert.Nil(t, b.Get(pr1), "the merged PR is forgotten")
	assert.NotNil(t, b.Get(pr2), "the open PR stays")
	assert.Equal(t, "not watched by prloop", b.Line(pr1, prstatus.Options{}).Text)
}

// TestBoard_SkipsRequestsToOpen: a request to open a PR is about the
// repository (number 0), not a PR: the board shows the PR once PRCreated
// names it.
func TestBoard_SkipsRequestsToOpen(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	repo := ghref.PR{Owner: "acme", Repo: "widgets"}
	b.Apply(&events.CreateRequested{Base: events.Base{PR: repo, Title: "Add x"}, Worktree: "/w", Branch: "x"}, time.Now())
	assert.Empty(t, b.PRs())
	b.Apply(&events.Created{Base: events.Base{PR: pr1, HeadSHA: headA, Title: "Add x"}, Branch: "x", BaseBranch: "main"}, time.Now())
	require.Len(t, b.PRs(), 1)
	assert.Equal(t, "Add x", b.Get(pr1).Title)
	assert.Equal(t, headA, b.Get(pr1).Head)
}

func ptr[T any](v T) *T { return &v }

func TestQueue_PriorityGoesAheadOfAllButTheWorkUnderWay(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	repo := pr1.RepoRef()
	q := func(n int, prio bool) *events.MergeQueued {
		return &events.MergeQueued{Base: base(repo.PR(n), headA), BaseBranch: "main", Priority: prio}
	}
	for i, e := range []events.Data{
		q(10, false), q(11, false), q(12, false), q(13, true), q(14, true),
		// 11's branch updated by the merger: its CI runs, it keeps its place.
		&events.BranchUpdated{Base: base(repo.PR(11), headB), PreviousHeadSHA: headA},
		// 12 loses the label, 10 gets it.
		q(12, false), q(10, true),
	} {
		b.Apply(e, at.Add(time.Duration(i)*time.Second))
	}
	var got []int
	for _, p := range b.Queue(repo, "main") {
		got = append(got, p.PR.Number)
	}
	assert.Equal(t, []int{11, 10, 13, 14, 12}, got)
	assert.Equal(t, 2, b.Position(repo.PR(10)))
}
