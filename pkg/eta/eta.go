// Package eta estimates when a queued PR merges: from its place in the
// queue, the batch it rides in and the CI time measured on its base (a
// rolling median). It is pure. The merger measures and announces
// (PRMergeQueued's eta); pkg/prstatus draws the estimate again from the
// PR's current place, with the same Estimate, so that the two never
// disagree on the rule.
package eta

import (
	"fmt"
	"slices"
	"time"
)

// MinSamples is how many measurements a median needs before an estimate
// is made from it: fewer, and the estimate is "unknown" (one slow or
// cached run would be the whole story).
const MinSamples = 3

// Window is how many of the latest measurements the rolling median is
// taken over: old enough runs say little about today's CI.
const Window = 15

// Sample is one measured CI time: the commit (a candidate or a PR head
// prloop pushed) and how long its checks took to reach a verdict.
type Sample struct {
	SHA  string        `json:"sha"`
	Took time.Duration `json:"took"`
}

// Samples is a rolling window of measurements, oldest first.
type Samples []Sample

// Add returns s with x added, the oldest beyond Window dropped; added is
// false (and s unchanged) when x's commit was measured already (a pass
// repeated after a restart, or a candidate seen green twice) or x is not a
// duration.
func (s Samples) Add(x Sample) (_ Samples, added bool) {
	if x.Took <= 0 || x.SHA == "" || slices.ContainsFunc(s, func(o Sample) bool { return o.SHA == x.SHA }) {
		return s, false
	}
	out := append(slices.Clone(s), x)
	return out[max(0, len(out)-Window):], true
}

// Stat is what a window of measurements says: its median and how many
// measurements it holds.
type Stat struct {
	Median time.Duration
	N      int
}

// Known reports whether the median stands on enough measurements.
func (s Stat) Known() bool { return s.N >= MinSamples && s.Median > 0 }

// Stat returns the median of the window (the mean of the middle two for
// an even count) and its size.
func (s Samples) Stat() Stat {
	if len(s) == 0 {
		return Stat{}
	}
	d := make([]time.Duration, len(s))
	for i, x := range s {
		d[i] = x.Took
	}
	slices.Sort(d)
	m := d[len(d)/2]
	if len(d)%2 == 0 {
		m = (d[len(d)/2-1] + d[len(d)/2]) / 2
	}
	return Stat{Median: m, N: len(s)}
}

// Estimate is how long until the PR at position (1: next) of a queue that
// tests depth PRs at once (1: serial) merges: one CI run per batch up to
// and including its own, ceil(position / depth) of them, each taking the
// median of the first stat that is known (the caller's order of
// preference: the candidates' CI time in a speculative queue, the heads'
// in a serial one). ok is false when none is known or the position is not
// a place in a queue.
func Estimate(position, depth int, stats ...Stat) (time.Duration, bool) {
	if position < 1 {
		return 0, false
	}
	depth = max(depth, 1)
	for _, s := range stats {
		if s.Known() {
			batches := (position + depth - 1) / depth
			return time.Duration(batches) * s.Median, true
		}
	}
	return 0, false
}

// Approx says a duration for people, as an estimate: "~1m" at least,
// whole minutes below an hour ("~14m"), hours and minutes above ("~1h05m").
func Approx(d time.Duration) string {
	m := int(d.Round(time.Minute) / time.Minute)
	switch {
	case m < 1:
		return "~1m"
	case m < 60:
		return fmt.Sprintf("~%dm", m)
	}
	return fmt.Sprintf("~%dh%02dm", m/60, m%60)
}
