package merger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

// batchFixture is a speculative queue of PRs #1…#n on main, each open on
// its queued head and approved, with candidates c1…cn kept from an
// earlier pass on stepTip, each green: a pass that has read everything up
// to the candidates' checks.
func batchFixture(n int) (batchObservation, Policy) {
	pol := newStepFixture().pol
	pol.QueueDepth = 4
	o := batchObservation{Now: stepT0.Add(time.Minute), Built: true, BaseSHA: stepTip, ChecksRead: true, Required: []string{"ci"}}
	for i := 1; i <= n; i++ {
		e := Entry{PR: ghref.PR{Owner: "o", Repo: "r", Number: i}, Base: "main", Seq: uint64(i), ApprovedHead: fmt.Sprintf("h%d", i), Head: fmt.Sprintf("h%d", i)}
		o.Entries = append(o.Entries, e)
		o.Riders = append(o.Riders, Observation{
			PR:       PRView{Open: true, HeadSHA: e.Head, BaseRef: "main", MergeableState: "clean", BaseSHA: stepTip},
			Approval: ApprovalCheck{Approved: true, Approvers: []string{"alice"}},
		})
		o.Chain = append(o.Chain, batchCandidate(i, ""))
		o.Inputs = append(o.Inputs, statuses("ci"))
	}
	o.Batch = Batch{BaseSHA: stepTip, Candidates: o.Chain}
	return o, pol
}

// batchCandidate is PR #i's candidate, of generation gen ("" or "'").
func batchCandidate(i int, gen string) Candidate {
	return Candidate{
		PR: ghref.PR{Owner: "o", Repo: "r", Number: i}, Seq: uint64(i), Head: fmt.Sprintf("h%d", i),
		SHA: fmt.Sprintf("c%d%s", i, gen), Tree: fmt.Sprintf("t%d%s", i, gen), Branch: candidateBranch("main", i), BuiltAt: stepT0,
	}
}

// describe names what stepBatch answered: the phase it asks for, or the
// commands, each entry's transition by what it does to the entry.
func describe(t batchTransition) []string {
	shas := func(cs []Candidate) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.SHA)
		}
		return strings.Join(out, ",")
	}
	switch a := t.Ask.(type) {
	case askRiders:
		return []string{fmt.Sprintf("read %d riders", a.N)}
	case askFlush:
		return []string{"flush the batch's outbox"}
	case askBuild:
		return []string{fmt.Sprintf("build %d candidates", a.N)}
	case askChecks:
		return []string{fmt.Sprintf("read %d candidates' checks", a.N)}
	case askHeads:
		return []string{fmt.Sprintf("read %d own heads", a.N)}
	case askStack:
		return []string{fmt.Sprintf("stack %d from %d", a.N, a.From)}
	case askPush:
		return []string{"push " + shas(a.Candidates)}
	case askStore:
		out := []string{"store " + shas(a.Batch.Candidates)}
		for _, ev := range a.Events {
			mc := ev.Data.(*events.MergeCandidate)
			out = append(out, mc.State+" "+mc.Candidate)
		}
		for _, c := range a.Gone {
			out = append(out, "delete "+c.Branch)
		}
		return out
	case askOwn:
		return []string{fmt.Sprintf("read #%d's own head", a.Index+1)}
	case askRerun:
		return []string{fmt.Sprintf("re-run #%d's candidate's %d failed jobs once", a.Index+1, len(a.Failed))}
	}
	var out []string
	for _, c := range t.Commands {
		switch c := c.(type) {
		case cmdClear:
			out = append(out, "clear")
		case cmdFinish:
			out = append(out, fmt.Sprintf("finish #%d", c.Index+1))
		case cmdMergeUpTo:
			out = append(out, "merge "+shas(c.Candidates)+" on "+short(c.BuiltOn))
		case cmdEntry:
			s := fmt.Sprintf("#%d", c.Index+1)
			switch {
			case c.T.Leave != "":
				s += " leaves " + c.T.Leave
			case c.T.Next.NotBefore.After(stepT0):
				s += fmt.Sprintf(" backs off (%d)", c.T.Next.Failures)
			default:
				s += fmt.Sprintf(" stays (%d failures, seen %v)", c.T.Next.Failures, c.T.Next.SeenChecks)
			}
			if evs := eventsOf(c.T); len(evs) > 0 {
				s += " " + strings.Join(evs, " ")
			}
			out = append(out, s)
		}
	}
	return out
}

// TestStepBatch_SpeculativePassRowByRow is the speculative queue's table:
// each row what a pass observed so far, and what stepBatch answers: the
// next phase to observe (or carry out and report: the push, the store),
// or the commands that end the pass. The crash recovery rows are the
// passes a replica taking over makes.
func TestStepBatch_SpeculativePassRowByRow(t *testing.T) {
	t.Parallel()
	down := errors.New("github: 502")
	outbox := []cloudevents.Event{cloudevents.New()}
	green := func(contexts ...string) ChecksInput { return statuses(contexts...) }
	// provenWithOneBehind: depth 2, PRs 1 and 2 ride on green candidates
	// whose own heads were read, PR 3 is queued behind them.
	provenWithOneBehind := func(o *batchObservation, pol *Policy) {
		pol.QueueDepth = 2
		o.Riders, o.Chain, o.Inputs, o.Heads = o.Riders[:2], o.Chain[:2], o.Inputs[:2], []ChecksInput{green("ci"), green("ci")}
		o.Batch.Candidates = o.Chain
	}
	stackedC3 := func(o *batchObservation) {
		o.Stacked, o.StackedChain, o.StackedFresh = true, append(o.Chain[:2:2], batchCandidate(3, "")), []Candidate{batchCandidate(3, "")}
	}
	tests := []struct {
		name       string
		n          int // PRs queued (default 2)
		edit       func(o *batchObservation, pol *Policy)
		want       []string
		more, wait bool
		check      func(t *testing.T, got batchTransition)
	}{
		// The queue and crash recovery.
		{
			name: "an empty queue forgets its candidates", n: -1,
			want: []string{"clear"},
		},
		{
			name: "crash recovery: an entry's outbox not said is said first",
			edit: func(o *batchObservation, _ *Policy) { o.Entries[1].Outbox = outbox },
			want: []string{"finish #2"}, more: true,
		},
		{
			name: "crash recovery: an entry that was leaving leaves",
			edit: func(o *batchObservation, _ *Policy) { o.Entries[0].Leaving = metrics.MergeMerged },
			want: []string{"finish #1"}, more: true,
		},
		{
			name: "crash recovery: the batch's outbox is said before the chain is built",
			edit: func(o *batchObservation, _ *Policy) {
				o.Batch.Outbox, o.Built, o.Chain, o.ChecksRead, o.Inputs = outbox, false, nil, false, nil
			},
			want: []string{"flush the batch's outbox"},
		},
		{
			name: "the first PR backs off after an error: the queue waits for it",
			edit: func(o *batchObservation, _ *Policy) { o.Entries[0].NotBefore = o.Now.Add(time.Second) },
			want: nil,
		},
		// Riders.
		{
			name: "the riding PRs are read first",
			edit: func(o *batchObservation, _ *Policy) { o.Riders = nil },
			want: []string{"read 2 riders"},
		},
		{
			name: "only the depth rides",
			n:    3,
			edit: func(o *batchObservation, pol *Policy) { o.Riders, pol.QueueDepth = nil, 2 },
			want: []string{"read 2 riders"},
		},
		{
			name: "no depth set: the first PR rides alone",
			edit: func(o *batchObservation, pol *Policy) { o.Riders, pol.QueueDepth = nil, 0 },
			want: []string{"read 1 riders"},
		},
		{
			name: "a PR backing off further back holds itself and those behind it, not those ahead",
			n:    3,
			edit: func(o *batchObservation, _ *Policy) { o.Riders, o.Entries[1].NotBefore = nil, o.Now.Add(time.Second) },
			want: []string{"read 1 riders"},
		},
		{
			name: "a rider merged by someone else leaves",
			edit: func(o *batchObservation, _ *Policy) { o.Riders[1].PR.Merged, o.Riders[1].PR.Open = true, false },
			want: []string{"#2 leaves " + metrics.MergeMergedElsewhere}, more: true,
		},
		{
			name: "a rider whose approval was withdrawn leaves, nobody called",
			edit: func(o *batchObservation, _ *Policy) {
				o.Riders[0].Approval = ApprovalCheck{Reason: events.ReasonApprovalWithdrawn, Why: "alice asked for changes"}
			},
			want: []string{"#1 leaves " + metrics.MergeDropped + " PRMergeFailed/approval_withdrawn"}, more: true,
		},
		{
			name: "a read error is charged to the PR it is about; those ahead go on at once",
			edit: func(o *batchObservation, _ *Policy) { o.Riders, o.Err = nil, about(o.Entries[1].PR, down) },
			want: []string{"#2 backs off (1)"}, more: true,
		},
		{
			name: "an error about the base is charged to the first, and holds the queue",
			edit: func(o *batchObservation, _ *Policy) { o.Built, o.Err = true, down },
			want: []string{"#1 backs off (1)"},
		},
		{
			name: "the eighth error in a row gives up on the PR it is about",
			edit: func(o *batchObservation, _ *Policy) {
				o.Entries[1].Failures, o.Err = maxFailures-1, about(o.Entries[1].PR, down)
			},
			want: []string{"#2 leaves " + metrics.MergeFailed + " PREscalationRequested/not_mergeable PRMergeFailed/not_mergeable"}, more: true,
		},
		// The chain.
		{
			name: "the chain is built once the riders ride",
			edit: func(o *batchObservation, _ *Policy) {
				o.Built, o.Chain, o.ChecksRead, o.Inputs = false, nil, false, nil
			},
			want: []string{"build 2 candidates"},
		},
		{
			name: "the first PR conflicts with its base: the conflict path",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain, o.Conflict = nil, "the PR conflicts with its base branch main"
			},
			want: []string{"#1 leaves " + metrics.MergeFailed + " PREscalationRequested/merge_conflict PRMergeFailed/merge_conflict"}, more: true,
		},
		{
			name: "kept candidates: their checks are read",
			edit: func(o *batchObservation, _ *Policy) { o.ChecksRead, o.Inputs = false, nil },
			want: []string{"read 2 candidates' checks"},
		},
		{
			name: "only new candidates: nothing to read, they are pushed",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = []Candidate{batchCandidate(1, "'"), batchCandidate(2, "'")}
				o.Fresh, o.ChecksRead, o.Inputs = o.Chain, false, nil
			},
			want: []string{"push c1',c2'"},
		},
		{
			name: "base moved: the candidates on the old tip are invalidated and new ones said",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = []Candidate{batchCandidate(1, "'"), batchCandidate(2, "'")}
				o.Fresh, o.ChecksRead, o.Inputs, o.Pushed, o.BaseSHA = o.Chain, false, nil, true, stepOther
			},
			want: []string{"store c1',c2'", "invalidated c1", "invalidated c2", "built c1'", "built c2'"},
		},
		{
			name: "new candidates stored: the riders' failures reset, the first says what it waits for",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = []Candidate{batchCandidate(1, "'"), batchCandidate(2, "'")}
				o.Fresh, o.ChecksRead, o.Inputs, o.Pushed, o.Stored = o.Chain, false, nil, true, true
				o.Entries[0].Failures, o.Entries[1].Failures = 2, 3
			},
			want: []string{"#1 stays (0 failures, seen [])", "#2 stays (0 failures, seen [])"}, more: true, wait: true,
		},
		{
			name: "a push that fails is charged to the first",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = []Candidate{batchCandidate(1, "'"), batchCandidate(2, "'")}
				o.Fresh, o.ChecksRead, o.Inputs, o.Pushed, o.PushErr = o.Chain, false, nil, true, down
			},
			want: []string{"#1 backs off (1)"},
		},
		// Merges.
		{
			name: "merge prefix green: the own heads are read first",
			want: []string{"read 2 own heads"},
		},
		{
			name: "merge prefix green, heads read: the batch is stored with the checks seen",
			edit: func(o *batchObservation, _ *Policy) { o.Heads = []ChecksInput{green("ci"), green("ci")} },
			want: []string{"store c1,c2"},
			check: func(t *testing.T, got batchTransition) {
				assert.Equal(t, []string{"ci"}, got.Ask.(askStore).Batch.SeenChecks)
			},
		},
		{
			name: "merge prefix green, stored: both merge on their candidates, built on the tip read, and the heads' checks are kept",
			edit: func(o *batchObservation, _ *Policy) {
				o.Heads, o.Stored = []ChecksInput{green("ci"), green("ci")}, true
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 stays (0 failures, seen [ci])", "merge c1,c2 on " + short(stepTip)}, more: true,
			check: func(t *testing.T, got batchTransition) {
				m := got.Commands[2].(cmdMergeUpTo)
				assert.Equal(t, []string{"ci"}, m.Judged[0].Required)
			},
		},
		{
			name: "a check PR 2's own head reported, missing on its candidate, holds its merge: only PR 1 merges",
			edit: func(o *batchObservation, _ *Policy) {
				o.Heads, o.Stored = []ChecksInput{green("ci"), green("ci", "lint")}, true
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 stays (0 failures, seen [ci lint])", "merge c1 on " + short(stepTip)}, more: true,
		},
		{
			name: "finding 3: candidate 1 pending, 2 green: nothing merges, it waits",
			edit: func(o *batchObservation, _ *Policy) { o.Inputs[0], o.Stored = green(), true },
			want: []string{"#1 stays (0 failures, seen []) PRMergeWaiting/[ci]", "#2 stays (0 failures, seen [])"}, more: true, wait: true,
		},
		{
			name: "finding 5: a check its own head reported is expected of the candidate",
			edit: func(o *batchObservation, _ *Policy) {
				o.Entries, o.Riders, o.Chain, o.Inputs = o.Entries[:1], o.Riders[:1], o.Chain[:1], o.Inputs[:1]
				o.Batch.Candidates = o.Chain
				o.Heads, o.Stored = []ChecksInput{green("ci", "test")}, true
			},
			want: []string{"#1 stays (0 failures, seen [ci test]) PRMergeWaiting/[test]"}, more: true, wait: true,
		},
		{
			name: "merge prefix green with a new candidate behind it: the new one is pushed before the merge",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain[1] = batchCandidate(2, "'")
				o.Inputs, o.Fresh, o.Heads = o.Inputs[:1], o.Chain[1:], []ChecksInput{green("ci")}
			},
			want: []string{"push c2'"},
		},
		{
			name: "merge prefix green with a new candidate behind it, pushed: stored, then PR 1 merges",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain[1] = batchCandidate(2, "'")
				o.Inputs, o.Fresh, o.Heads, o.Pushed, o.Stored = o.Inputs[:1], o.Chain[1:], []ChecksInput{green("ci")}, true, true
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "merge c1 on " + short(stepTip)}, more: true,
		},
		{
			name: "checks seen on the candidates of a merged batch are expected of the next: it waits for lint",
			edit: func(o *batchObservation, _ *Policy) {
				o.Entries, o.Riders, o.Chain, o.Inputs = o.Entries[:1], o.Riders[:1], o.Chain[:1], o.Inputs[:1]
				o.Batch.Candidates, o.Batch.SeenChecks, o.Stored = o.Chain, []string{"ci", "lint"}, true
			},
			want: []string{"#1 stays (0 failures, seen []) PRMergeWaiting/[lint]"}, more: true, wait: true,
		},
		{
			name: "PR 2's candidate failed after PR 1's passed: the new candidate stacked on it is neither pushed nor kept",
			n:    3,
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain[2] = batchCandidate(3, "'")
				o.Inputs, o.Fresh, o.Heads = []ChecksInput{green("ci"), failing()}, o.Chain[2:], []ChecksInput{green("ci")}
				o.Batch.Candidates = o.Chain[:2]
			},
			want: []string{"store c1,c2"},
		},
		{
			name: "stack next while merging: the PRs behind the batch get candidates first",
			n:    3,
			edit: provenWithOneBehind,
			want: []string{"stack 1 from 2"},
		},
		{
			name: "stack next while merging: the stacked candidate is pushed",
			n:    3,
			edit: func(o *batchObservation, pol *Policy) {
				provenWithOneBehind(o, pol)
				stackedC3(o)
			},
			want: []string{"push c3"},
		},
		{
			name: "stack next while merging: pushed, the batch holds it before the merges",
			n:    3,
			edit: func(o *batchObservation, pol *Policy) {
				provenWithOneBehind(o, pol)
				stackedC3(o)
				o.Pushed = true
			},
			want: []string{"store c1,c2,c3", "built c3"},
		},
		{
			name: "stacking failed: only time is lost, the batch stays and the merges go on",
			n:    3,
			edit: func(o *batchObservation, pol *Policy) {
				provenWithOneBehind(o, pol)
				o.Stacked, o.StackErr = true, down
			},
			want: []string{"store c1,c2"},
		},
		{
			name: "an error after the heads were read: what they taught is kept",
			edit: func(o *batchObservation, _ *Policy) {
				o.Heads, o.Err = []ChecksInput{green("ci", "lint"), green("ci")}, about(o.Entries[1].PR, down)
			},
			want: []string{"#1 stays (0 failures, seen [ci lint])", "#2 backs off (1)"}, more: true,
		},
		// Failures.
		{
			name: "the first candidate failed: nothing is stacked on it, its own head is read once the batch is stored",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = append(o.Chain[:1:1], batchCandidate(2, "'"))
				o.Inputs, o.Fresh, o.Stored = []ChecksInput{failing()}, o.Chain[1:], true
			},
			want: []string{"read #1's own head"},
		},
		{
			name: "the first candidate failed: the candidate stacked on it is neither pushed nor kept",
			edit: func(o *batchObservation, _ *Policy) {
				o.Chain = append(o.Chain[:1:1], batchCandidate(2, "'"))
				o.Inputs, o.Fresh = []ChecksInput{failing()}, o.Chain[1:]
			},
			want: []string{"store c1", "invalidated c2"},
		},
		{
			name: "culprit with a green head leaves as candidate_failed, for the agent, before the PR ahead of it merges",
			edit: func(o *batchObservation, _ *Policy) {
				own := green("ci")
				o.Inputs, o.Stored, o.Own = []ChecksInput{green("ci"), failing()}, true, &own
				o.Heads = []ChecksInput{green("ci")}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeDropped + " PRMergeFailed/candidate_failed"}, more: true,
			check: func(t *testing.T, got batchTransition) {
				mf := got.Commands[1].(cmdEntry).T.Events[0].Data.(*events.MergeFailed)
				assert.Equal(t, "c2", mf.Candidate)
				assert.Equal(t, stepTip, mf.BaseSHA)
			},
		},
		{
			name: "culprit with a red head: checks_failed, a human",
			edit: func(o *batchObservation, _ *Policy) {
				own := failing()
				o.Inputs, o.Stored, o.Own, o.Heads = []ChecksInput{green("ci"), failing()}, true, &own, []ChecksInput{green("ci")}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeFailed + " PREscalationRequested/checks_failed PRMergeFailed/checks_failed"}, more: true,
		},
		// A flaky candidate gets one more run (flaky.go).
		{
			name: "a candidate failing in Actions jobs is re-run once before its PR leaves",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				o.Inputs, o.Heads = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}
			},
			want: []string{"re-run #2's candidate's 1 failed jobs once"},
			check: func(t *testing.T, got batchTransition) {
				a := got.Ask.(askRerun)
				assert.Equal(t, []int64{7}, a.Mark.Failed, "recorded with the failed jobs, before GitHub is asked")
			},
		},
		{
			name: "re-run asked: its PR stays, the batch is stored with the rerun event",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				o.Inputs, o.Heads = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}}
				o.Rerun, o.RerunNames = true, []string{"test"}
			},
			want: []string{"store c1,c2", "rerun c2"},
		},
		{
			name: "waiting for the re-run's verdict: the PR stays, the green PR ahead of it merges",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				o.Inputs, o.Heads, o.Stored = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}, true
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "merge c1 on 3333333"}, more: true,
		},
		{
			name: "the re-run failed again (a new job failed): the PR leaves",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				own := green("ci")
				o.Inputs, o.Heads, o.Stored, o.Own = []ChecksInput{green("ci"), failingJob(8)}, []ChecksInput{green("ci")}, true, &own
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeDropped + " PRMergeFailed/candidate_failed"}, more: true,
		},
		{
			name: "GitHub refused the re-run: the PR leaves as it would have",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				own := green("ci")
				o.Inputs, o.Heads, o.Stored, o.Own = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}, true, &own
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}, Refused: true}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeDropped + " PRMergeFailed/candidate_failed"}, more: true,
		},
		{
			name: "GitHub failed to answer the re-run's request: asked again, counted",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				o.Inputs, o.Heads = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now.Add(-time.Minute), Failed: []int64{7}, Asks: 1, Unsent: true}
			},
			want: []string{"re-run #2's candidate's 1 failed jobs once"},
			check: func(t *testing.T, got batchTransition) {
				a := got.Ask.(askRerun)
				assert.Equal(t, []int64{7}, a.Mark.Failed)
				assert.Equal(t, 2, a.Mark.Asks, "the second request")
				assert.False(t, a.Mark.Unsent, "recorded as sent before it is")
			},
		},
		{
			name: "GitHub failed to answer the last of its requests: the PR leaves as it would have",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				own := green("ci")
				o.Inputs, o.Heads, o.Stored, o.Own = []ChecksInput{green("ci"), failingJob(7)}, []ChecksInput{green("ci")}, true, &own
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}, Asks: rerunAsks, Unsent: true}
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeDropped + " PRMergeFailed/candidate_failed"}, more: true,
		},
		{
			name: "a re-run candidate green now is marked flaky once, in the batch stored",
			edit: func(o *batchObservation, pol *Policy) {
				pol.RetryFailed = true
				o.Inputs, o.Heads = []ChecksInput{green("ci"), green("ci")}, []ChecksInput{green("ci"), green("ci")}
				o.Chain = slices.Clone(o.Chain)
				o.Chain[1].Rerun = &Rerun{At: o.Now, Failed: []int64{7}}
			},
			want: []string{"store c1,c2"},
			check: func(t *testing.T, got batchTransition) {
				c := got.Ask.(askStore).Batch.Candidates[1]
				require.NotNil(t, c.Rerun)
				assert.True(t, c.Rerun.Passed, "counted as flaky when stored")
			},
		},
		{
			name: "the culprit's own head cannot be read: the error is the culprit's",
			edit: func(o *batchObservation, _ *Policy) {
				o.Inputs, o.Stored, o.Heads = []ChecksInput{green("ci"), failing()}, true, []ChecksInput{green("ci")}
				o.Err = about(o.Entries[1].PR, down)
			},
			want: []string{"#1 stays (0 failures, seen [ci])", "#2 backs off (1)"}, more: true,
		},
		{
			name: "the first candidate pending past PRLOOP_CHECKS_TIMEOUT: checks_failed, without reading its head",
			edit: func(o *batchObservation, _ *Policy) {
				o.Now = stepT0.Add(time.Hour)
				o.Inputs, o.Stored = []ChecksInput{green(), green()}, true
			},
			want: []string{"#1 leaves " + metrics.MergeFailed + " PREscalationRequested/checks_failed PRMergeFailed/checks_failed"}, more: true,
		},
		{
			name: "a PR that left takes its candidate's branch with it",
			edit: func(o *batchObservation, _ *Policy) {
				o.Entries, o.Riders, o.Chain, o.Inputs = o.Entries[1:], o.Riders[1:], []Candidate{batchCandidate(2, "'")}, nil
				o.Fresh, o.ChecksRead, o.Pushed = o.Chain, false, true
			},
			want: []string{"store c2'", "invalidated c2", "built c2'", "delete " + candidateBranch("main", 1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := tt.n
			switch n {
			case 0:
				n = 2
			case -1:
				n = 0
			}
			o, pol := batchFixture(n)
			if tt.edit != nil {
				tt.edit(&o, &pol)
			}
			got := stepBatch(o, pol)
			assert.Equal(t, tt.want, describe(got), "why: %s", got.Why)
			if got.Ask == nil {
				assert.Equal(t, tt.more, got.More, "more")
				assert.Equal(t, tt.wait, got.Wait, "wait")
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// TestStepBatch_APassPhaseByPhase: whole passes as the shell drives them,
// each phase stepBatch asks for answered in turn (from a queue of three
// PRs, two riding, whose candidates c1 and c2 earlier passes built),
// until the commands that end the pass: the order of the reads and side
// effects is the core's.
func TestStepBatch_APassPhaseByPhase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		inputs []ChecksInput // what reported on c1 and c2
		own    ChecksInput   // what reported on the culprit's own head
		asked  []string
		end    []string
	}{
		{
			name:   "a proven batch: the next PR is stacked and pushed, the batch stored, then both merge",
			inputs: []ChecksInput{statuses("ci"), statuses("ci")},
			asked: []string{
				"read 2 riders", "build 2 candidates", "read 2 candidates' checks", "read 2 own heads",
				"stack 1 from 2", "push c3", "store c1,c2,c3", "built c3",
			},
			end: []string{"#1 stays (0 failures, seen [ci])", "#2 stays (0 failures, seen [ci])", "merge c1,c2 on " + short(stepTip)},
		},
		{
			name:   "a culprit: the batch is stored first, then its own head is read, and it leaves for the agent",
			inputs: []ChecksInput{statuses("ci"), failing()},
			own:    statuses("ci"),
			asked: []string{
				"read 2 riders", "build 2 candidates", "read 2 candidates' checks", "read 1 own heads",
				"store c1,c2", "read #2's own head",
			},
			end: []string{"#1 stays (0 failures, seen [ci])", "#2 leaves " + metrics.MergeDropped + " PRMergeFailed/candidate_failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			world, pol := batchFixture(3)
			pol.QueueDepth = 2
			o := batchObservation{Now: world.Now, Entries: world.Entries, Batch: Batch{BaseSHA: stepTip, Candidates: world.Chain[:2]}}
			var asked []string
			var end batchTransition
			for range 20 {
				got := stepBatch(o, pol)
				if got.Ask == nil {
					end = got
					break
				}
				asked = append(asked, describe(got)...)
				switch a := got.Ask.(type) {
				case askRiders:
					o.Riders = world.Riders[:a.N]
				case askBuild:
					o.Built, o.Chain, o.BaseSHA = true, world.Chain[:a.N], stepTip
				case askChecks:
					o.ChecksRead, o.Inputs, o.Required = true, tt.inputs[:a.N], []string{"ci"}
				case askHeads:
					o.Heads = make([]ChecksInput, a.N)
					for i := range o.Heads {
						o.Heads[i] = statuses("ci")
					}
				case askStack:
					o.Stacked, o.StackedChain, o.StackedFresh = true, world.Chain, world.Chain[a.From:a.From+a.N]
				case askPush:
					o.Pushed = true
				case askStore:
					o.Stored = true
				case askOwn:
					o.Own = &tt.own
				}
			}
			assert.Equal(t, tt.asked, asked)
			assert.Equal(t, tt.end, describe(end), "why: %s", end.Why)
			assert.True(t, end.More)
		})
	}
}

// failingJob is what reported on a candidate whose GitHub Actions job
// "test" (check run id) failed.
func failingJob(id int64) ChecksInput {
	in := statuses("ci")
	in.Runs = []*gh.CheckRun{{
		ID: gh.Int64(id), Name: gh.String("test"), Status: gh.String("completed"), Conclusion: gh.String("failure"),
		App: &gh.App{Slug: gh.String("github-actions")},
	}}
	return in
}
