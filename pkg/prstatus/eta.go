package prstatus

import (
	"time"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/ghref"
)

// ETA is when a queued PR is expected to merge, from where it stands now
// (docs/queue.md, ETA): the merger's measured CI time for its base (the
// median its PRMergeQueued carried) and pkg/eta's rule, applied to the
// board's position, so that the estimate shortens as the PRs ahead merge.
type ETA struct {
	// Known says enough CI runs were measured (eta.MinSamples); In is
	// then how long until it merges.
	Known bool          `json:"known"`
	In    time.Duration `json:"in,omitempty"`
	// CIMedian is the median CI time over Measurements runs.
	CIMedian     time.Duration `json:"ci_median,omitempty"`
	Measurements int           `json:"measurements"`
}

// ETA returns the estimate for pr: nil when it is not queued or the
// merger made none (an older merger). The position is the merger's count
// in a speculative queue (the PRs it said were ahead, less those seen
// leaving), the board's in a serial one, as the line says it.
func (b *Board) ETA(pr ghref.PR) *ETA {
	p := b.Get(pr)
	if p == nil || !p.Queued() || p.QueueETA == nil {
		return nil
	}
	pos := b.Position(pr)
	if p.QueueMode == Speculative {
		pos = len(b.Batch(pr)) + 1
	}
	st := eta.Stat{Median: time.Duration(p.QueueETA.CIMedianSeconds * float64(time.Second)), N: p.QueueETA.Measurements}
	in, ok := eta.Estimate(pos, p.QueueETA.Depth, st)
	out := &ETA{Known: ok, In: in, Measurements: st.N}
	if ok {
		out.CIMedian = st.Median
	}
	return out
}

// Text says the estimate as the line does: "merges in ~14m" or "ETA
// unknown".
func (e *ETA) Text() string {
	if !e.Known {
		return "ETA unknown"
	}
	return "merges in " + eta.Approx(e.In)
}

// after appends the estimate to a queued PR's line, when there is one and
// it fits in room (what GitHub keeps of a status, less a freeze prefix).
func (e *ETA) after(text string, room int) string {
	if e == nil {
		return text
	}
	if t := text + ", " + e.Text(); len(t) <= room {
		return t
	}
	return text
}
