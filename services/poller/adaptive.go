package poller

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// Probe scheduling: what each interval costs.
//
// A repository's probe is two conditional list requests. Probing every
// repository every interval makes the cost follow the number of
// repositories (4,217 requests a minute at 1,000), and GitHub's secondary
// limits (900 points a minute per endpoint, "Rate limits for the REST
// API") do not exempt 304s. So a repository is probed every interval only
// while the probe is what would see its news first:
//
//   - it has a watched PR that the last search did not show (no search, a
//     watch request outside PRLOOP_WATCH_AUTHORS / PRLOOP_WATCH_LABEL, a
//     search cut short by its limits), or
//   - one of its PRs needs the probe itself: a same-second recheck is due
//     (ListSettle), a review timeout is due, or its outbox holds events, or
//     the poller has no record of it yet.
//
//   - it is one PRLOOP_REPOS names (or discovery found) and nothing but
//     the probe would show a PR opened there: no webhook
//     (PRLOOP_WEBHOOK_SECRET) and no search for its owner (neither
//     PRLOOP_WATCH_AUTHORS nor PRLOOP_WATCH_LABEL, or the search off).
//     Without this a new PR in a repository with no open PR waited for
//     the idle probe, up to ten minutes (chaos seed 41).
//
// Every other repository (none of its PRs watched, or all of them shown by
// the search, and new PRs reach the poller another way) is probed every
// PRLOOP_IDLE_PROBE_INTERVAL (default 10m), the periodic truth. What happens there meanwhile reaches the poller by
// the fast paths: a webhook kicks the PR at once, and the search (one
// query per owner and watched author or label, every interval, within
// GitHub's 30 searches a minute) shows each watched PR's updated_at,
// comment count, labels and reactions rollup; a change there (or a PR
// appearing or leaving) probes the repository at once.

// Searcher is the search part of the GitHub client; the poller uses it
// when it can (github.Client has it).
type Searcher interface {
	SearchIssues(ctx context.Context, q string, maxRequests int) (github.SearchResult, error)
}

var _ Searcher = (*github.Client)(nil)

// probeFacts is what probeDue decides on, gathered under the repository's
// lock.
type probeFacts struct {
	// idleAt is when the repository's next idle probe is due (zero: it
	// was never probed).
	idleAt time.Time
	// uncovered counts watched PRs the last search did not show.
	uncovered int
	// needsProbe: a watched PR needs the probe itself (no record yet, a
	// recheck or a timeout due, events left in its outbox).
	needsProbe bool
	// newPRsUnseen: the poller watches every new PR of the repository and
	// only the probe would show one (no webhook, no search for it).
	newPRsUnseen bool
}

// probeDue decides whether an interval's tick probes a repository: see
// "Probe scheduling" above. Ticks come every interval less up to 10%
// jitter, so half an interval of slack keeps the idle cadence from
// slipping a whole tick.
func probeDue(f probeFacts, now time.Time, interval time.Duration) bool {
	switch {
	case f.idleAt.IsZero(), f.needsProbe, f.uncovered > 0, f.newPRsUnseen:
		return true
	}
	return !now.Before(f.idleAt.Add(-interval / 2))
}

// nextIdleProbe is when a repository probed at now is next probed at the
// idle cadence. The first time at a random point of the idle interval:
// repositories that started together would otherwise come due together,
// and a thousand probes in one interval every ten minutes would exceed
// GitHub's 900 points a minute per endpoint where their average does not.
func nextIdleProbe(first bool, now time.Time, idle time.Duration) time.Time {
	if first && idle > 0 {
		return now.Add(rand.N(idle))
	}
	return now.Add(idle)
}

// facts gathers rw's probeFacts. Rechecks and timeouts are due by the
// service's clock, like GitHub's timestamps they compare with; the probe
// schedule and the search's freshness follow the wall clock, like the
// interval's timers.
func (s *Service) facts(rw *repoWatch) probeFacts {
	now, wall := s.d.Now(), time.Now()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	f := probeFacts{idleAt: rw.idleAt, newPRsUnseen: rw.discover && !s.newPRsArrive()}
	for n := range rw.prs {
		memo, known := rw.memo[n]
		if !known || recheckDue(memo, now) || len(memo.Outbox) > 0 || len(timeout(&memo, now, s.timing)) > 0 {
			f.needsProbe = true
		}
		if !s.search.covers(rw.repo.PR(n), wall) {
			f.uncovered++
		}
	}
	return f
}

// newPRsArrive reports whether a PR opened in a repository the poller
// discovers reaches it without the probe: through a webhook, or through
// the search (which runs only when PRLOOP_WATCH_AUTHORS or
// PRLOOP_WATCH_LABEL narrows what is watched, and covers every
// discovered repository's owner).
func (s *Service) newPRsArrive() bool {
	return s.cfg.WebhookSecret != "" || (s.search != nil && (len(s.cfg.WatchAuthors) > 0 || s.cfg.WatchLabel != ""))
}

// searchWatch runs the search and remembers what it showed.
type searchWatch struct {
	api      Searcher
	interval time.Duration
	// perMinute is PRLOOP_POLL_SEARCH_PER_MINUTE.
	perMinute int
	queries   func() []string
	kick      func(ghref.Repo)
	log       *slog.Logger
	// leases, when set (several replicas), holds the search lease and the
	// last round (searchlease.go); holder names this replica.
	leases Leases
	holder string

	mu sync.Mutex
	// seen is each PR's signature in the last round (searchSig).
	seen map[string]searchEntry
	// covered holds the PRs the last round showed in full; roundAt is
	// when it ended.
	covered map[string]bool
	roundAt time.Time
	rounds  int
}

// coverageLasts is for how many intervals after a search round ended the
// PRs it showed count as covered: a round or two may be late (a slow
// answer, a rate-limit wait) before the lists take over.
const coverageLasts = 3

// searchEntry is what a round saw of one PR.
type searchEntry struct {
	sig  string
	repo ghref.Repo
}

// covers reports whether the last search, recent enough, showed pr: its
// news then reaches the poller through the search within an interval.
func (w *searchWatch) covers(pr ghref.PR, now time.Time) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.covered[pr.Key()] && now.Sub(w.roundAt) <= coverageLasts*w.interval
}

// searchSig is what the search shows of a PR that the probe's fingerprint
// also holds: a push, a comment, a review, a label or an edit moves
// updated_at, a comment the count, a reaction the rollup.
func searchSig(it github.SearchItem) string {
	r := &it.Reactions
	labels := make([]string, 0, len(it.Labels))
	for _, l := range it.Labels {
		labels = append(labels, l.Name)
	}
	slices.Sort(labels)
	return it.State + "|" + it.UpdatedAt.UTC().Format(time.RFC3339) + "|" + strconv.Itoa(it.Comments) + "|" +
		strings.Join([]string{strconv.Itoa(r.GetTotalCount()), strconv.Itoa(r.GetPlusOne()), strconv.Itoa(r.GetMinusOne()),
			strconv.Itoa(r.GetLaugh()), strconv.Itoa(r.GetConfused()), strconv.Itoa(r.GetHeart()), strconv.Itoa(r.GetHooray()),
			strconv.Itoa(r.GetRocket()), strconv.Itoa(r.GetEyes())}, ":") + "|" + strings.Join(labels, ",")
}

// run searches once per interval until ctx is done. With several
// replicas (a lease bucket), only the holder of the search lease asks
// GitHub, and the others apply the rounds it stores (searchlease.go).
func (w *searchWatch) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	var lead *searchLead
	if w.leases != nil {
		lead = &searchLead{w: w}
		defer lead.stop()
	}
	for {
		if lead == nil {
			w.round(ctx)
		} else {
			lead.round(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round is one round of a lone poller: search, then apply.
func (w *searchWatch) round(ctx context.Context) {
	if r, ok := w.fetch(ctx); ok {
		w.apply(r)
	}
}

// searchRound is what one round of searches showed: each PR's signature
// (searchSig) and whether it showed the PR in full (covered), and whether
// it read every query to its end (Complete). It is stored in the lease
// bucket for the replicas that do not search (searchlease.go).
type searchRound struct {
	At       time.Time         `json:"at"`
	Complete bool              `json:"complete"`
	PRs      []searchRoundItem `json:"prs"`
}

// searchRoundItem is one PR a round showed.
type searchRoundItem struct {
	Owner   string `json:"owner"`
	Repo    string `json:"repo"`
	Number  int    `json:"number"`
	Sig     string `json:"sig"`
	Covered bool   `json:"covered,omitempty"`
}

// fetch runs every query, within the search budget. A PR is covered only
// by a query read to its end: a PR a partial answer did not show is probed
// by the lists, as without a search. ok is false when ctx ended.
func (w *searchWatch) fetch(ctx context.Context) (searchRound, bool) {
	budget := max(1, int(float64(w.perMinute)*w.interval.Minutes()))
	r := searchRound{Complete: true}
	for _, q := range w.queries() {
		if budget <= 0 {
			r.Complete = false
			break
		}
		res, err := w.api.SearchIssues(ctx, q, budget)
		budget -= res.Requests
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("search failed; probing by the lists meanwhile", "query", q, "err", err)
			}
			r.Complete = false
			continue
		}
		for _, it := range res.Items {
			repo, err := it.Repo()
			if err != nil || !it.IsPull() {
				continue
			}
			r.PRs = append(r.PRs, searchRoundItem{Owner: repo.Owner, Repo: repo.Name, Number: it.Number, Sig: searchSig(it), Covered: !res.Incomplete})
		}
		if res.Incomplete {
			r.Complete = false
			w.log.Warn("search shows only part of its results; probing by the lists where it did not reach", "query", q, "total", res.Total, "shown", len(res.Items))
		}
	}
	r.At = time.Now()
	return r, ctx.Err() == nil
}

// apply remembers what round r showed and probes the repositories whose
// watched PRs changed, appeared or left. Coverage lasts from when r ended,
// so a round whose searcher died lapses by itself.
func (w *searchWatch) apply(r searchRound) {
	seen := make(map[string]searchEntry, len(r.PRs))
	covered := map[string]bool{}
	for _, it := range r.PRs {
		repo := ghref.Repo{Owner: it.Owner, Name: it.Repo}
		k := repo.PR(it.Number).Key()
		seen[k] = searchEntry{sig: it.Sig, repo: repo}
		if it.Covered {
			covered[k] = true
		}
	}
	w.mu.Lock()
	prev, first := w.seen, w.rounds == 0
	w.seen, w.covered, w.roundAt = seen, covered, r.At
	w.rounds++
	w.mu.Unlock()
	if first {
		return // every repository is probed on its first tick anyway
	}
	kicked := map[string]bool{}
	kick := func(r ghref.Repo) {
		if !kicked[r.Key()] {
			kicked[r.Key()] = true
			w.kick(r)
		}
	}
	for k, e := range seen {
		if prev[k].sig != e.sig {
			kick(e.repo)
		}
	}
	if !r.Complete {
		return // a PR missing from a partial answer may not have left
	}
	for k, e := range prev {
		if _, ok := seen[k]; !ok {
			kick(e.repo)
		}
	}
}

// searchQueries are the searches that show every PR auto-discovery would
// watch in the discovered repositories' owners: one per owner and watched
// author (GitHub's search has no OR of authors), with the watch label.
// None without a filter: every open PR would be a result, and the search's
// 1,000-result cap and 30 a minute do not fit an organisation's PRs.
func (s *Service) searchQueries() []string {
	if len(s.cfg.WatchAuthors) == 0 && s.cfg.WatchLabel == "" {
		return nil
	}
	owners := map[string]bool{}
	s.mu.Lock()
	for _, rw := range s.repos {
		rw.mu.Lock()
		if rw.discover {
			owners[strings.ToLower(rw.repo.Owner)] = true
		}
		rw.mu.Unlock()
	}
	s.mu.Unlock()
	label := ""
	if s.cfg.WatchLabel != "" {
		label = ` label:"` + s.cfg.WatchLabel + `"`
	}
	var qs []string
	for _, o := range slices.Sorted(maps.Keys(owners)) {
		base := "is:pr is:open user:" + o + label
		if len(s.cfg.WatchAuthors) == 0 {
			qs = append(qs, base)
			continue
		}
		for _, a := range s.cfg.WatchAuthors {
			qs = append(qs, base+" author:"+a)
		}
	}
	return qs
}

// probeSoon asks repo's loop for a probe at once (the search saw news).
func (s *Service) probeSoon(repo ghref.Repo) {
	s.mu.Lock()
	rw, ok := s.repos[repo.Key()]
	s.mu.Unlock()
	if !ok || !s.owns(repo) {
		return
	}
	select {
	case rw.probeNow <- struct{}{}:
	default:
	}
}
