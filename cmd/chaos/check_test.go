package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// TestEscalationState: what the check counts as a requested escalation and
// as one carried out, whatever else the PR's events hold (the speculative
// queue's candidates, a conflict handed to the agent).
func TestEscalationState(t *testing.T) {
	t.Parallel()
	b := events.Base{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}, HeadSHA: "h1"}
	tests := []struct {
		name      string
		events    []events.Data
		pending   []events.Reason
		done      map[string]bool
		requested int
	}{
		{name: "no escalation", events: []events.Data{&events.MergeQueued{Base: b, BaseBranch: "main"}, &events.Merged{Base: b, MergeSHA: "m"}},
			done: map[string]bool{}},
		{name: "a review timeout is a request", events: []events.Data{&events.ReviewTimeout{Base: b, Reason: events.ReasonReviewTimeout}},
			pending: []events.Reason{events.ReasonReviewTimeout}, done: map[string]bool{}, requested: 1},
		{name: "a request carried out", events: []events.Data{
			&events.EscalationRequested{Base: b, Reason: events.ReasonChecksFailed, Epoch: 1},
			&events.Escalated{Base: b, Reason: events.ReasonChecksFailed, Epoch: 1},
		}, done: map[string]bool{"checks_failed/1": true}, requested: 1},
		{name: "candidates built and given up are no request", events: []events.Data{
			&events.MergeQueued{Base: b, BaseBranch: "main", Mode: "speculative", Ahead: []int{2}},
			&events.MergeCandidate{Base: b, BaseBranch: "main", State: events.CandidateBuilt, Candidate: "c1", Position: 2, Ahead: []int{2}},
			&events.MergeCandidate{Base: b, BaseBranch: "main", State: events.CandidateInvalidated, Candidate: "c1", Position: 2, Detail: "main moved"},
		}, done: map[string]bool{}},
		{name: "a conflict handed to the agent is no request", events: []events.Data{
			&events.ConflictResolveRequested{Base: b, BaseBranch: "main", BaseSHA: "t1", Epoch: 1},
			&events.FeedbackAddressed{Base: events.Base{PR: b.PR, HeadSHA: "h2"}, PreviousHeadSHA: "h1", FixCycle: 1},
		}, done: map[string]bool{}},
		{name: "a conflict the agent could not resolve is, once the feedback service asks", events: []events.Data{
			&events.ConflictResolveRequested{Base: b, BaseBranch: "main", BaseSHA: "t1", Epoch: 1},
			&events.EscalationRequested{Base: b, Reason: events.ReasonMergeConflict, Epoch: 1},
		}, pending: []events.Reason{events.ReasonMergeConflict}, done: map[string]bool{}, requested: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var evs []seen
			for i, d := range tt.events {
				evs = append(evs, seen{seq: uint64(i + 1), typ: d.EventType(), data: d})
			}
			pending, done, requested := escalationState(evs)
			assert.ElementsMatch(t, tt.pending, pending)
			assert.Equal(t, tt.done, done)
			assert.Equal(t, tt.requested, requested)
		})
	}
}
