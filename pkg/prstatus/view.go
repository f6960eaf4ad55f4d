package prstatus

import (
	"slices"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Row is one PR as every view shows it: `prloop status` (its table and
// -json), `prloop explain` and the web page all draw it from the same board
// with Board.Row, so they cannot disagree on where a PR stands (State and
// Text of its Line) or on how long ago something last happened to it
// (Age of LastAt).
type Row struct {
	PR    ghref.PR
	Title string
	Head  string
	Line  Line
	// FixCycle is the fix being made or the fixes pushed.
	FixCycle int
	// Base and Position are its merge queue and place in it (0: not
	// queued).
	Base     string
	Position int
	// ETA is when it is expected to merge (Board.ETA), nil when it is
	// not queued or the merger made no estimate.
	ETA *ETA
	// Escalation is why a human is needed, while one is ("" once it is
	// merged or closed).
	Escalation events.Reason
	Merged     bool
	Closed     bool
	// Last is its latest event and LastAt when it happened.
	Last   events.Type
	LastAt time.Time
}

// Row returns pr as the views show it; ok is false when no event named it.
func (b *Board) Row(pr ghref.PR, o Options) (r Row, ok bool) {
	p := b.Get(pr)
	if p == nil {
		return Row{PR: pr, Line: b.Line(pr, o)}, false
	}
	r = Row{
		PR: p.PR, Title: p.Title, Head: p.Head, Line: b.Line(pr, o), FixCycle: p.FixCycle,
		Position: b.Position(pr), Merged: p.Merged, Closed: p.Closed, Last: p.Last, LastAt: p.LastAt,
	}
	if r.Position > 0 {
		r.Base, r.ETA = p.Base, b.ETA(pr)
	}
	if p.NeedsHuman() {
		r.Escalation = p.Escalation
	}
	return r, true
}

// Rows returns every PR on the board as the views show it, in key order.
func (b *Board) Rows(o Options) []Row {
	prs := b.PRs()
	out := make([]Row, 0, len(prs))
	for _, p := range prs {
		r, _ := b.Row(p.PR, o)
		out = append(out, r)
	}
	return out
}

// NeedsHuman reports whether the PR waits for a human: it is escalated and
// neither merged nor closed since (a merge ends what an escalation asked
// for, whatever the escalator recorded).
func (p *PR) NeedsHuman() bool { return p.Escalation != "" && !p.Merged && !p.Closed }

// Age is how long ago its last event was at now (Age), "" when no event
// named it.
func (r Row) Age(now time.Time) string { return Age(now, r.LastAt) }

// SortByLast orders rows with the PR something last happened to first, as
// the page lists them.
func SortByLast(rows []Row) {
	slices.SortStableFunc(rows, func(x, y Row) int { return y.LastAt.Compare(x.LastAt) })
}
