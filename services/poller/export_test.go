package poller

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
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

// NewSharderAs is NewSharder with a fixed replica id. Ids are random in
// production; a test that needs each replica to own some repositories
// picks its ids, and its repositories' names with Preferred, so the split
// is known instead of left to chance (two random ids put six repositories
// on one replica once in 32 runs).
func NewSharderAs(kv Leases, id string, ttl time.Duration, log *slog.Logger) *Sharder {
	s := NewSharder(kv, ttl, log)
	s.id = sanitizeID(id)
	s.log = log.With("replica", s.id)
	return s
}

// Preferred is the replica of live that rendezvous hashing makes repo's
// owner.
func Preferred(live []string, repo ghref.Repo) string {
	return rendezvous(live, leaseKey(repo))
}
