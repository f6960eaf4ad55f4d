package github

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// GitHub's secondary rate limits ("Rate limits for the REST API", About
// secondary rate limits, https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api):
// at most 100 concurrent requests; at most 900 points a minute per REST
// endpoint, a GET, HEAD or OPTIONS costing 1 point and a POST, PATCH, PUT or
// DELETE 5; at most 80 content-creating requests a minute and 500 an hour.
// The documentation exempts no answer from them, a 304 included.
const (
	// MaxConcurrency is GitHub's limit of concurrent requests.
	MaxConcurrency = 100
	// EndpointPointsPerMinute is GitHub's limit per endpoint and minute.
	EndpointPointsPerMinute = 900
	// CreatesPerMinute and CreatesPerHour limit content-creating requests.
	CreatesPerMinute = 80
	CreatesPerHour   = 500
)

// Priority orders requests when the budget is short: a higher one never
// waits behind a lower one, and the lower ones leave headroom for it.
type Priority int

// Priorities, lowest first.
const (
	// PriorityPoll is polling: the probe's lists and the search. Its loss
	// is a later probe.
	PriorityPoll Priority = iota
	// PriorityNormal is everything not named otherwise.
	PriorityNormal
	// PriorityUrgent is what moves a PR on: merges, branch updates, commit
	// statuses and check runs.
	PriorityUrgent
)

func (p Priority) String() string {
	switch p {
	case PriorityPoll:
		return "poll"
	case PriorityUrgent:
		return "urgent"
	}
	return "normal"
}

// share is the part of each limit (concurrency, an endpoint's points) a
// priority may use: polling leaves a quarter, normal work a tenth, to what
// comes after it.
func (p Priority) share(limit int) int {
	switch p {
	case PriorityPoll:
		return max(1, limit*3/4)
	case PriorityNormal:
		return max(1, limit*9/10)
	}
	return limit
}

type priorityKey struct{}

// WithPriority marks the requests made with ctx as p, overriding the
// default of their route (priorityOf).
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// priorityOf is a request's priority: the context's, else by its route.
func priorityOf(ctx context.Context, method, route string) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	switch {
	case method == http.MethodPut && (strings.HasSuffix(route, "/merge") || strings.HasSuffix(route, "/update-branch")),
		method == http.MethodPost && strings.Contains(route, "/statuses/"),
		strings.Contains(route, "/check-runs") && method != http.MethodGet:
		return PriorityUrgent
	case route == "GET /repos/{owner}/{repo}/pulls", route == "GET /repos/{owner}/{repo}/issues", route == "GET /search/issues":
		return PriorityPoll
	}
	return PriorityNormal
}

// pointsOf is a request's cost against its endpoint's secondary limit.
func pointsOf(method string) int {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// createsContent reports whether a request counts against the
// content-creation limits: GitHub names no list, so every POST (comments,
// reviews, statuses, reactions, labels, pull requests) and a merge (it
// creates a commit).
func createsContent(method, route string) bool {
	return method == http.MethodPost || (method == http.MethodPut && strings.HasSuffix(route, "/merge"))
}

// BudgetObserver is told how long each request waited for the budget.
type BudgetObserver interface {
	OnQueueWait(priority string, wait time.Duration)
}

// Budget is one process's share of GitHub's secondary limits, shared by
// every Client given it (Options.Budget): the services of the all-in-one
// binary draw on one budget, as they draw on one token. Safe for
// concurrent use.
type Budget struct {
	concurrency    int
	endpointPoints int
	perMinute      int
	perHour        int
	now            func() time.Time
	obs            BudgetObserver

	mu       sync.Mutex
	inFlight int
	// slotWaiting counts, per priority, the requests waiting for a slot.
	slotWaiting [PriorityUrgent + 1]int
	wake        chan struct{} // closed and replaced on every release
	points      map[string][]spent
	creates     []time.Time // content-creating requests of the last hour
	// shares is this process's part of each limit: whole alone, set by
	// ShareBudget when the installation has several (budgetshare.go).
	shares Shares
}

// spent is points an endpoint spent at a time.
type spent struct {
	at     time.Time
	points int
}

// BudgetOptions size a Budget; zero values take GitHub's limits.
type BudgetOptions struct {
	// Concurrency is PRLOOP_GITHUB_CONCURRENCY: at most this many requests
	// in flight, never above MaxConcurrency.
	Concurrency int
	// EndpointPointsPerMinute, CreatesPerMinute and CreatesPerHour default
	// to GitHub's limits; a deployment of several replicas gives each its
	// share.
	EndpointPointsPerMinute, CreatesPerMinute, CreatesPerHour int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Observer, if set, is told each request's wait.
	Observer BudgetObserver
}

// NewBudget builds a budget.
func NewBudget(o BudgetOptions) *Budget {
	or := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	b := &Budget{
		concurrency:    min(or(o.Concurrency, 20), MaxConcurrency),
		endpointPoints: or(o.EndpointPointsPerMinute, EndpointPointsPerMinute),
		perMinute:      or(o.CreatesPerMinute, CreatesPerMinute),
		perHour:        or(o.CreatesPerHour, CreatesPerHour),
		now:            o.Now,
		obs:            o.Observer,
		wake:           make(chan struct{}),
		points:         map[string][]spent{},
		shares:         fullShares,
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// acquire waits until a request of method on route may be sent with
// priority p, and takes its share: a slot and its points. The returned
// function gives the slot back.
func (b *Budget) acquire(ctx context.Context, method, route string, p Priority) (func(), error) {
	start := b.now()
	pts := pointsOf(method)
	creates := createsContent(method, route)
	b.mu.Lock()
	for {
		wait, forSlot := b.admit(route, pts, creates, p)
		if wait == 0 && !forSlot {
			b.inFlight++
			now := b.now()
			b.points[route] = append(b.points[route], spent{at: now, points: pts})
			if creates {
				b.creates = append(b.creates, now)
			}
			b.mu.Unlock()
			if b.obs != nil {
				b.obs.OnQueueWait(p.String(), now.Sub(start))
			}
			return sync.OnceFunc(b.release), nil
		}
		if forSlot {
			b.slotWaiting[p]++
		}
		wake := b.wake
		b.mu.Unlock()
		err := b.sleep(ctx, wake, wait)
		b.mu.Lock()
		if forSlot {
			b.slotWaiting[p]--
		}
		if err != nil {
			b.mu.Unlock()
			b.broadcast() // a lower priority may take the slot now
			return nil, err
		}
	}
}

// sleep waits for a wake-up, for d when positive, or for ctx.
func (b *Budget) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-timer:
	}
	return nil
}

// admit decides, with b.mu held, whether a request may go now. A limit of
// time (its endpoint's points, content creation) holds it for wait; the
// concurrency limit holds it until a release (forSlot), and so does a
// higher priority waiting for a slot. A higher priority held by a limit of
// time holds nobody else back.
func (b *Budget) admit(route string, pts int, creates bool, p Priority) (wait time.Duration, forSlot bool) {
	now := b.now()
	concurrency, endpointPoints, perMinute, perHour := b.limits()
	if concurrency == 0 || endpointPoints == 0 || (creates && (perMinute == 0 || perHour == 0)) {
		return shareWait, false // no share yet, or none left: setShares wakes us
	}
	window := trim(b.points[route], now.Add(-time.Minute))
	b.points[route] = window
	used := 0
	for _, s := range window {
		used += s.points
	}
	if over := used + pts - p.share(endpointPoints); over > 0 {
		wait = max(wait, freedAfter(window, over, now))
	}
	if creates {
		b.creates = trimTimes(b.creates, now.Add(-time.Hour))
		if len(b.creates) >= perHour {
			wait = max(wait, b.creates[len(b.creates)-perHour].Add(time.Hour).Sub(now))
		}
		recent := 0
		for _, t := range b.creates {
			if t.After(now.Add(-time.Minute)) {
				recent++
			}
		}
		if recent >= perMinute {
			wait = max(wait, b.creates[len(b.creates)-perMinute].Add(time.Minute).Sub(now))
		}
	}
	if wait > 0 {
		return wait, false
	}
	for q := p + 1; q <= PriorityUrgent; q++ {
		if b.slotWaiting[q] > 0 {
			return 0, true
		}
	}
	return 0, b.inFlight >= p.share(concurrency)
}

// shareWait is how long a request waits, at most, for a share of the
// installation's budget before it looks again (setShares wakes it sooner).
const shareWait = time.Second

// limits are the limits in force, with b.mu held: this process's share of
// each (a floor, so that the shares add up to no more than the whole).
func (b *Budget) limits() (concurrency, endpointPoints, perMinute, perHour int) {
	part := func(limit int, f float64) int { return int(math.Floor(float64(limit)*f + 1e-9)) }
	return part(b.concurrency, b.shares.Concurrency), part(b.endpointPoints, b.shares.Points),
		part(b.perMinute, b.shares.CreatesMinute), part(b.perHour, b.shares.CreatesHour)
}

// setShares sets this process's part of each limit and wakes the waiters.
func (b *Budget) setShares(f Shares) {
	b.mu.Lock()
	b.shares = f
	b.mu.Unlock()
	b.broadcast()
}

// Limits are the limits in force: this process's share of each.
func (b *Budget) Limits() (concurrency, endpointPoints, createsPerMinute, createsPerHour int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limits()
}

// usage is what this process uses of each whole limit: the requests in
// flight, the busiest endpoint's points of the minute, the content
// created in the minute and in the hour.
func (b *Budget) usage() Shares {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	busiest := 0
	for route, w := range b.points {
		w = trim(w, now.Add(-time.Minute))
		b.points[route] = w
		n := 0
		for _, s := range w {
			n += s.points
		}
		busiest = max(busiest, n)
	}
	b.creates = trimTimes(b.creates, now.Add(-time.Hour))
	recent := 0
	for _, t := range b.creates {
		if t.After(now.Add(-time.Minute)) {
			recent++
		}
	}
	return Shares{
		Concurrency:   float64(b.inFlight) / float64(b.concurrency),
		Points:        float64(busiest) / float64(b.endpointPoints),
		CreatesMinute: float64(recent) / float64(b.perMinute),
		CreatesHour:   float64(len(b.creates)) / float64(b.perHour),
	}
}

// freedAfter is how long until points spent in window (oldest first), at
// least excess of them, leave the minute.
func freedAfter(window []spent, excess int, now time.Time) time.Duration {
	for _, s := range window {
		excess -= s.points
		if excess <= 0 {
			return max(s.at.Add(time.Minute).Sub(now), time.Millisecond)
		}
	}
	return time.Minute
}

func trim(w []spent, cut time.Time) []spent {
	i := 0
	for i < len(w) && !w[i].at.After(cut) {
		i++
	}
	return w[i:]
}

func trimTimes(ts []time.Time, cut time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(cut) {
		i++
	}
	return ts[i:]
}

func (b *Budget) release() {
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	b.broadcast()
}

// broadcast wakes every waiter to check again.
func (b *Budget) broadcast() {
	b.mu.Lock()
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// PointsPerMinute is each endpoint's points of the last minute
// (prloop_github_points_per_minute{endpoint}).
func (b *Budget) PointsPerMinute() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	cut := b.now().Add(-time.Minute)
	out := make(map[string]int, len(b.points))
	for route, w := range b.points {
		w = trim(w, cut)
		b.points[route] = w
		n := 0
		for _, s := range w {
			n += s.points
		}
		if n > 0 {
			out[route] = n
		}
	}
	return out
}
