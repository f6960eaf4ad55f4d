// Package backoff is prloop's one policy for waiting before a retry: the
// wait doubles from a base with each retry, up to a number of doublings
// and a ceiling, plus an optional random share so that many clients
// failing together do not retry together. Each caller keeps its own bounds
// as a Policy (GitHub requests, the merger's queue, the feedback service's
// agent runs, the escalator's webhook); the computation is here, once.
//
// Not github.com/cenkalti/backoff: its ExponentialBackOff keeps state
// between calls (NextBackOff, elapsed time) and spreads its jitter both
// ways, whereas prloop's callers keep the number of failures in their
// records and ask for the wait before retry n, with jitter only added: so
// Delay is a pure function of n.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff.
type Policy struct {
	// Base is the wait before the first retry.
	Base time.Duration
	// MaxDoublings is how often the wait doubles at most (0: it stays
	// Base).
	MaxDoublings int
	// Max caps the wait before jitter (0: no cap).
	Max time.Duration
	// Jitter adds up to this share of the wait, at random (0: none; 0.25:
	// up to a quarter more).
	Jitter float64
	// Rand draws the jitter: a number in [0, n). Nil is math/rand/v2's
	// Int64N; tests pass a seeded source's.
	Rand func(n int64) int64
}

// Delay is the wait before retry n (1-based; n below 1 counts as 1):
// Base doubled n-1 times, at most MaxDoublings times, capped at Max, plus
// the jitter. It never overflows: a wait that would is the longest
// duration.
func (p Policy) Delay(n int) time.Duration {
	d := p.Base
	for range min(max(n, 1)-1, max(p.MaxDoublings, 0)) {
		if p.Max > 0 && d >= p.Max {
			break
		}
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	if p.Jitter <= 0 || d <= 0 {
		return d
	}
	span := float64(d) * p.Jitter
	if span >= float64(math.MaxInt64-d) {
		return math.MaxInt64
	}
	draw := rand.Int64N
	if p.Rand != nil {
		draw = p.Rand
	}
	return d + time.Duration(draw(int64(span)+1))
}
