package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// The speculative queue's and conflict resolution's events, as the tests
// below apply them: acme/w#1 queued behind #41, riding in candidate 2.
var (
	specPR   = ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	specHead = "0123456789abcdef0123456789abcdef01234567"
	specCand = "c0ffee1c0ffee1c0ffee1c0ffee1c0ffee1c0ff"
	specTip  = "ba5e123ba5e123ba5e123ba5e123ba5e123ba5e"
)

func specBase() events.Base { return events.Base{PR: specPR, HeadSHA: specHead} }

func specApproved() *events.ReviewApproved {
	return &events.ReviewApproved{Base: specBase(), Status: events.StatusApproved, Approvers: []string{"alice"}}
}

func specQueued() *events.MergeQueued {
	return &events.MergeQueued{Base: specBase(), Position: 2, BaseBranch: "main", Mode: prstatus.Speculative, Ahead: []int{41}}
}

func specCandidate(state, detail string) *events.MergeCandidate {
	return &events.MergeCandidate{Base: specBase(), BaseBranch: "main", State: state, Candidate: specCand, Branch: "prloop/queue/main/2",
		BaseSHA: specTip, Position: 2, Ahead: []int{41}, Detail: detail}
}

func specConflict() *events.ConflictResolveRequested {
	return &events.ConflictResolveRequested{Base: specBase(), BaseBranch: "main", BaseSHA: specTip, Detail: "both modified a.go", Epoch: 1}
}

// TestDescribe_EveryType: `prloop events` and explain's history say
// something of every event type.
func TestDescribe_EveryType(t *testing.T) {
	t.Parallel()
	for _, typ := range events.Types {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			assert.NotEmpty(t, describe(sampleOf(typ, specPR)))
		})
	}
}

// TestExplain_SpeculativeQueueAndConflicts: explain's records and next
// step say which candidate a PR rides in, and that the agent resolves its
// conflict.
func TestExplain_SpeculativeQueueAndConflicts(t *testing.T) {
	t.Parallel()
	s := cliSettings{MaxFixCycles: 2, Label: "human-review-required"}
	tests := []struct {
		name   string
		events []events.Data
		live   *liveState
		line   string
		want   []string // regular expressions on the printed explanation
		next   string
	}{
		{name: "queued, no candidate yet", events: []events.Data{
			&events.MergeQueued{Base: events.Base{PR: specPR.RepoRef().PR(41), HeadSHA: specTip}, Position: 1, BaseBranch: "main", Mode: prstatus.Speculative},
			specApproved(), specQueued()},
			line: "queued 2nd on main, tested together with #41",
			want: []string{`merge queue\s+position 2 for main \(speculative, tested together with #41\); ahead: acme/w#41`},
			next: "wait: the merger builds the candidate that tests it together with #41"},
		{name: "rides in a candidate, CI running", events: []events.Data{specApproved(), specQueued(), specCandidate(events.CandidateBuilt, "")},
			line: "in the merge queue of main, rides in candidate 2 (with #41 ahead) on prloop/queue/main/2 at c0ffee1: CI running",
			want: []string{`candidate\s+2 \(with #41 ahead\) on prloop/queue/main/2 at c0ffee1, from main at ba5e123: CI running`},
			next: "wait: CI runs on candidate prloop/queue/main/2 (c0ffee1)"},
		{name: "the candidate waits for checks", events: []events.Data{specApproved(), specQueued(), specCandidate(events.CandidateBuilt, ""),
			&events.MergeWaiting{Base: specBase(), BaseBranch: "main", Checks: []string{"ci/build"}}},
			line: "in the merge queue of main, rides in candidate 2 (with #41 ahead) on prloop/queue/main/2 at c0ffee1: waiting for checks: ci/build",
			want: []string{`candidate\s+.*: waiting for checks: ci/build`},
			next: "wait for the checks to pass on candidate prloop/queue/main/2 (c0ffee1): ci/build"},
		{name: "the candidate is green", events: []events.Data{specApproved(), specQueued(), specCandidate(events.CandidateBuilt, ""),
			&events.MergeWaiting{Base: specBase(), BaseBranch: "main", Checks: []string{}}},
			line: "in the merge queue of main, rides in candidate 2 (with #41 ahead) on prloop/queue/main/2 at c0ffee1: checks passed, merging",
			want: []string{`candidate\s+.*: checks passed, merging`},
			next: "wait: the candidate passed its checks; the merger merges it after #41"},
		{name: "the candidate was invalidated", events: []events.Data{specApproved(), specQueued(), specCandidate(events.CandidateInvalidated, "#41 left the queue")},
			line: "in the merge queue of main, candidate c0ffee1 invalidated (#41 left the queue); a new one is being built",
			want: []string{`candidate\s+c0ffee1 invalidated: #41 left the queue; a new one is being built`},
			next: "wait: the merger builds a new candidate for main"},
		{name: "the agent resolves a conflict GitHub shows", events: []events.Data{specApproved(), specQueued(), specConflict()},
			live: &liveState{State: "open", Head: specHead, Base: "main", MergeableState: "dirty"},
			line: "conflicts with main at ba5e123 — agent resolving (cycle 1 of 2)",
			want: []string{`merge queue\s+not queued`, `conflict\s+with main at ba5e123: the agent is resolving it \(both modified a.go\)`},
			next: "wait: the agent is resolving the conflict with main; the resolved head then needs review again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := prstatus.NewBoard()
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, e := range tt.events {
				b.Apply(e, at.Add(time.Duration(i)*time.Second))
			}
			x := explanation{PR: specPR, GitHub: tt.live, History: []historyEntry{}}
			x.Line = b.Line(specPR, s.lineOptions())
			x.Records = recordsOf(b, specPR, nil, s)
			x.Next = nextStep(b.Get(specPR), x, s)
			assert.Equal(t, tt.line, x.Line.Text)
			assert.Equal(t, tt.next, x.Next)
			var out bytes.Buffer
			require.NoError(t, printExplanation(&out, x, time.Now()))
			for _, w := range tt.want {
				assert.Regexp(t, w, out.String())
			}
		})
	}
}

// TestStatus_ReasonSaysWhichCandidate: `prloop status`'s REASON is the
// line, candidate and all.
func TestStatus_ReasonSaysWhichCandidate(t *testing.T) {
	t.Parallel()
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, e := range []events.Data{specApproved(), specQueued(), specCandidate(events.CandidateBuilt, "")} {
		b.Apply(e, at.Add(time.Duration(i)*time.Second))
	}
	rows := b.Rows(prstatus.Options{})
	require.Len(t, rows, 1)
	assert.Equal(t, events.TypeMergeCandidate, rows[0].Last, "the board's latest event, the merger's")
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, rows, at.Add(time.Minute)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	assert.Regexp(t, `PRMergeCandidate \(58s ago\)\s+`+regexp.QuoteMeta("in the merge queue of main, rides in candidate 2 (with #41 ahead) on prloop/queue/main/2 at c0ffee1: CI running")+"$", lines[1])
}
