package github

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prloop/prloop/pkg/kvlease"
)

// One budget for the installation.
//
// GitHub's secondary limits hold for the token, whichever process sends
// the request. With several processes (one per service, several replicas
// of one), each Budget takes a share of every limit through one record in
// a JetStream KV bucket (BudgetShareKey), written with compare-and-set:
// each replica's entry says until when it is alive (renewed every TTL/3)
// and what it claims of each limit, the larger of its share and what it
// used in the limit's window. A replica's share of a limit is an equal
// part among the live replicas, and never more than the others leave:
//
//	share = min(1/live, 1 − Σ others' claims)
//
// Why it holds the total within the limits:
//
//   - A raise is written before it is used (the share is applied after
//     the compare-and-set that stored it), and compare-and-set orders the
//     raises: no two replicas raise on the same view.
//   - A claim covers what its replica may spend until its next write: the
//     local budget never admits beyond the share, and the claim is at
//     least the share and at least the window's usage (the hour's content
//     creation: its usage plus what a minute's share allows, see claim).
//   - A replica that dies (or is cut off from NATS) keeps its claim for
//     GitHub's window after its entry expires: its concurrency until the
//     entry expires, its points and content creation of the minute for a
//     minute more, its content creation of the hour (its usage and a
//     minute's share) for an hour. A replica
//     whose own entry expired unrenewed stops sending (share zero).
//   - A replica that joins takes only what the others leave: at once
//     what they did not use, the rest as their usage of the window ages.
//
// So a restarted replica whose predecessor was idle gets its share at
// once, and one whose predecessor spent its share waits for GitHub's
// window, as GitHub would make it. The record holds one small entry per
// replica; entries of replicas gone for an hour are dropped.

// BudgetShareKey is the KV key of the installation's budget record.
const BudgetShareKey = "github.budget"

// Shares are fractions (0 to 1) of each of GitHub's limits.
type Shares struct {
	Concurrency float64 `json:"concurrency"`
	Points      float64 `json:"points"`
	// CreatesMinute and CreatesHour are the content-creation limits.
	CreatesMinute float64 `json:"creates_minute"`
	CreatesHour   float64 `json:"creates_hour"`
}

// fullShares is a lone process's: every limit whole.
var fullShares = Shares{1, 1, 1, 1}

// shareWindows are how long GitHub counts a request against each limit,
// and so how long a gone replica's claim still counts.
var shareWindows = Shares{Concurrency: 0, Points: 60, CreatesMinute: 60, CreatesHour: 3600}

// shareEntry is one replica's entry in the budget record.
type shareEntry struct {
	Expires time.Time `json:"expires"`
	Claims  Shares    `json:"claims"`
}

// zip combines a and b limit by limit.
func zip(a, b Shares, f func(x, y, window float64) float64) Shares {
	return Shares{
		Concurrency:   f(a.Concurrency, b.Concurrency, shareWindows.Concurrency),
		Points:        f(a.Points, b.Points, shareWindows.Points),
		CreatesMinute: f(a.CreatesMinute, b.CreatesMinute, shareWindows.CreatesMinute),
		CreatesHour:   f(a.CreatesHour, b.CreatesHour, shareWindows.CreatesHour),
	}
}

// allot is self's shares given the record's entries at now: an equal part
// among the live replicas (self counted), and no more than the others'
// claims leave (a gone replica's claim counts for its limit's window after
// its entry expired). Pure.
func allot(self string, entries map[string]shareEntry, now time.Time) Shares {
	live := 1
	var others Shares
	for id, e := range entries {
		if id == self {
			continue
		}
		if now.Before(e.Expires) {
			live++
		}
		others = zip(others, e.Claims, func(sum, c, window float64) float64 {
			if now.Before(e.Expires.Add(time.Duration(window * float64(time.Second)))) {
				return sum + c
			}
			return sum
		})
	}
	return zip(others, others, func(sum, _, _ float64) float64 {
		return math.Max(0, math.Min(1/float64(live), 1-sum))
	})
}

// claim is what a replica holding share f with usage u claims: what it
// may have used in each limit's window until its next write, or until it
// stops for want of one (within the TTL, at most a minute). The larger of
// its share and its usage, but for the hour's content creation, which
// would otherwise keep a crashed replica's whole share for an hour: within
// a minute it creates at most its share of the minute's, so it claims its
// usage of the hour plus that (minuteToHour is the minute's limit over the
// hour's), and never more than its share.
func claim(f, u Shares, minuteToHour float64) Shares {
	c := zip(f, u, func(x, y, _ float64) float64 { return math.Max(x, y) })
	c.CreatesHour = math.Max(u.CreatesHour, math.Min(f.CreatesHour, u.CreatesHour+f.CreatesMinute*minuteToHour))
	return c
}

// ShareOptions tune ShareBudget.
type ShareOptions struct {
	// Holder names this replica (kvlease.HolderID by default).
	Holder string
	// TTL is how long the replica's entry lives unrenewed; it is renewed
	// every TTL/3. Default 15s, at most a minute (claim relies on it).
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Log receives failed renewals; default slog.Default().
	Log *slog.Logger
}

// BudgetBucket is the KV bucket of the installation's budget record.
const BudgetBucket = "PRLOOP_GITHUB_BUDGET"

// BudgetShare is a process's entry in the installation's budget record.
type BudgetShare struct {
	kv         kvlease.CASKV
	b          *Budget
	o          ShareOptions
	validUntil time.Time
}

// JoinBudget makes b a share of the installation's budget held in kv (see
// "One budget for the installation"): it writes this process's entry and
// sets b's share, so that nothing is sent beyond it from the start. Run
// keeps the entry renewed.
func JoinBudget(ctx context.Context, kv kvlease.CASKV, b *Budget, o ShareOptions) (*BudgetShare, error) {
	if o.Holder == "" {
		o.Holder = kvlease.HolderID()
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Second
	}
	o.TTL = min(o.TTL, time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &BudgetShare{kv: kv, b: b, o: o}
	b.setShares(Shares{})
	if err := s.renew(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// renew writes the entry, alive for a TTL, and applies the share.
func (s *BudgetShare) renew(ctx context.Context) error {
	now := s.o.Now()
	f, err := renewShare(ctx, s.kv, s.o.Holder, s.b, now, now.Add(s.o.TTL))
	if err != nil {
		return err
	}
	s.b.setShares(f)
	s.validUntil = now.Add(s.o.TTL)
	return nil
}

// Run renews the entry every TTL/3 until ctx is done; a replica whose
// entry expired unrenewed sends nothing (the others no longer count it
// live). At the end the entry is marked gone: its claims still count for
// their windows.
func (s *BudgetShare) Run(ctx context.Context) {
	t := time.NewTicker(max(s.o.TTL/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.b.setShares(Shares{})
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			now := s.o.Now()
			if _, err := renewShare(dctx, s.kv, s.o.Holder, s.b, now, now); err != nil {
				s.o.Log.Warn("marking this replica's share of the GitHub budget gone failed; it expires by itself", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
		if err := s.renew(ctx); err != nil && ctx.Err() == nil {
			s.o.Log.Warn("renewing this replica's share of the GitHub budget failed", "err", err)
			if !s.o.Now().Before(s.validUntil) {
				s.b.setShares(Shares{})
			}
		}
	}
}

// ShareBudget joins the installation's budget and keeps the share until
// ctx is done (JoinBudget, then Run); until the join succeeds, b admits
// nothing, and the join is tried again every TTL/3.
func ShareBudget(ctx context.Context, kv kvlease.CASKV, b *Budget, o ShareOptions) {
	if o.TTL <= 0 {
		o.TTL = 15 * time.Second
	}
	for {
		s, err := JoinBudget(ctx, kv, b, o)
		if err == nil {
			s.Run(ctx)
			return
		}
		if o.Log != nil && ctx.Err() == nil {
			o.Log.Warn("joining the installation's GitHub budget failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(min(o.TTL, time.Minute)/3, 10*time.Millisecond)):
		}
	}
}

// renewShare writes holder's entry, alive until expires, with its claims,
// and returns its shares. The record's entries gone for longer than every
// window are dropped on the way.
func renewShare(ctx context.Context, kv kvlease.CASKV, holder string, b *Budget, now, expires time.Time) (Shares, error) {
	var f Shares
	usage := b.usage()
	minuteToHour := float64(b.perMinute) / float64(b.perHour)
	_, err := kvlease.Update(ctx, kv, BudgetShareKey, 10, func(cur []byte, _ uint64) ([]byte, error) {
		entries := map[string]shareEntry{}
		if len(cur) > 0 {
			if err := json.Unmarshal(cur, &entries); err != nil {
				return nil, fmt.Errorf("decode github budget record: %w", err)
			}
		}
		for id, e := range entries {
			if now.Sub(e.Expires) > time.Duration(shareWindows.CreatesHour)*time.Second+time.Minute {
				delete(entries, id)
			}
		}
		f = allot(holder, entries, now)
		if !expires.After(now) {
			f = Shares{} // leaving: no more requests
		}
		entries[holder] = shareEntry{Expires: expires.UTC(), Claims: claim(f, usage, minuteToHour)}
		return json.Marshal(entries)
	})
	if err != nil {
		return Shares{}, fmt.Errorf("renew github budget share of %s: %w", holder, err)
	}
	return f, nil
}
