package poller

import (
	"maps"
	"slices"
	"time"
)

// Tracked are the keys of the PRs w keeps a written line of, sorted, for
// tests that show the writer forgets PRs that are done.
func (w *StatusWriter) Tracked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.last))
}

// Sizes is how many entries the poller's per-PR maps hold over all its
// repositories, and how many permissions its cache holds, for tests that
// show closed PRs are forgotten.
type Sizes struct {
	PRs, Pending, Memo, Seen, Closed, Permissions int
}

// Sizes counts the entries of s's per-PR maps.
func (s *Service) Sizes() Sizes {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Sizes{Permissions: s.auth.Len()}
	for _, rw := range s.repos {
		rw.mu.Lock()
		out.PRs += len(rw.prs)
		out.Pending += len(rw.pending)
		out.Memo += len(rw.memo)
		out.Seen += len(rw.seen)
		out.Closed += len(rw.closed)
		rw.mu.Unlock()
	}
	return out
}

// SetReopenWatchCap bounds each repository's set of closed PRs watched for
// a reopen; call it before Run.
func (s *Service) SetReopenWatchCap(n int) { s.reopenWatchCap = n }

// SetSweepInterval sets how often the records of long-closed PRs are
// deleted; call it before Run.
func (s *Service) SetSweepInterval(d time.Duration) { s.sweepInterval = d }
