package merger

import (
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

// failing is ChecksInput with ci failed.
func failing() ChecksInput {
	in := statuses()
	in.Combined.Statuses = []*gh.RepoStatus{{Context: gh.String("ci"), State: gh.String("failure")}}
	return in
}

// TestDecideBatch_WhatTheQueueDoesWithItsCandidates is the speculative
// queue's table: a chain of candidates, what reported on the ones kept
// from earlier passes, and what the queue does.
func TestDecideBatch_WhatTheQueueDoesWithItsCandidates(t *testing.T) {
	t.Parallel()
	t0 := stepT0
	pr := func(n int) ghref.PR { return ghref.PR{Owner: "o", Repo: "r", Number: n} }
	chain := func(n int) []Candidate {
		var out []Candidate
		for i := 1; i <= n; i++ {
			out = append(out, Candidate{PR: pr(i), Head: "h", SHA: "c", Branch: candidateBranch("main", i), BuiltAt: t0})
		}
		return out
	}
	pol := newStepFixture().pol
	tests := []struct {
		name string
		view batchView
		// want
		readHeads, merge, fail int
		stack                  bool
		why                    string
	}{
		{
			name:      "two green candidates: read the own heads first",
			view:      batchView{Chain: chain(2), Kept: 2, Inputs: []ChecksInput{statuses("ci"), statuses("ci")}},
			readHeads: 2,
		},
		{
			name:  "two green candidates, own heads read: both merge, the next are stacked",
			view:  batchView{Chain: chain(2), Kept: 2, Inputs: []ChecksInput{statuses("ci"), statuses("ci")}, HeadsRead: true},
			merge: 2, stack: true,
		},
		{
			name:  "finding 5: a check the own head reported is not yet on the candidate",
			view:  batchView{Chain: chain(1), Kept: 1, Inputs: []ChecksInput{statuses("build")}, Heads: [][]string{{"build", "test"}}, HeadsRead: true},
			stack: true,
		},
		{
			name:  "finding 3: candidate 1 pending, candidate 2 green: waits for candidate 1",
			view:  batchView{Chain: chain(2), Kept: 2, Inputs: []ChecksInput{statuses(), statuses("ci")}, HeadsRead: true},
			stack: true,
		},
		{
			name: "a new candidate is pending, whatever reported",
			view: batchView{Now: t0, Chain: chain(1)}, stack: true,
		},
		{
			name: "the first candidate failed: its PR leaves, naming the check",
			view: batchView{Base: "main", BaseSHA: stepTip, Chain: chain(2), Kept: 2, Inputs: []ChecksInput{failing(), statuses("ci")}},
			fail: 1, why: "checks failed on candidate",
		},
		{
			name:  "the second failed after a green first: the first merges, the second leaves",
			view:  batchView{Base: "main", BaseSHA: stepTip, Chain: chain(2), Kept: 2, Inputs: []ChecksInput{statuses("ci"), failing()}, HeadsRead: true},
			merge: 1, fail: 2, why: "#1, this PR",
		},
		{
			name: "the first candidate pending past PRLOOP_CHECKS_TIMEOUT: its PR leaves",
			view: batchView{Now: t0.Add(time.Hour), Chain: chain(1), Kept: 1, Inputs: []ChecksInput{statuses()}},
			fail: 1, stack: true, why: "still pending after 30m0s",
		},
		{
			name:  "pending within the timeout: waits",
			view:  batchView{Now: t0.Add(time.Minute), Chain: chain(1), Kept: 1, Inputs: []ChecksInput{statuses()}},
			stack: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := decideBatch(tt.view, pol)
			assert.Equal(t, tt.readHeads, got.ReadHeads, "read heads")
			assert.Equal(t, tt.merge, got.Merge, "merge")
			assert.Equal(t, tt.fail, got.Fail, "fail (%s)", got.Why)
			if tt.readHeads == 0 {
				assert.Equal(t, tt.stack, got.Stack, "stack")
				assert.Len(t, got.Checks, len(tt.view.Chain))
			}
			assert.Contains(t, got.Why, tt.why)
		})
	}
}

// TestRide_TheSerialQueuesExits: a PR of the speculative queue leaves for
// exactly the serial queue's reasons, and otherwise rides (behind, or
// mergeability unknown: its candidate brings it up to date).
func TestRide_TheSerialQueuesExits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(*stepFixture)
		rides  bool
		leave  string
		events []string
	}{
		{name: "open, approved: rides", rides: true},
		{name: "behind: rides", edit: func(f *stepFixture) { f.o.PR.MergeableState = "behind" }, rides: true},
		{name: "mergeability unknown: rides", edit: func(f *stepFixture) { f.o.PR.MergeableState = "unknown" }, rides: true},
		{name: "closed", edit: func(f *stepFixture) { f.o.PR.Open = false }, leave: metrics.MergeDropped, events: []string{"PRMergeFailed/closed"}},
		{name: "head moved", edit: func(f *stepFixture) { f.o.PR.HeadSHA = stepOther }, leave: metrics.MergeDropped, events: []string{"PRMergeFailed/stale_approval"}},
		{name: "approval withdrawn", edit: func(f *stepFixture) { f.o.Approval = ApprovalCheck{Reason: events.ReasonApprovalWithdrawn} },
			leave: metrics.MergeDropped, events: []string{"PRMergeFailed/approval_withdrawn"}},
		{name: "conflict", edit: func(f *stepFixture) { f.o.PR.MergeableState = "dirty" },
			leave: metrics.MergeFailed, events: []string{"PREscalationRequested/merge_conflict", "PRMergeFailed/merge_conflict"}},
		{name: "merged by prloop, answer lost, the candidate's tree", edit: func(f *stepFixture) {
			f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
			f.o.PR.Open, f.o.PR.Merged, f.o.PR.MergeSHA, f.o.MergedTree = false, true, stepMerge, stepTree
		}, leave: metrics.MergeMerged, events: []string{"PRMerged"}},
		{name: "merged outside prloop", edit: func(f *stepFixture) { f.o.PR.Open, f.o.PR.Merged = false, true }, leave: metrics.MergeMergedElsewhere},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStepFixture()
			if tt.edit != nil {
				tt.edit(&f)
			}
			got, rides := ride(f.e, f.o, f.pol)
			assert.Equal(t, tt.rides, rides)
			assert.Equal(t, tt.leave, got.Leave)
			assert.Equal(t, tt.events, eventsOf(got))
		})
	}
}

// TestLand_EachMergeOnItsOwnGreenCandidate: the speculative queue's merge
// of one PR, on a fresh read, right before the call: mayLand alone lets it
// go, and the merge intent records the candidate's tree.
func TestLand_EachMergeOnItsOwnGreenCandidate(t *testing.T) {
	t.Parallel()
	const cand = "7777777777777777777777777777777777777777"
	c := Candidate{PR: ghref.PR{Owner: "o", Repo: "r", Number: 7}, Head: stepHead, SHA: cand, Tree: stepTree}
	green := statuses("ci")
	green.Required, green.Seen = []string{"ci"}, []string{"ci"}
	tests := []struct {
		name     string
		edit     func(f *stepFixture, judged *ChecksInput)
		merge    bool
		leave    string
		wait     bool
		refusals int
	}{
		{name: "green, approved, on the tip it was built on: merges", merge: true},
		{name: "the PR closed meanwhile: stop, the next pass lets it leave", edit: func(f *stepFixture, _ *ChecksInput) { f.o.PR.Open = false }},
		{name: "the head moved: stop", edit: func(f *stepFixture, _ *ChecksInput) { f.o.PR.HeadSHA = stepOther }},
		{name: "the base moved: stop, rebuild", edit: func(f *stepFixture, _ *ChecksInput) { f.o.Tip = stepOther }},
		{name: "the approval is gone: leaves", edit: func(f *stepFixture, _ *ChecksInput) {
			f.o.Approval = ApprovalCheck{Reason: events.ReasonApprovalWithdrawn}
		}, leave: metrics.MergeDropped},
		{name: "finding 3: the candidate has not passed: counted, looked at again", edit: func(_ *stepFixture, j *ChecksInput) {
			*j = statuses()
			j.Required = []string{"ci"}
		}, wait: true, refusals: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStepFixture()
			f.o.Tip = stepTip
			f.o.Settings = &mergeSettings{Method: "rebase"}
			judged := green
			if tt.edit != nil {
				tt.edit(&f, &judged)
			}
			got := land(f.e, f.o, c, judged, stepTip, f.pol)
			assert.Equal(t, tt.merge, len(got.Commands) == 1, "merge (%s)", got.Why)
			assert.Equal(t, tt.leave, got.Leave)
			assert.Equal(t, tt.wait, got.Wait)
			assert.Equal(t, tt.refusals, got.Next.Refusals)
			if tt.merge {
				assert.Equal(t, &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}, got.Next.Intent)
				m := got.Commands[0].(cmdMerge)
				assert.Equal(t, stepTip, m.Landing.Tip, "the tip just read: the executor does not read it again")
				assert.Equal(t, f.o.Settings, m.Settings, "the policy read before the tip: the executor does not read it again")
			} else {
				assert.Nil(t, got.Next.Intent)
			}
		})
	}
}

// TestCandidateEvents_SayHowTheChainChanged: PRMergeCandidate events for
// a new chain against the batch before it.
func TestCandidateEvents_SayHowTheChainChanged(t *testing.T) {
	t.Parallel()
	pr := func(n int) ghref.PR { return ghref.PR{Owner: "o", Repo: "r", Number: n} }
	c1 := Candidate{PR: pr(1), Head: "h1", SHA: "c1"}
	c2 := Candidate{PR: pr(2), Head: "h2", SHA: "c2"}
	c2b := Candidate{PR: pr(2), Head: "h2b", SHA: "c2b"}
	c2c := Candidate{PR: pr(2), Head: "h2", SHA: "c2c"}
	all := func(ghref.PR) bool { return true }
	only2 := func(p ghref.PR) bool { return p.Number == 2 }
	tests := []struct {
		name     string
		old      Batch
		chain    []Candidate
		queued   func(ghref.PR) bool
		want     []string // state:sha:detail
		wantGone int
	}{
		{name: "first chain: built", chain: []Candidate{c1, c2}, queued: all, want: []string{"built:c1:", "built:c2:"}},
		{name: "unchanged: nothing", old: Batch{BaseSHA: "b", Candidates: []Candidate{c1, c2}}, chain: []Candidate{c1, c2}, queued: all},
		{name: "a new head", old: Batch{BaseSHA: "b", Candidates: []Candidate{c1, c2}}, chain: []Candidate{c1, c2b}, queued: all,
			want: []string{"invalidated:c2:the PR's head changed", "built:c2b:"}},
		{name: "the base moved", old: Batch{BaseSHA: "a", Candidates: []Candidate{c2}}, chain: []Candidate{c2c}, queued: all,
			want: []string{"invalidated:c2:the base branch moved", "built:c2c:"}},
		{name: "PR 1 left: its branch goes, PR 2 rebuilt", old: Batch{BaseSHA: "b", Candidates: []Candidate{c1, c2}}, chain: []Candidate{c2c}, queued: only2,
			want: []string{"invalidated:c2:a PR ahead of it left the queue or changed", "built:c2c:"}, wantGone: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := "b"
			evs, gone := candidateEvents(tt.old, tt.chain, "main", base, tt.queued)
			var got []string
			for _, ev := range evs {
				d := ev.Data.(*events.MergeCandidate)
				got = append(got, d.State+":"+d.Candidate+":"+d.Detail)
			}
			assert.Equal(t, tt.want, got)
			assert.Len(t, gone, tt.wantGone)
		})
	}
}

// TestRemoved_ACandidateFailureGoesToTheAgentWhenTheOwnHeadIsGreen: the
// PR whose candidate failed (the one before it passed) leaves the
// speculative queue; with its own head green nobody is called
// (candidate_failed, the candidate's failure on PRMergeFailed, for the
// agent), otherwise a human is (checks_failed).
func TestRemoved_ACandidateFailureGoesToTheAgentWhenTheOwnHeadIsGreen(t *testing.T) {
	t.Parallel()
	const cand, tip = "cccccccccccccccccccccccccccccccccccccccc", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	candFailed := ChecksInput{Own: "prloop", Required: []string{"test"}, Combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{
		{Context: gh.String("lint"), State: gh.String("error"), TargetURL: gh.String("https://ci/lint"), Description: gh.String("lint broke")},
		{Context: gh.String("prloop"), State: gh.String("failure")},
	}}, Runs: []*gh.CheckRun{
		{ID: gh.Int64(5), Name: gh.String("test"), Status: gh.String("completed"), Conclusion: gh.String("success")},
		{ID: gh.Int64(9), Name: gh.String("test"), Status: gh.String("completed"), Conclusion: gh.String("failure"),
			HTMLURL: gh.String("https://gh/runs/9"), App: &gh.App{Slug: gh.String("github-actions")}},
		{ID: gh.Int64(6), Name: gh.String("build"), Status: gh.String("completed"), Conclusion: gh.String("success")},
	}}
	run := func(conclusion string) ChecksInput {
		in := ChecksInput{Own: "prloop", Runs: []*gh.CheckRun{{ID: gh.Int64(1), Name: gh.String("test"), Status: gh.String("completed"), Conclusion: gh.String(conclusion)}}}
		if conclusion == "" {
			in.Runs[0].Status = gh.String("in_progress")
		}
		return in
	}
	tests := []struct {
		name   string
		own    ChecksInput
		seen   []string
		dryRun bool
		leave  string
		events []string
		checks []events.FailedCheck
	}{
		{
			name: "own head green: leaves for the agent with the candidate's failure", own: run("success"),
			leave: metrics.MergeDropped, events: []string{"PRMergeFailed/candidate_failed"},
			checks: []events.FailedCheck{
				{Name: "lint", Kind: events.CheckKindStatus, Conclusion: "error", URL: "https://ci/lint", Description: "lint broke"},
				{Name: "test", Kind: events.CheckKindRun, Conclusion: "failure", URL: "https://gh/runs/9", ID: 9, Actions: true},
			},
		},
		{
			name: "dry run: says so, nobody acts", own: run("success"), dryRun: true,
			leave: metrics.MergeDropped, events: []string{"PRMergeFailed/candidate_failed"},
		},
		{name: "own head failed too: a human", own: run("failure"), leave: metrics.MergeFailed,
			events: []string{"PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}},
		{name: "own head pending: a human, as before", own: run(""), leave: metrics.MergeFailed,
			events: []string{"PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}},
		{name: "nothing reported on the own head: a human", own: ChecksInput{Own: "prloop"}, leave: metrics.MergeFailed,
			events: []string{"PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}},
		{name: "a check seen on an earlier head has not reported: a human", own: run("success"), seen: []string{"test", "e2e"},
			leave: metrics.MergeFailed, events: []string{"PREscalationRequested/checks_failed", "PRMergeFailed/checks_failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStepFixture()
			f.e.Epoch, f.e.FixCycle, f.e.SeenChecks = 2, 1, tt.seen
			f.pol.DryRun = tt.dryRun
			c := Candidate{PR: f.e.PR, Head: f.e.Head, SHA: cand, Branch: candidateBranch("main", 7)}
			got := removed(f.e, c, candFailed, tt.own, tip, "checks failed on candidate ccccccc", f.pol)
			assert.Equal(t, tt.leave, got.Leave)
			assert.Equal(t, tt.events, eventsOf(got))
			mf, _ := got.Events[len(got.Events)-1].Data.(*events.MergeFailed)
			if !assert.NotNil(t, mf) {
				return
			}
			assert.Contains(t, mf.Detail, "checks failed on candidate ccccccc")
			assert.Equal(t, tt.dryRun, mf.DryRun)
			if mf.Reason != events.ReasonCandidateFailed {
				assert.Empty(t, mf.Checks)
				return
			}
			if tt.checks != nil {
				assert.Equal(t, tt.checks, mf.Checks)
			}
			assert.Equal(t, []any{cand, "main", tip, 2, 1}, []any{mf.Candidate, mf.BaseBranch, mf.BaseSHA, mf.Epoch, mf.FixCycle})
		})
	}
}
