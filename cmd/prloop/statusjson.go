package main

import (
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/prstatus"
)

// StatusSchema names the version of `prloop status -json`'s document
// (docs/operations.md describes it). A change that removes or renames a
// field, or changes a field's meaning, gets a new version; new fields do
// not.
const StatusSchema = "prloop.status/v1"

// statusDoc is `prloop status -json`: the board as the table shows it,
// without prloop's internal records. Times that are not known are left
// out, not written as zero.
type statusDoc struct {
	Schema string `json:"schema"`
	// GeneratedAt is when the document was drawn: the ages are from it.
	GeneratedAt time.Time  `json:"generated_at"`
	PRs         []statusPR `json:"prs"`
}

// statusPR is one PR of statusDoc.
type statusPR struct {
	// PR is owner/repo#N; URL its page on GitHub when an event carried it.
	PR    string `json:"pr"`
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
	// State is pending, success or error (a human is needed), as
	// prloop's commit status and the page say; Line is where it stands.
	State prstatus.State `json:"state"`
	Line  string         `json:"line"`
	// Head is the head commit the events last named.
	Head     string `json:"head_sha,omitempty"`
	FixCycle int    `json:"fix_cycle"`
	// Queue is its place in its base branch's merge queue, absent when it
	// is not queued.
	Queue *statusQueue `json:"queue,omitempty"`
	// Escalation is why a human is needed, absent when none is.
	Escalation events.Reason `json:"escalation,omitempty"`
	Merged     bool          `json:"merged"`
	Closed     bool          `json:"closed"`
	// LastEvent is its latest event, LastEventAt when it happened and
	// AgeSeconds how long before GeneratedAt (never negative).
	LastEvent   events.Type `json:"last_event,omitempty"`
	LastEventAt time.Time   `json:"last_event_at,omitzero"`
	AgeSeconds  *float64    `json:"age_seconds,omitempty"`
}

// statusQueue is a PR's place in a merge queue.
type statusQueue struct {
	Base     string `json:"base"`
	Position int    `json:"position"`
	// ETA is when it is expected to merge, absent when the merger made no
	// estimate.
	ETA *statusETA `json:"eta,omitempty"`
}

// statusETA is a queued PR's estimate (docs/queue.md, ETA): Seconds
// until it merges when Known, from the median CI time over Measurements
// runs; unknown below three.
type statusETA struct {
	Known           bool    `json:"known"`
	Seconds         float64 `json:"seconds,omitempty"`
	CIMedianSeconds float64 `json:"ci_median_seconds,omitempty"`
	Measurements    int     `json:"measurements"`
}

// statusJSON is the document of rows at now.
func statusJSON(rows []prstatus.Row, now time.Time) statusDoc {
	doc := statusDoc{Schema: StatusSchema, GeneratedAt: now.UTC(), PRs: make([]statusPR, 0, len(rows))}
	for _, r := range rows {
		p := statusPR{
			PR: r.PR.String(), URL: r.PR.URL, Title: r.Title, State: r.Line.State, Line: r.Line.Text, Head: r.Head, FixCycle: r.FixCycle,
			Escalation: r.Escalation, Merged: r.Merged, Closed: r.Closed, LastEvent: r.Last,
		}
		if !r.LastAt.IsZero() {
			p.LastEventAt = r.LastAt.UTC()
			age := max(0, now.Sub(r.LastAt)).Round(time.Second).Seconds()
			p.AgeSeconds = &age
		}
		if r.Position > 0 {
			p.Queue = &statusQueue{Base: r.Base, Position: r.Position}
			if e := r.ETA; e != nil {
				p.Queue.ETA = &statusETA{Known: e.Known, Seconds: e.In.Seconds(), CIMedianSeconds: e.CIMedian.Seconds(), Measurements: e.Measurements}
			}
		}
		doc.PRs = append(doc.PRs, p)
	}
	return doc
}
