package merger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
)

// stepFixture is a queued entry and a pass over it where everything
// reads well: the approved head, open, up to date with main, approved,
// ci green on it.
type stepFixture struct {
	e   Entry
	o   Observation
	pol Policy
}

const (
	stepHead  = "1111111111111111111111111111111111111111"
	stepOther = "2222222222222222222222222222222222222222"
	stepTip   = "3333333333333333333333333333333333333333"
	stepMerge = "4444444444444444444444444444444444444444"
	stepTree  = "5555555555555555555555555555555555555555"
	stepTree2 = "6666666666666666666666666666666666666666"
)

var stepT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStepFixture() stepFixture {
	ci := func(state string) *ChecksInput {
		return &ChecksInput{Own: DefaultStatusContext, Required: []string{"ci"}, Combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{
			{Context: gh.String("ci"), State: gh.String(state)},
		}}}
	}
	return stepFixture{
		e: Entry{
			PR: ghref.PR{Owner: "o", Repo: "r", Number: 7}, Base: "main", Seq: 42,
			ApprovedHead: stepHead, Head: stepHead, WaitingSince: stepT0,
		},
		o: Observation{
			Now:      stepT0.Add(time.Minute),
			PR:       PRView{Open: true, HeadSHA: stepHead, BaseRef: "main", MergeableState: "clean", BaseSHA: stepTip},
			Approval: ApprovalCheck{Approved: true, Approvers: []string{"alice"}},
			Checks:   ci("success"),
			Compare:  headVsBase{tree: stepTree, mergeBase: stepTip},
		},
		pol: Policy{
			RequireChecks: true, ChecksTimeout: 30 * time.Minute, PollInterval: 10 * time.Second, MergeRetries: 3,
			UpdateMethod: UpdateMerge, MergeMethod: github.MergeMethodSquash,
		},
	}
}

// eventsOf names a transition's events as "type" or "type/reason".
func eventsOf(t Transition) []string {
	var out []string
	for _, ev := range t.Events {
		name := string(ev.Data.EventType())
		switch d := ev.Data.(type) {
		case *events.MergeFailed:
			name += "/" + string(d.Reason)
		case *events.EscalationRequested:
			name += "/" + string(d.Reason)
		case *events.MergeWaiting:
			name += fmt.Sprintf("/%v", d.Checks)
		}
		out = append(out, name)
	}
	return out
}

// commandsOf names a transition's commands.
func commandsOf(t Transition) []string {
	var out []string
	for _, c := range t.Commands {
		switch c.(type) {
		case cmdUpdate:
			out = append(out, "update")
		case cmdMerge:
			out = append(out, "merge")
		case cmdDeleteBranch:
			out = append(out, "delete")
		}
	}
	return out
}

// TestStep_SerialQueueRowByRow is the serial queue's table: each row an
// entry, what a pass observed (or what its last command found out), and
// what Step decides: the events (in the outbox), the commands, whether
// the entry leaves or waits, and what the next entry records. The crash
// recovery rows are the passes a replica taking over makes.
func TestStep_SerialQueueRowByRow(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	errGitHub := errors.New("github: 502")
	tests := []struct {
		name string
		edit func(*stepFixture)
		// want
		events   []string
		commands []string
		leave    string
		wait     bool
		next     func(t *testing.T, e Entry)
	}{
		{
			name:     "ready: merge with the head, its tree as the intent",
			commands: []string{"merge"},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}, e.Intent)
			},
		},
		{
			name:   "closed without merging: dropped, said",
			edit:   func(f *stepFixture) { f.o.PR.Open = false },
			events: []string{"PRMergeFailed/closed"}, leave: metrics.MergeDropped,
		},
		{
			name:  "merged outside prloop: leaves, nothing to say",
			edit:  func(f *stepFixture) { f.o.PR.Open, f.o.PR.Merged = false, true },
			leave: metrics.MergeMergedElsewhere,
		},
		{
			name: "crash recovery: merged by prloop, answer lost, the tree CI passed",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o.PR.Open, f.o.PR.Merged, f.o.PR.MergeSHA, f.o.MergedTree = false, true, stepMerge, stepTree
			},
			events: []string{"PRMerged"}, leave: metrics.MergeMerged,
		},
		{
			name: "crash recovery: merged by prloop onto another tree: a human is called",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o.PR.Open, f.o.PR.Merged, f.o.PR.MergeSHA, f.o.MergedTree = false, true, stepMerge, stepTree2
			},
			events: []string{"PREscalationRequested/untested_merge", "PRMerged"}, leave: metrics.MergeMerged,
		},
		{
			name:   "head moved to one nobody approved: stale approval",
			edit:   func(f *stepFixture) { f.o.PR.HeadSHA, f.o.Adopted = stepOther, &ApprovalCheck{} },
			events: []string{"PRMergeFailed/stale_approval"}, leave: metrics.MergeDropped,
		},
		{
			name: "head moved to one approved in its own right: goes on with it",
			edit: func(f *stepFixture) {
				f.o.PR.HeadSHA, f.o.Adopted = stepOther, &ApprovalCheck{Approved: true, Approvers: []string{"bob"}}
				f.e.Refusals = 2
			},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, stepOther, e.Head)
				assert.Equal(t, stepOther, e.ApprovedHead)
				assert.Equal(t, []string{"bob"}, e.Approvers)
				assert.Zero(t, e.Refusals)
			},
		},
		{
			name: "crash recovery: prloop's own update landed and was not said",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o.PR.HeadSHA, f.o.Own = stepOther, &yes
			},
			events: []string{"PRBranchUpdated"},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, stepOther, e.Head)
				assert.Equal(t, stepHead, e.ApprovedHead)
				assert.Nil(t, e.Intent)
				assert.Equal(t, stepOther, e.UpdateAnnounced)
			},
		},
		{
			name: "crash recovery: the head moved during prloop's update, not to prloop's",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o.PR.HeadSHA, f.o.Own = stepOther, &no
			},
			next: func(t *testing.T, e Entry) {
				assert.Nil(t, e.Intent, "the update vouches for nothing")
				assert.Equal(t, stepHead, e.Head)
			},
		},
		{
			name: "crash recovery: an update started and never pushed",
			edit: func(f *stepFixture) { f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead} },
			next: func(t *testing.T, e Entry) { assert.Nil(t, e.Intent) },
		},
		{
			name: "crash recovery: PRBranchUpdated lost before it was said",
			edit: func(f *stepFixture) {
				f.e.ApprovedHead = stepOther // Head is prloop's update of it
			},
			events: []string{"PRBranchUpdated"}, commands: []string{"merge"},
		},
		{
			name: "approval withdrawn (finding 2: a change request)",
			edit: func(f *stepFixture) {
				f.o.Approval = ApprovalCheck{Why: "alice requested changes", Reason: events.ReasonApprovalWithdrawn}
			},
			events: []string{"PRMergeFailed/approval_withdrawn"}, leave: metrics.MergeDropped,
		},
		{
			name: "retargeted (finding 6): the approval was for another base",
			edit: func(f *stepFixture) {
				f.o.PR.BaseRef = "release"
				f.o.Approval = ApprovalCheck{Why: "a new base needs a new approval", Reason: events.ReasonStaleApproval}
			},
			events: []string{"PRMergeFailed/stale_approval"}, leave: metrics.MergeDropped,
		},
		{
			name: "checks pending: waits and says what for, once",
			edit: func(f *stepFixture) {
				f.o.Checks.Combined.Statuses[0].State = gh.String("pending")
				f.e.Failures = 3
			},
			events: []string{"PRMergeWaiting/[ci]"}, wait: true,
			next: func(t *testing.T, e Entry) {
				assert.Zero(t, e.Failures, "a pass that went through resets the errors in a row")
				assert.Equal(t, []string{"ci"}, e.WaitingFor)
				assert.Equal(t, 1, e.Announced)
			},
		},
		{
			name: "checks pending, already said: waits quietly",
			edit: func(f *stepFixture) {
				f.o.Checks.Combined.Statuses[0].State = gh.String("pending")
				f.e.WaitingHead, f.e.WaitingFor, f.e.Announced = stepHead, []string{"ci"}, 1
			},
			wait: true,
		},
		{
			name: "checks green after waiting: says none is left, and merges",
			edit: func(f *stepFixture) {
				f.e.WaitingHead, f.e.WaitingFor, f.e.Announced = stepHead, []string{"ci"}, 1
			},
			events: []string{"PRMergeWaiting/[]"}, commands: []string{"merge"},
		},
		{
			name:   "a check seen on an earlier head has not reported: waits for it",
			edit:   func(f *stepFixture) { f.e.SeenChecks = []string{"build"} },
			events: []string{"PRMergeWaiting/[build]"}, wait: true,
		},
		{
			name:   "checks failed: a human is asked",
			edit:   func(f *stepFixture) { f.o.Checks.Combined.Statuses[0].State = gh.String("failure") },
			events: []string{"PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}, leave: metrics.MergeFailed,
		},
		{
			name: "checks pending past PRLOOP_CHECKS_TIMEOUT",
			edit: func(f *stepFixture) {
				f.o.Checks.Combined.Statuses[0].State = gh.String("pending")
				f.o.Now = stepT0.Add(time.Hour)
			},
			events: []string{"PRMergeWaiting/[ci]", "PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}, leave: metrics.MergeFailed,
		},
		{
			name:     "behind (finding 1, whatever mergeable_state says): updated first",
			edit:     func(f *stepFixture) { f.o.Compare.behind = true },
			commands: []string{"update"},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, &Intent{Kind: intentUpdate, Head: stepHead}, e.Intent, "written before the update")
			},
		},
		{
			name:   "behind in a dry run: says what the merge would be",
			edit:   func(f *stepFixture) { f.o.Compare.behind, f.pol.DryRun = true, true },
			events: []string{"PRMerged"}, leave: metrics.MergeDryRun,
		},
		{
			name:   "conflict: a human is asked",
			edit:   func(f *stepFixture) { f.o.PR.MergeableState = "dirty" },
			events: []string{"PREscalationRequested/merge_conflict", "PRMergeFailed/merge_conflict"}, leave: metrics.MergeFailed,
		},
		{
			name:   "conflict with PRLOOP_RESOLVE_CONFLICTS: the agent is asked, no human",
			edit:   func(f *stepFixture) { f.o.PR.MergeableState, f.pol.ResolveConflicts = "dirty", true },
			events: []string{"PRConflictResolveRequested", "PRMergeFailed/merge_conflict"}, leave: metrics.MergeFailed,
		},
		{
			name:   "draft",
			edit:   func(f *stepFixture) { f.o.PR.Draft = true },
			events: []string{"PREscalationRequested/not_mergeable", "PRMergeFailed/not_mergeable"}, leave: metrics.MergeFailed,
		},
		{
			name: "mergeability not computed yet: waits",
			edit: func(f *stepFixture) { f.o.PR.MergeableState = "unknown" },
			wait: true,
		},
		{
			name: "the rule refuses what Decide would merge (no tip compared): counted, looked at again",
			edit: func(f *stepFixture) { f.o.Compare.mergeBase = "" },
			wait: true,
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, 1, e.Refusals)
				assert.Contains(t, e.LastError, "tip")
				assert.Nil(t, e.Intent)
			},
		},
		{
			name: "a read failed: backs off",
			edit: func(f *stepFixture) { f.o = Observation{Now: f.o.Now, Err: errGitHub}; f.e.Failures = 2 },
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, 3, e.Failures)
				assert.Equal(t, stepT0.Add(time.Minute+40*time.Second), e.NotBefore)
				assert.Equal(t, errGitHub.Error(), e.LastError)
			},
		},
		{
			name:   "the eighth read failure in a row gives up",
			edit:   func(f *stepFixture) { f.o = Observation{Now: f.o.Now, Err: errGitHub}; f.e.Failures = maxFailures - 1 },
			events: []string{"PREscalationRequested/not_mergeable", "PRMergeFailed/not_mergeable"}, leave: metrics.MergeFailed,
		},
		{
			name: "after an update: the new head, said",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: updated, Head: stepOther}}
			},
			events: []string{"PRBranchUpdated"},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, stepOther, e.Head)
				assert.Nil(t, e.Intent)
				assert.Equal(t, stepT0.Add(time.Minute), e.WaitingSince, "waiting starts again on the new head")
			},
		},
		{
			name: "after an update that conflicts",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: updateConflict, Err: errRebaseConflict, BaseSHA: stepTip}}
			},
			events: []string{"PREscalationRequested/merge_conflict", "PRMergeFailed/merge_conflict"}, leave: metrics.MergeFailed,
		},
		{
			name: "after an update someone else's push overtook",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: updateStale, Err: errStaleHead}}
			},
			next: func(t *testing.T, e Entry) { assert.Nil(t, e.Intent) },
		},
		{
			name: "after an update that failed for now: the intent vouches for nothing",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentUpdate, Head: stepHead}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: transient, Err: errGitHub}}
			},
			next: func(t *testing.T, e Entry) {
				assert.Nil(t, e.Intent)
				assert.Equal(t, 1, e.Failures)
			},
		},
		{
			name: "after a merge, main has the tree CI passed; the branch is deleted",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.pol.DeleteBranch = true
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: merged, MergeSHA: stepMerge, MergedTree: stepTree}}
			},
			events: []string{"PRMerged"}, commands: []string{"delete"}, leave: metrics.MergeMerged,
		},
		{
			name: "after a merge that failed for now: the intent stays, to recognise the merge later",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: transient, Err: errGitHub}}
			},
			next: func(t *testing.T, e Entry) {
				assert.Equal(t, &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}, e.Intent)
				assert.Equal(t, 1, e.Failures)
			},
		},
		{
			name: "after a merge GitHub refused: counted, looked at again",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: refused, Err: github.ErrNotMergeable}}
			},
			wait: true,
			next: func(t *testing.T, e Entry) {
				assert.Nil(t, e.Intent)
				assert.Equal(t, 1, e.Refusals)
			},
		},
		{
			name: "GitHub refused once more than PRLOOP_MERGE_RETRIES",
			edit: func(f *stepFixture) {
				f.e.Refusals = 3
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: refused, Err: github.ErrNotMergeable}}
			},
			events: []string{"PREscalationRequested/not_mergeable", "PRMergeFailed/not_mergeable"}, leave: metrics.MergeFailed,
		},
		{
			name: "the rule withheld the merge: the approval is gone",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: withheld, Verdict: landVerdict{Refusal: refusedApproval, Reason: events.ReasonApprovalWithdrawn}}}
			},
			events: []string{"PRMergeFailed/approval_withdrawn"}, leave: metrics.MergeDropped,
		},
		{
			name: "the rule withheld the merge: the tip moved after the comparison",
			edit: func(f *stepFixture) {
				f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
				f.o = Observation{Now: f.o.Now, Outcome: &Outcome{Kind: withheld, Verdict: landVerdict{Refusal: refusedTip, Why: "moved"}}}
			},
			wait: true,
			next: func(t *testing.T, e Entry) {
				assert.Nil(t, e.Intent)
				assert.Equal(t, 1, e.Refusals)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStepFixture()
			if tt.edit != nil {
				tt.edit(&f)
			}
			got := Step(f.e, f.o, f.pol)
			assert.Equal(t, tt.events, eventsOf(got), "events (%s)", got.Why)
			assert.Equal(t, tt.commands, commandsOf(got), "commands (%s)", got.Why)
			assert.Equal(t, tt.leave, got.Leave, "leave (%s)", got.Why)
			assert.Equal(t, tt.wait, got.Wait, "wait (%s)", got.Why)
			if tt.next != nil {
				tt.next(t, got.Next)
			}
		})
	}
}

// TestStep_TheMergeCommandCarriesWhatTheRuleJudges: the merge command's
// landing is what mayLand judged in Step (the head, the approval for this
// base, the tested tree, the checks), so the executor's second judgement,
// with the tip read right before the call, is of the same merge.
func TestStep_TheMergeCommandCarriesWhatTheRuleJudges(t *testing.T) {
	t.Parallel()
	f := newStepFixture()
	got := Step(f.e, f.o, f.pol)
	if !assert.Len(t, got.Commands, 1) {
		return
	}
	c, ok := got.Commands[0].(cmdMerge)
	if !assert.True(t, ok) {
		return
	}
	assert.Equal(t, stepHead, c.Head)
	assert.Equal(t, stepTree, c.Tree)
	l := c.Landing
	l.Tip = stepTip
	assert.True(t, mayLand(l).ok(), "the executor lets it through on the same tip")
	l.Tip = stepOther
	assert.Equal(t, refusedTip, mayLand(l).Refusal, "and refuses it on a tip that moved")
}

// TestWants_WhatEachPassReads: observe reads only what Step needs for the
// entry as the PR stands.
func TestWants_WhatEachPassReads(t *testing.T) {
	t.Parallel()
	open := PRView{Open: true, HeadSHA: stepHead}
	tests := []struct {
		name   string
		intent *Intent
		pr     PRView
		want   Wants
	}{
		{name: "on the head", pr: open, want: Wants{OnHead: true}},
		{name: "head moved", pr: PRView{Open: true, HeadSHA: stepOther}, want: Wants{Adopt: true}},
		{name: "head moved during prloop's update", intent: &Intent{Kind: intentUpdate, Head: stepHead}, pr: PRView{Open: true, HeadSHA: stepOther}, want: Wants{Own: true}},
		{name: "update started, head not moved", intent: &Intent{Kind: intentUpdate, Head: stepHead}, pr: open},
		{name: "merged by prloop", intent: &Intent{Kind: intentMerge, Head: stepHead}, pr: PRView{Merged: true, HeadSHA: stepHead}, want: Wants{MergedTree: true}},
		{name: "merged by someone else", pr: PRView{Merged: true, HeadSHA: stepHead}},
		{name: "closed", pr: PRView{HeadSHA: stepHead}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, wants(Entry{Head: stepHead, ApprovedHead: stepHead, Intent: tt.intent}, tt.pr))
		})
	}
}

// TestLegacyIntent_AnUpgradeInTheMiddleOfAStep: an entry the previous
// version wrote in the middle of an update or a merge is read with that
// step as its Intent, so that Step's recovery rows apply to it.
func TestLegacyIntent_AnUpgradeInTheMiddleOfAStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want *Intent
	}{
		{name: "nothing half done", body: `{"head":"h"}`},
		{name: "an update", body: `{"head":"h","updating_from":"h","updating_to":"r"}`, want: &Intent{Kind: intentUpdate, Head: "h", To: "r"}},
		{name: "a merge", body: `{"head":"h","merging_head":"h","merging_tree":"t"}`, want: &Intent{Kind: intentMerge, Head: "h", Tree: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, legacyIntent([]byte(tt.body)))
		})
	}
}
