package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestUntestedMoves: what the check "main only moves to a tree CI passed"
// counts as a violation, row by row.
func TestUntestedMoves(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	merge := func(to string, s int) ghsim.BranchMove {
		return ghsim.BranchMove{Branch: "main", To: to, At: at(s), Via: "merge of #1"}
	}
	ci := func(sha, state string, s int) ghsim.StatusRecord {
		return ghsim.StatusRecord{SHA: sha, Context: ciContext, State: state, Created: at(s)}
	}
	trees := map[string]string{"head": "T1", "head2": "T1", "other": "T2", "p1": "T8"}
	chain := []treeCommit{{sha: "m1", tree: "T1"}}
	push := func(to string, s int) ghsim.BranchMove {
		return ghsim.BranchMove{Branch: "main", To: to, At: at(s), Via: "push by dev"}
	}
	// A human's push p1, then a merge onto it whose tree (T1) CI never saw.
	raced := []treeCommit{{sha: "p1", tree: "T8"}, {sha: "m1", tree: "T1"}}
	tests := []struct {
		name           string
		chain          []treeCommit
		moves          []ghsim.BranchMove
		statuses       []ghsim.StatusRecord
		escalated      map[int]bool
		bad, raced     int
		merges, pushes int
	}{
		{name: "merged the tree CI passed on the head before", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "success", 5)}, merges: 1},
		{name: "CI passed the tree only after main moved", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "success", 11)}, bad: 1, merges: 1},
		{name: "CI passed the same moment main moved", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "success", 10)}, merges: 1},
		{name: "CI passed another tree: the head merged onto a newer main", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("other", "success", 5)}, bad: 1, merges: 1},
		{name: "CI failed the tree, then passed it after the merge", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "failure", 5), ci("head", "success", 12)}, bad: 1, merges: 1},
		{name: "CI passed, then failed the tree before the merge", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "success", 5), ci("head", "failure", 8)}, bad: 1, merges: 1},
		{name: "pending on the head, passed on another commit with the same tree", chain: chain, moves: []ghsim.BranchMove{merge("m1", 10)},
			statuses: []ghsim.StatusRecord{ci("head", "pending", 5), ci("head2", "success", 6)}, merges: 1},
		{name: "a human's push to main is nobody's merge", chain: []treeCommit{{sha: "p1", tree: "T9"}},
			moves: []ghsim.BranchMove{{Branch: "main", To: "p1", At: at(1), Via: "push by human"}}, pushes: 1},
		{name: "main moved by nothing the simulator made", chain: chain, bad: 1},
		{name: "a merge raced a human's push to main and was escalated", chain: raced,
			moves: []ghsim.BranchMove{push("p1", 9), merge("m1", 10)}, statuses: []ghsim.StatusRecord{ci("other", "success", 5)},
			escalated: map[int]bool{1: true}, raced: 1, merges: 1, pushes: 1},
		{name: "a merge raced a human's push but nobody was called", chain: raced,
			moves: []ghsim.BranchMove{push("p1", 9), merge("m1", 10)}, statuses: []ghsim.StatusRecord{ci("other", "success", 5)},
			escalated: map[int]bool{2: true}, bad: 1, merges: 1, pushes: 1},
		{name: "a human's push long before the merge is no race", chain: raced,
			moves: []ghsim.BranchMove{push("p1", 1), merge("m1", 10)}, statuses: []ghsim.StatusRecord{ci("other", "success", 0)},
			escalated: map[int]bool{1: true}, bad: 1, merges: 1, pushes: 1},
		{name: "an untested merge right after another merge is no race", chain: raced,
			moves:     []ghsim.BranchMove{{Branch: "main", To: "p1", At: at(9), Via: "merge of #2"}, merge("m1", 10)},
			statuses:  []ghsim.StatusRecord{ci("p1", "success", 5), ci("other", "success", 5)},
			escalated: map[int]bool{1: true}, bad: 1, merges: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := untestedMoves(tt.chain, tt.moves, tt.statuses, trees, tt.escalated)
			assert.Len(t, j.bad, tt.bad, "%q", j.bad)
			assert.Len(t, j.raced, tt.raced, "%q", j.raced)
			assert.Equal(t, tt.merges, j.merges)
			assert.Equal(t, tt.pushes, j.pushes)
		})
	}
}
