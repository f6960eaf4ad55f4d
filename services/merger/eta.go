package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/kvlease"
)

// The estimate of when a queued PR merges (docs/queue.md, ETA). The
// merger measures each base's CI time and keeps a rolling window of it in
// its bucket (ciKey: the merger is its one writer); PRMergeQueued carries
// the estimate made from it (queueETA), and pkg/prstatus draws it again
// from the PR's current place with the same rule, pkg/eta's Estimate.
//
// A CI time is measured from the push to the verdict, on prloop's clock:
// from when prloop pushed the commit (a candidate's BuiltAt; a head
// prloop's branch update made, the entry's WaitingSince) to the first
// pass that saw its checks conclusive (green, or failed). That is the
// wait a queued PR actually has, CI runners' queueing included, and needs
// no clock but prloop's; it runs late by at most one
// PRLOOP_MERGE_POLL_INTERVAL. Heads prloop did not push are not measured:
// when their CI started is not prloop's to know.

// ciKey names a base's measured CI times in the bucket: ci.<qid>.
func ciKey(qid string) string { return "ci." + qid }

// CITimes is a base's measured CI times, oldest first in each window: on
// the speculative queue's candidates and on the PR heads prloop pushed
// (the serial queue's updates).
type CITimes struct {
	Candidates eta.Samples `json:"candidates,omitempty"`
	Heads      eta.Samples `json:"heads,omitempty"`
}

// stats returns the medians in the order an estimate for a queue of mode
// prefers them: what that queue waits for first, the other as a fallback.
func (c CITimes) stats(mode string) []eta.Stat {
	if mode == QueueSpeculative {
		return []eta.Stat{c.Candidates.Stat(), c.Heads.Stat()}
	}
	return []eta.Stat{c.Heads.Stat(), c.Candidates.Stat()}
}

// queueETA is the estimate PRMergeQueued carries for the PR at position
// of a queue of mode testing depth PRs at once (the serial queue: one). It
// is pure.
func queueETA(position int, mode string, depth int, ci CITimes) *events.QueueETA {
	if mode != QueueSpeculative {
		depth = 1
	}
	stats := ci.stats(mode)
	out := &events.QueueETA{Depth: depth}
	for _, s := range stats {
		if s.Known() {
			out.CIMedianSeconds, out.Measurements = secondsOf(s.Median), s.N
			break
		}
		out.Measurements = max(out.Measurements, s.N)
	}
	if d, ok := eta.Estimate(position, depth, stats...); ok {
		out.Known, out.Seconds = true, secondsOf(d)
	}
	return out
}

// secondsOf is d in seconds, to the millisecond.
func secondsOf(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// candidateSamples returns the CI time of each of the first kept
// candidates of a chain whose checks are conclusive (checks[i], in chain
// order): now less when it was pushed. It is pure.
func candidateSamples(chain []Candidate, checks []Checks, kept int, now time.Time) []eta.Sample {
	var out []eta.Sample
	for i := range min(kept, len(chain), len(checks)) {
		c := chain[i]
		if st := checks[i].State; (st == ChecksGreen || st == ChecksFailed) && !c.BuiltAt.IsZero() {
			out = append(out, eta.Sample{SHA: c.SHA, Took: now.Sub(c.BuiltAt)})
		}
	}
	return out
}

// headSample returns the CI time of the serial queue's entry e's head, when
// prloop pushed it (its branch update, which set WaitingSince) and what
// reported on it is conclusive. It is pure.
func headSample(e Entry, o Observation, pol Policy) (eta.Sample, bool) {
	if !pol.RequireChecks || o.Checks == nil || o.PR.HeadSHA != e.Head || e.UpdateAnnounced != e.Head || e.WaitingSince.IsZero() {
		return eta.Sample{}, false
	}
	in := *o.Checks
	in.Seen = e.SeenChecks
	c := EvaluateChecks(in)
	if (c.State != ChecksGreen && c.State != ChecksFailed) || len(c.Reported) == 0 {
		return eta.Sample{}, false
	}
	return eta.Sample{SHA: e.Head, Took: o.Now.Sub(e.WaitingSince)}, true
}

// ciTimes reads a base's measured CI times (none when it has none, or
// when its record cannot be read: an estimate is never worth a failure).
func (s *Service) ciTimes(ctx context.Context, qid string) CITimes {
	e, err := s.d.Queue.Get(ctx, ciKey(qid))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.Info("cannot read the measured CI times; the estimate is unknown", "queue", qid, "err", err)
		}
		return CITimes{}
	}
	var c CITimes
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		s.log.Warn("unreadable measured CI times; starting over", "queue", qid, "err", err)
		return CITimes{}
	}
	return c
}

// measure adds samples to a base's measured CI times, of candidates or of
// heads. Each commit counts once (eta.Samples.Add), so a pass repeated
// after a restart, or a green candidate seen by several passes, is not
// counted twice; commits this replica has measured already are not even
// read again. A failure is logged: the queue does not wait for it.
func (s *Service) measure(ctx context.Context, qid string, candidates bool, samples ...eta.Sample) {
	var fresh []eta.Sample
	s.mu.Lock()
	for _, x := range samples {
		if !s.measured[x.SHA] {
			fresh = append(fresh, x)
		}
	}
	s.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	_, err := kvlease.Update(ctx, s.d.Queue, ciKey(qid), 3, func(cur []byte, _ uint64) ([]byte, error) {
		var c CITimes
		if len(cur) > 0 {
			_ = json.Unmarshal(cur, &c) // unreadable: start over
		}
		w := &c.Heads
		if candidates {
			w = &c.Candidates
		}
		for _, x := range fresh {
			*w, _ = w.Add(x)
		}
		return json.Marshal(c)
	})
	if err != nil {
		s.log.Info("cannot record the measured CI time", "queue", qid, "err", fmt.Errorf("measure CI of %s: %w", qid, err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.measured) > maxMeasured {
		clear(s.measured) // only a saving of reads: the record dedupes
	}
	for _, x := range fresh {
		s.measured[x.SHA] = true
	}
}

// maxMeasured bounds the commits a replica remembers having measured.
const maxMeasured = 4096
