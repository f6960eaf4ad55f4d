package prstatus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/prstatus"
)

// TestLine_SaysTheETA: a queued PR's line ends with when it merges, drawn
// from its current place with the median CI time the merger measured, or
// "ETA unknown" with fewer than three measurements; the estimate shortens
// as the PRs ahead leave, and a merger that made none adds nothing.
func TestLine_SaysTheETA(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	approve := func(pr events.Base) events.Data {
		return &events.ReviewApproved{Base: pr, Status: events.StatusApproved, Approvers: []string{"alice"}}
	}
	serialETA := &events.QueueETA{Known: true, Seconds: 840, CIMedianSeconds: 420, Measurements: 5, Depth: 1}
	other := pr1.RepoRef().PR(9)
	tests := []struct {
		name   string
		events []events.Data
		want   string
		eta    *prstatus.ETA
	}{
		{name: "serial, second: two CI runs", events: []events.Data{
			approve(base(other, headB)), &events.MergeQueued{Base: base(other, headB), Position: 1, BaseBranch: "main", ETA: serialETA},
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 2, BaseBranch: "main", ETA: serialETA},
		}, want: "approved by alice — 2nd in the merge queue for main, merges in ~14m",
			eta: &prstatus.ETA{Known: true, In: 14 * time.Minute, CIMedian: 7 * time.Minute, Measurements: 5}},
		{name: "the PR ahead merged: one CI run left", events: []events.Data{
			approve(base(other, headB)), &events.MergeQueued{Base: base(other, headB), Position: 1, BaseBranch: "main", ETA: serialETA},
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 2, BaseBranch: "main", ETA: serialETA},
			&events.Merged{Base: base(other, headB), MergeSHA: tip},
		}, want: "approved by alice — 1st in the merge queue for main, merges in ~7m",
			eta: &prstatus.ETA{Known: true, In: 7 * time.Minute, CIMedian: 7 * time.Minute, Measurements: 5}},
		{name: "fewer than three measurements: unknown", events: []events.Data{
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", ETA: &events.QueueETA{Measurements: 2, Depth: 1}},
		}, want: "approved by alice — 1st in the merge queue for main, ETA unknown", eta: &prstatus.ETA{Measurements: 2}},
		{name: "speculative, fifth at depth 4: the second batch", events: []events.Data{
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 5, BaseBranch: "main", Mode: prstatus.Speculative,
				Ahead: []int{41, 42, 43, 44}, ETA: &events.QueueETA{Known: true, Seconds: 1200, CIMedianSeconds: 600, Measurements: 3, Depth: 4}},
		}, want: "queued 5th on main, tested together with #41, #42, #43, #44, merges in ~20m",
			eta: &prstatus.ETA{Known: true, In: 20 * time.Minute, CIMedian: 10 * time.Minute, Measurements: 3}},
		{name: "a candidate re-run once", events: []events.Data{
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", Mode: prstatus.Speculative,
				ETA: &events.QueueETA{Known: true, Seconds: 600, CIMedianSeconds: 600, Measurements: 3, Depth: 4}},
			&events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateBuilt, Candidate: cand, Branch: "prloop/queue/main/1", BaseSHA: tip, Position: 1},
			&events.MergeWaiting{Base: base(pr1, cand), BaseBranch: "main"},
			&events.MergeCandidate{Base: base(pr1, headA), BaseBranch: "main", State: events.CandidateRerun, Candidate: cand, Branch: "prloop/queue/main/1", BaseSHA: tip, Position: 1,
				Detail: "re-running the failed jobs of test once before removing the PR"},
		}, want: "in the merge queue of main, rides in candidate 1 on prloop/queue/main/1 at c0ffee1: failed; re-running its failed jobs once, merges in ~10m",
			eta: &prstatus.ETA{Known: true, In: 10 * time.Minute, CIMedian: 10 * time.Minute, Measurements: 3}},
		{name: "no estimate from the merger: no ETA", events: []events.Data{
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main"},
		}, want: "approved by alice — 1st in the merge queue for main"},
		{name: "merged: no ETA", events: []events.Data{
			approve(base(pr1, headA)), &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main", ETA: serialETA},
			&events.Merged{Base: base(pr1, headA), MergeSHA: tip},
		}, want: "merged as ba5e123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := prstatus.NewBoard()
			for i, e := range tt.events {
				b.Apply(e, t0.Add(time.Duration(i)*time.Second))
			}
			assert.Equal(t, tt.want, b.Line(pr1, opts).Text)
			row, ok := b.Row(pr1, opts)
			require.True(t, ok)
			assert.Equal(t, tt.eta, row.ETA, "the row every view draws carries the same estimate")
		})
	}
}
