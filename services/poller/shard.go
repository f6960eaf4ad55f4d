package poller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// LeaseBucket is the KV bucket where poller replicas register and lease
// repositories.
const LeaseBucket = "PRLOOP_POLLER_LEASES"

// Leases is the part of jetstream.KeyValue the sharder uses.
type Leases interface {
	kvlease.KV
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error)
}

var _ Leases = (jetstream.KeyValue)(nil)

// EnsureLeases creates or updates the lease bucket.
func EnsureLeases(ctx context.Context, js kvlease.BucketManager, replicas int) (jetstream.KeyValue, error) {
	return kvlease.EnsureBucket(ctx, js, LeaseBucket, "prloop poller replicas and their repository leases", replicas)
}

// Sharder spreads repositories over poller replicas, so that every
// repository is probed by exactly one replica and a dead replica's
// repositories are taken over. It is built on pkg/kvlease.
//
// Each replica holds a lease on replica.<id> and renews it; the live set is
// the replicas whose lease has not expired. Each repository's preferred
// owner is the live replica that ranks highest for it by rendezvous
// hashing, so adding or losing a replica moves only its share. A replica
// leases a repository (repo.<owner>.<repo>), renews the lease every TTL/4,
// and releases leases it is no longer the preferred owner of. A lease
// nobody renews expires after the TTL and the new preferred owner takes it
// on its next round: takeover within TTL + TTL/4.
type Sharder struct {
	kv  Leases
	id  string
	ttl time.Duration
	log *slog.Logger

	mu        sync.Mutex
	held      map[string]*kvlease.Lease // repo key → lease
	reg       *kvlease.Lease
	unclaimed map[string]int // repo key → rounds seen with no owner
	onAcquire func(ghref.Repo)
	onRelease func(ghref.Repo)
}

// NewSharder returns a sharder for this replica.
func NewSharder(kv Leases, ttl time.Duration, log *slog.Logger) *Sharder {
	id := sanitizeID(kvlease.HolderID())
	return &Sharder{kv: kv, id: id, ttl: ttl, log: log.With("replica", id), held: map[string]*kvlease.Lease{}, unclaimed: map[string]int{}}
}

// ID names this replica.
func (s *Sharder) ID() string { return s.id }

// Owns reports whether this replica holds repo's lease.
func (s *Sharder) Owns(repo ghref.Repo) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.held[leaseKey(repo)]
	return ok
}

// Held returns the number of repositories this replica holds.
func (s *Sharder) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Run renews, claims and releases leases every TTL/4 until ctx is done,
// then releases every lease it holds so the others take over at once.
func (s *Sharder) Run(ctx context.Context, repos func() []ghref.Repo) {
	t := time.NewTicker(max(s.ttl/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		if err := s.Tick(ctx, repos()); err != nil && ctx.Err() == nil {
			s.log.Warn("lease round failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			s.releaseAll()
			return
		case <-t.C:
		}
	}
}

// Tick is one lease round.
func (s *Sharder) Tick(ctx context.Context, repos []ghref.Repo) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	live, owned, err := s.scan(ctx)
	if err != nil {
		return err
	}
	opts := kvlease.Options{TTL: s.ttl, Note: "poller " + s.id}
	for _, repo := range repos {
		key := leaseKey(repo)
		preferred := rendezvous(live, key) == s.id
		s.mu.Lock()
		l, held := s.held[key]
		s.mu.Unlock()
		switch {
		case held && preferred:
			if err := l.Renew(ctx); err != nil {
				s.lose(repo, key, err)
			}
		case held:
			// Another live replica ranks higher: hand the repository over.
			if err := l.Release(ctx); err != nil {
				s.log.Warn("release lease failed; it will expire", "repo", repo.String(), "err", err)
			}
			s.lose(repo, key, nil)
		case !owned[key] && (preferred || s.staleUnclaimed(key)):
			l, err := kvlease.Acquire(ctx, s.kv, key, s.id, opts)
			if err != nil {
				if !errors.Is(err, kvlease.ErrHeld) {
					s.log.Warn("claim lease failed", "repo", repo.String(), "err", err)
				}
				continue
			}
			s.setHeld(key, l)
			s.log.Info("repository leased", "repo", repo.String())
			if s.onAcquire != nil {
				s.onAcquire(repo)
			}
		default:
			s.noteUnclaimed(key, owned[key])
		}
	}
	return nil
}

// register takes or renews this replica's own lease.
func (s *Sharder) register(ctx context.Context) error {
	if s.reg != nil {
		if err := s.reg.Renew(ctx); err == nil {
			return nil
		}
		s.reg = nil
	}
	l, err := kvlease.Acquire(ctx, s.kv, "replica."+s.id, s.id, kvlease.Options{TTL: s.ttl, Note: "poller replica"})
	if err != nil {
		return fmt.Errorf("register replica %s: %w", s.id, err)
	}
	s.reg = l
	return nil
}

// staleUnclaimed lets any replica claim a repository that has had no owner
// for three rounds: a safety net for a preferred replica that does not know
// the repository yet.
func (s *Sharder) staleUnclaimed(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unclaimed[key] >= 3
}

func (s *Sharder) noteUnclaimed(key string, owned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owned {
		delete(s.unclaimed, key)
	} else {
		s.unclaimed[key]++
	}
}

func (s *Sharder) setHeld(key string, l *kvlease.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[key] = l
	delete(s.unclaimed, key)
}

func (s *Sharder) lose(repo ghref.Repo, key string, err error) {
	s.mu.Lock()
	delete(s.held, key)
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("repository lease lost", "repo", repo.String(), "err", err)
	} else {
		s.log.Info("repository handed over", "repo", repo.String())
	}
	if s.onRelease != nil {
		s.onRelease(repo)
	}
}

// scan lists the live replicas and the repositories under an unexpired
// lease. Registrations of replicas long dead are deleted on the way.
func (s *Sharder) scan(ctx context.Context) (live []string, owned map[string]bool, err error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list leases: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop()
	owned = map[string]bool{}
	now := time.Now()
	for _, k := range keys {
		if !strings.HasPrefix(k, "replica.") && !strings.HasPrefix(k, "repo.") {
			continue // the search's lease and round (searchlease.go)
		}
		rec, ok, err := kvlease.Peek(ctx, s.kv, k)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		if rec.Expired(now) {
			if strings.HasPrefix(k, "replica.") && now.Sub(rec.Expires) > 10*s.ttl {
				_ = s.kv.Delete(ctx, k) // a replica gone for good
			}
			continue
		}
		switch {
		case strings.HasPrefix(k, "replica."):
			live = append(live, strings.TrimPrefix(k, "replica."))
		case strings.HasPrefix(k, "repo."):
			owned[k] = true
		}
	}
	return live, owned, nil
}

func (s *Sharder) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.mu.Lock()
	held := s.held
	s.held = map[string]*kvlease.Lease{}
	s.mu.Unlock()
	for _, l := range held {
		_ = l.Release(ctx)
	}
	if s.reg != nil {
		_ = s.reg.Release(ctx)
	}
}

// rendezvous returns the live replica ranking highest for key.
func rendezvous(live []string, key string) string {
	best, bestScore := "", uint64(0)
	for _, id := range live {
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(id))
		if sc := h.Sum64(); best == "" || sc > bestScore || (sc == bestScore && id < best) {
			best, bestScore = id, sc
		}
	}
	return best
}

func leaseKey(r ghref.Repo) string {
	return "repo." + events.EncodeToken(r.Owner) + "." + events.EncodeToken(r.Name)
}

// sanitizeID keeps a replica id valid as a KV key token.
func sanitizeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "replica-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return b.String()
}
