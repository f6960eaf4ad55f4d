package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/kvlease"
)

// The search with several replicas.
//
// GitHub allows 30 searches a minute per user, for the whole installation,
// and one round shows every watched PR of every repository, whichever
// replica probes it. So one replica at a time searches: the holder of the
// search lease (searchLeaseKey in the replicas' lease bucket, kvlease). It
// stores each round (searchRound: every PR's signature and coverage, and
// when the round ended) under searchRoundKey, and every replica, the
// holder included, applies the last stored round to the repositories it
// probes: a changed PR probes its repository, coverage keeps the
// repository on the idle cadence. A replica applies a round once (by its
// time). When the holder dies, its lease expires after leaseTTL and
// another replica takes it on its next interval; meanwhile the last round
// ages and its coverage lapses after coverageLasts intervals, putting the
// repositories back on the every-interval probe: no signal is missed, it
// only costs more for a while.
const (
	searchLeaseKey = "search.lease"
	searchRoundKey = "search.round"
)

// searchLead is one replica's part in the shared search: the lease when it
// holds it, and the last round it applied.
type searchLead struct {
	w *searchWatch

	lease   *kvlease.Lease
	leadCtx context.Context
	release func()
	applied time.Time
}

// round is one interval: the holder searches and stores the round; every
// replica applies the newest stored round it has not applied yet.
func (l *searchLead) round(ctx context.Context) {
	w := l.w
	if l.holds(ctx) {
		r, ok := w.fetch(l.leadCtx)
		if ok {
			if err := l.store(l.leadCtx, r); err != nil && ctx.Err() == nil {
				w.log.Warn("storing the search round for the other replicas failed", "err", err)
			}
			l.applied = r.At
			w.apply(r)
			return
		}
	}
	r, ok, err := l.load(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("reading the search round failed; probing by the lists meanwhile", "err", err)
		}
		return
	}
	if ok && r.At.After(l.applied) {
		l.applied = r.At
		w.apply(r)
	}
}

// holds reports whether this replica holds the search lease, taking it
// when nobody does.
func (l *searchLead) holds(ctx context.Context) bool {
	if l.lease != nil && l.leadCtx.Err() == nil {
		return true
	}
	l.stop() // lost, if held
	lease, err := kvlease.Acquire(ctx, l.w.leases, searchLeaseKey, l.w.holder, kvlease.Options{
		TTL: leaseTTL(l.w.interval), Note: "poller search " + l.w.holder, Log: l.w.log,
	})
	if err != nil {
		if !errors.Is(err, kvlease.ErrHeld) && ctx.Err() == nil {
			l.w.log.Warn("taking the search lease failed", "err", err)
		}
		return false
	}
	l.lease = lease
	l.leadCtx, l.release = lease.Hold(ctx)
	l.w.log.Info("this replica runs the search")
	return true
}

// stop releases the lease if held, so another replica searches at once.
func (l *searchLead) stop() {
	if l.release != nil {
		l.release()
	}
	l.lease, l.leadCtx, l.release = nil, nil, nil
}

func (l *searchLead) store(ctx context.Context, r searchRound) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode search round: %w", err)
	}
	if _, err := l.w.leases.Put(ctx, searchRoundKey, b); err != nil {
		return fmt.Errorf("store search round: %w", err)
	}
	return nil
}

func (l *searchLead) load(ctx context.Context) (searchRound, bool, error) {
	e, err := l.w.leases.Get(ctx, searchRoundKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return searchRound{}, false, nil
	}
	if err != nil {
		return searchRound{}, false, fmt.Errorf("read search round: %w", err)
	}
	var r searchRound
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return searchRound{}, false, fmt.Errorf("decode search round: %w", err)
	}
	return r, true, nil
}
