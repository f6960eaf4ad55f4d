// Package poller is prloop's poller service: it watches pull requests, turns
// review signals into a status with package review, and publishes a
// CloudEvent on every transition. It is the only service that decides review
// state.
//
// Polling is cheap by design. Each repository is probed once per interval
// with two conditional list requests that cover all its open PRs at once:
// the open-issues list (every PR's updated_at, comment count and reactions
// rollup) and the open-pulls list (head SHAs). A 304 costs no rate limit.
// Only PRs whose probe summary changed are fetched in detail (reactions,
// comments since the head's anchor, reviews, inline comments), also
// conditionally. Webhooks, when configured, trigger an evaluation at once;
// reactions have no webhook, so the probe is what detects emoji.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// Name is the service's name: its durable consumer, its event source
// (/prloop/poller) and its log attribute.
const Name = "poller"

// Types are the event types the poller consumes: watch commands, and the
// other services' news that changes what it must publish next.
var Types = []events.Type{
	events.TypeCreated, events.TypeWatchRequested, events.TypeFeedbackAddressed, events.TypeFeedbackSkipped,
	events.TypeEscalationRequested, events.TypeEscalated, events.TypeMerged,
	events.TypeBranchUpdated, events.TypeMergeFailed, events.TypeConflictResolveRequested,
	events.TypeCommandReceived,
}

// GitHub is the part of the GitHub client the poller uses.
type GitHub interface {
	review.Source
	ListIssueSummariesIfChanged(ctx context.Context, repo ghref.Repo, opts github.IssueListOptions, prev string) ([]github.IssueSummary, string, error)
	ListPullSummariesIfChanged(ctx context.Context, repo ghref.Repo, state, prev string) ([]github.PullSummary, string, error)
	GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error)
	GetPermission(ctx context.Context, repo ghref.Repo, login string) (string, error)
}

var _ GitHub = (*github.Client)(nil)

// Store is the part of the state store the poller uses.
type Store interface {
	Get(ctx context.Context, pr ghref.PR) (state.PR, uint64, error)
	Update(ctx context.Context, pr ghref.PR, fn func(*state.PR) error) (state.PR, error)
	List(ctx context.Context) ([]state.PR, error)
	Forget(ctx context.Context, pr ghref.PR, rev uint64) (bool, error)
}

var _ Store = (*state.Store)(nil)

// MergedChecker tells whether prloop published PRMerged for a PR, so that a
// merge prloop made is not reported as PRClosed even when the probe sees it
// before the PRMerged event reaches the poller's consumer.
type MergedChecker func(ctx context.Context, pr ghref.PR) (bool, error)

// Deps are the poller's dependencies.
type Deps struct {
	GitHub GitHub
	Store  Store
	JS     events.JetStreamConsumer
	Merged MergedChecker
	Log    *slog.Logger
	// Self is prloop's own GitHub login.
	Self string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Shard, when set, limits this replica to the repositories it leases;
	// nil means one poller owns every repository.
	Shard *Sharder
	// Kicks, when set, carries "evaluate this PR now" to whichever replica
	// owns it; nil kicks locally.
	Kicks KickBus
	// NewPRs, when set, reports PRs other replicas started watching (keys
	// appearing in the state bucket).
	NewPRs func(ctx context.Context, found func(ghref.PR)) error
	// Metrics counts probes, evaluations, transitions and deliveries;
	// default metrics registered nowhere.
	Metrics *metrics.Poller
	// Status, when set, writes prloop's commit status while the poller
	// runs (PRLOOP_POST_STATUS).
	Status *StatusWriter
}

// KickBus carries kicks between poller replicas. Kicks only hurry an
// evaluation: a lost one is made up by the next probe.
type KickBus interface {
	Publish(pr ghref.PR) error
	Subscribe(ctx context.Context, kick func(ghref.PR)) error
}

// Service is the poller.
type Service struct {
	cfg    Config
	d      Deps
	emit   *events.Emitter
	auth   *review.Authorization
	policy review.Policy
	pol    *policy.Reader // each base's .github/prloop.yml
	// timings are the review timeout and escalation label each base's
	// policy set at its last evaluation (by repository and base), for the
	// ticks that decide without reading GitHub (timingOf).
	timings sync.Map
	timing  Timing
	sem     chan struct{}

	// reopenWatchCap bounds each repository's closed set.
	reopenWatchCap int
	// sweepInterval is how often records of long-closed PRs are deleted.
	sweepInterval time.Duration

	// search, when set, shows the watched PRs to the poller every
	// interval (adaptive.go); nil without a watch filter or a Searcher.
	search *searchWatch
	// disc, when set, lists PRLOOP_REPOS's owner/* and * (discovery.go).
	disc *discovery
	// explain is the board "/prloop explain" reads (commands_explain.go).
	explain boards

	mu      sync.Mutex
	repos   map[string]*repoWatch
	started bool
	runCtx  context.Context
	wg      sync.WaitGroup
}

// repoWatch is one repository's watch: its PRs and its probe loop.
type repoWatch struct {
	repo     ghref.Repo
	discover bool
	kick     chan struct{}
	// probeNow asks for a probe at once (the repository was just leased);
	// reload says the memo must be read afresh from the state bucket first.
	probeNow chan struct{}
	reload   atomic.Bool
	running  bool // guarded by Service.mu
	// stop ends the loop (discovery lost the repository); Service.mu.
	stop context.CancelFunc
	// dropped: discovery lost the repository; it is retired once none of
	// its PRs is watched (rw.mu).
	dropped bool

	mu sync.Mutex
	// idleAt is when the repository's next idle probe is due (probeDue).
	idleAt  time.Time
	prs     map[int]bool // watched PR numbers
	pending map[int]bool // PRs to evaluate at once (webhook, events)
	heads   map[string][]int
	// closed holds the PRs closed within reopenWindow, with when they
	// closed, at most reopenWatchCap of them: a closed PR is dropped from
	// every other map, so that the poller's memory follows the open PRs,
	// and only this set remembers to resume the loop when one reopens.
	closed map[int]time.Time
	// memo holds each watched PR's last stored state; only loop touches
	// it, writing it under mu so that Sizes may read it.
	memo map[int]state.PR
	// seen holds what the last evaluation read of each PR, so a change the
	// probe pins on reactions alone re-reads only the reactions; like memo.
	seen map[int]seenSignals
	// pulls and issues are compact snapshots of the probe lists, with the
	// versions they were read at: an unchanged list is not decoded again.
	pulls                       map[int]pullInfo
	issues                      map[int]issueInfo
	pullsVersion, issuesVersion string
}

// New builds the poller.
func New(cfg Config, d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewPoller(nil)
	}
	s := &Service{
		cfg:    cfg,
		d:      d,
		emit:   events.NewEmitter(d.JS, Name),
		auth:   cfg.Authorization(d.GitHub.GetPermission),
		policy: cfg.Policy(d.Self),
		timing: Timing{
			ReviewTimeout: cfg.ReviewTimeout, EscalationLabel: cfg.EscalationLabel,
			ApprovalSurvivesConflictFix: cfg.ApprovalSurvivesConflictFix,
		},
		sem:   make(chan struct{}, max(1, cfg.PollConcurrency)),
		repos: map[string]*repoWatch{},

		reopenWatchCap: defaultReopenWatchCap,
		sweepInterval:  defaultSweepInterval,
	}
	s.pol = newPolicies(cfg, d.GitHub, s.auth)
	for _, repo := range cfg.RepoRefs() {
		s.repo(repo).discover = true
	}
	if dr, ok := d.GitHub.(Discoverer); ok && len(cfg.RepoPatterns()) > 0 {
		s.disc = &discovery{api: dr, found: map[string]map[string]ghref.Repo{}, versions: map[string]string{}, static: map[string]bool{}}
		for _, r := range cfg.RepoRefs() {
			s.disc.static[r.Key()] = true
		}
	}
	if sr, ok := d.GitHub.(Searcher); ok && cfg.Search {
		s.search = &searchWatch{
			api: sr, interval: cfg.PollInterval, perMinute: cfg.SearchPerMinute, queries: s.searchQueries, kick: s.probeSoon,
			log: d.Log.With("part", "search"),
		}
		if d.Shard != nil {
			s.search.leases, s.search.holder = d.Shard.kv, d.Shard.ID()
		}
	}
	return s
}

// Run restores the watch set from the state bucket, consumes events and
// probes every watched repository until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	// A shutdown during any start-up step is a shutdown, not an error
	// (as in events.Consume); before anything runs, it simply returns.
	recs, err := s.d.Store.List(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("restore watched PRs: %w", err)
	}
	if err := s.flushAll(ctx, recs); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("publish the events decided before a restart: %w", err)
	}
	restored := 0
	for _, r := range recs {
		if r.Closed {
			// Closed PRs are only watched for a reopen.
			if s.d.Now().Sub(r.ClosedAt) <= reopenWindow {
				s.mu.Lock()
				rw := s.repo(r.PR.RepoRef())
				rw.mu.Lock()
				s.watchForReopen(rw, r.PR.Number, r.ClosedAt)
				rw.mu.Unlock()
				s.mu.Unlock()
			}
			continue
		}
		if r.Stopped {
			continue // "/prloop stop" outlives restarts
		}
		rw := s.watch(r.PR)
		rw.memo[r.PR.Number] = r
		restored++
	}
	if s.disc != nil {
		if err := s.discover(ctx); err != nil && ctx.Err() == nil {
			s.d.Log.Warn("discovering repositories failed; trying again every PRLOOP_DISCOVERY_INTERVAL", "err", err)
		}
	}
	s.mu.Lock()
	nrepos := len(s.repos)
	s.mu.Unlock()
	s.d.Log.Info("poller started", "restored", restored, "repos", nrepos, "interval", s.cfg.PollInterval)

	s.mu.Lock()
	s.started, s.runCtx = true, ctx
	for _, rw := range s.repos {
		s.startLoop(rw)
	}
	s.mu.Unlock()

	if sh := s.d.Shard; sh != nil {
		sh.onAcquire, sh.onRelease = s.leased, s.unleased
		s.wg.Add(1)
		go func() { defer s.wg.Done(); sh.Run(ctx, s.repoList) }()
	}
	if s.d.Kicks != nil {
		if err := s.d.Kicks.Subscribe(ctx, s.Kick); err != nil && ctx.Err() == nil {
			return fmt.Errorf("subscribe to poller kicks: %w", err)
		}
	}
	if st := s.d.Status; st != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := st.Run(ctx); err != nil && ctx.Err() == nil {
				s.d.Log.Warn("the commit status writer stopped", "err", err)
			}
		}()
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.sweep(ctx) }()
	if s.disc != nil && s.cfg.DiscoveryInterval > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.discoverLoop(ctx) }()
	}
	if s.search != nil && (len(s.cfg.WatchAuthors) > 0 || s.cfg.WatchLabel != "") {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.search.run(ctx) }()
	}
	if s.d.NewPRs != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.d.NewPRs(ctx, func(pr ghref.PR) { s.watch(pr) }); err != nil && ctx.Err() == nil {
				s.d.Log.Warn("watching the state bucket for new PRs stopped", "err", err)
			}
		}()
	}

	err = events.Consume(ctx, s.d.JS, events.ConsumerConfig{
		Durable: Name, Types: Types, Logger: s.d.Log, Concurrency: 2, Observer: s.d.Metrics.Consumer,
	}, s.handle)
	s.wg.Wait()
	if ctx.Err() != nil {
		return nil // shut down, perhaps before the consumer was ready
	}
	return err
}

// reopenWindow is how long a closed PR stays watched so that reopening it
// resumes the loop; its record is kept as long, then deleted (sweep).
const reopenWindow = 7 * 24 * time.Hour

// defaultSweepInterval is how often the poller deletes the records of PRs
// closed longer than reopenWindow ago.
const defaultSweepInterval = time.Hour

// defaultReopenWatchCap is how many closed PRs per repository are watched
// for a reopen at most; beyond it the longest closed are forgotten (a
// reopened PR is then only picked up again by auto-discovery or a watch
// request).
const defaultReopenWatchCap = 1000

func (s *Service) repo(r ghref.Repo) *repoWatch {
	key := r.Key()
	rw, ok := s.repos[key]
	if !ok {
		rw = &repoWatch{
			repo: r, kick: make(chan struct{}, 1), probeNow: make(chan struct{}, 1),
			prs: map[int]bool{}, pending: map[int]bool{}, closed: map[int]time.Time{}, memo: map[int]state.PR{}, seen: map[int]seenSignals{},
		}
		s.repos[key] = rw
	}
	return rw
}

// watch adds pr to the watch set and starts its repository's loop.
func (s *Service) watch(pr ghref.PR) *repoWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	rw := s.repo(pr.RepoRef())
	rw.mu.Lock()
	rw.add(pr.Number)
	rw.mu.Unlock()
	if s.started {
		s.startLoop(rw)
	}
	return rw
}

// repoList returns every repository the poller knows of.
func (s *Service) repoList() []ghref.Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ghref.Repo, 0, len(s.repos))
	for _, rw := range s.repos {
		out = append(out, rw.repo)
	}
	return out
}

// owns reports whether this replica probes repo.
func (s *Service) owns(repo ghref.Repo) bool { return s.d.Shard == nil || s.d.Shard.Owns(repo) }

// leased is called when this replica takes a repository over: its loop
// re-reads the PRs' state (another replica may have moved it on) and probes
// at once.
func (s *Service) leased(repo ghref.Repo) {
	s.mu.Lock()
	rw := s.repo(repo)
	if s.started {
		s.startLoop(rw)
	}
	s.mu.Unlock()
	rw.reload.Store(true)
	select {
	case rw.probeNow <- struct{}{}:
	default:
	}
}

// unleased is called when another replica takes a repository over.
func (s *Service) unleased(repo ghref.Repo) {
	s.mu.Lock()
	rw, ok := s.repos[repo.Key()]
	s.mu.Unlock()
	if ok {
		rw.reload.Store(true)
	}
}

// kickAnywhere asks the replica that owns pr to evaluate it now.
func (s *Service) kickAnywhere(pr ghref.PR) {
	if s.d.Kicks != nil {
		if err := s.d.Kicks.Publish(pr); err == nil {
			return
		}
	}
	s.Kick(pr)
}

// Kick asks for an immediate evaluation of pr (webhooks, events), if this
// replica owns its repository.
func (s *Service) Kick(pr ghref.PR) {
	s.mu.Lock()
	rw, ok := s.repos[pr.RepoRef().Key()]
	s.mu.Unlock()
	if !ok || !s.owns(pr.RepoRef()) {
		return
	}
	rw.mu.Lock()
	if !rw.prs[pr.Number] && !rw.discover && rw.closed[pr.Number].IsZero() {
		rw.mu.Unlock()
		return
	}
	rw.pending[pr.Number] = true
	rw.mu.Unlock()
	select {
	case rw.kick <- struct{}{}:
	default:
	}
}

// KickHead asks for an evaluation of the watched PRs whose head is sha
// (commit status webhooks name a commit, not a PR).
func (s *Service) KickHead(repo ghref.Repo, sha string) {
	s.mu.Lock()
	rw, ok := s.repos[repo.Key()]
	s.mu.Unlock()
	if !ok {
		return
	}
	rw.mu.Lock()
	nums := append([]int(nil), rw.heads[sha]...)
	rw.mu.Unlock()
	for _, n := range nums {
		s.Kick(repo.PR(n))
	}
}

// startLoop starts rw's probe loop once; s.mu is held.
func (s *Service) startLoop(rw *repoWatch) {
	if rw.running {
		return
	}
	rw.running = true
	ctx, cancel := context.WithCancel(s.runCtx)
	rw.stop = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.loop(ctx, rw)
	}()
}

// loop probes rw once per interval, starting at a random offset so that
// repositories spread over the interval, and evaluates kicked PRs at once.
// All work on one repository happens here, so a PR is never evaluated twice
// at the same time by one poller.
func (s *Service) loop(ctx context.Context, rw *repoWatch) {
	log := s.d.Log.With("repo", rw.repo.String())
	timer := time.NewTimer(rand.N(s.cfg.PollInterval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			if probeDue(s.facts(rw), time.Now(), s.cfg.PollInterval) {
				s.probeOwned(ctx, rw, log)
			}
			timer.Reset(jitter(s.cfg.PollInterval))
		case <-rw.probeNow:
			s.probeOwned(ctx, rw, log)
		case <-rw.kick:
			rw.mu.Lock()
			nums := make([]int, 0, len(rw.pending))
			for n := range rw.pending {
				nums = append(nums, n)
			}
			clear(rw.pending)
			rw.mu.Unlock()
			for _, n := range nums {
				pr := rw.repo.PR(n)
				err := s.evaluateFetched(ctx, rw, pr, log.With("pr", pr.String()))
				if ctx.Err() != nil {
					continue
				}
				s.d.Metrics.Evaluation(metrics.TriggerKick, err)
				if err != nil {
					log.Warn("evaluation failed", "pr", pr.String(), "err", err)
				}
			}
		}
	}
}

// probeOwned probes rw if this replica owns it, first re-reading the state
// of its PRs when ownership changed since the last probe.
func (s *Service) probeOwned(ctx context.Context, rw *repoWatch, log *slog.Logger) {
	if !s.owns(rw.repo) {
		return
	}
	if rw.reload.Swap(false) {
		if err := s.reloadMemo(ctx, rw); err != nil {
			rw.reload.Store(true)
			log.Warn("reading the repository's PR state failed; retrying next interval", "err", err)
			return
		}
	}
	rw.mu.Lock()
	rw.idleAt = nextIdleProbe(rw.idleAt.IsZero(), time.Now(), s.cfg.IdleProbeInterval) // the schedule's wall clock (facts)
	rw.mu.Unlock()
	if err := s.probe(ctx, rw, log); err != nil && ctx.Err() == nil {
		log.Warn("probe failed; retrying next interval", "err", err)
	}
}

// reloadMemo re-reads the stored state of rw's watched PRs and forgets what
// the last probe saw: another replica may have moved them on meanwhile.
func (s *Service) reloadMemo(ctx context.Context, rw *repoWatch) error {
	rw.mu.Lock()
	nums := make([]int, 0, len(rw.prs))
	for n := range rw.prs {
		nums = append(nums, n)
	}
	rw.mu.Unlock()
	memo := make(map[int]state.PR, len(nums))
	for _, n := range nums {
		st, _, err := s.d.Store.Get(ctx, rw.repo.PR(n))
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		memo[n] = st
	}
	rw.mu.Lock()
	rw.memo, rw.seen = memo, map[int]seenSignals{}
	rw.mu.Unlock()
	rw.pullsVersion, rw.issuesVersion = "", ""
	return nil
}

// add watches PR n; rw.mu is held.
func (rw *repoWatch) add(n int) {
	rw.prs[n] = true
	delete(rw.closed, n)
}

// forget drops PR n from every per-PR map of rw, so that the poller's
// memory follows the open PRs; closedAt, when set, keeps n in the closed
// set for a reopen. Only loop calls it.
func (s *Service) forget(rw *repoWatch, n int, closedAt time.Time) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	delete(rw.prs, n)
	delete(rw.pending, n)
	delete(rw.memo, n)
	delete(rw.seen, n)
	if !closedAt.IsZero() {
		s.watchForReopen(rw, n, closedAt)
	}
}

// watchForReopen adds n to rw's closed set and trims the set to PRs closed
// within reopenWindow, at most reopenWatchCap of them; rw.mu is held.
func (s *Service) watchForReopen(rw *repoWatch, n int, closedAt time.Time) {
	rw.closed[n] = closedAt
	now := s.d.Now()
	for m, at := range rw.closed {
		if now.Sub(at) > reopenWindow {
			delete(rw.closed, m)
		}
	}
	for len(rw.closed) > s.reopenWatchCap {
		oldest, first := 0, time.Time{}
		for m, at := range rw.closed {
			if first.IsZero() || at.Before(first) {
				oldest, first = m, at
			}
		}
		delete(rw.closed, oldest)
	}
}

// jitter returns d less up to 10%, so repositories that started together
// drift apart, while no PR waits longer than one interval between probes.
func jitter(d time.Duration) time.Duration {
	return d - rand.N(d/10+1)
}

// getPull reads pr from GitHub within the bound on concurrent GitHub work.
func (s *Service) getPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.d.GitHub.GetPull(ctx, pr)
}

// acquire bounds concurrent GitHub work.
func (s *Service) acquire(ctx context.Context) (func(), error) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ErrNotWatched is returned for events about PRs the poller does not track.
var ErrNotWatched = errors.New("not watched")

// handle folds another service's event into the PR's record (reduce) and
// has the PR evaluated again: what it did may change what the poller
// publishes next. Only PRWatchRequested and PRCreated (the feedback
// service opened the PR) start a record; news about a PR the poller has no
// record of is not its business.
func (s *Service) handle(ctx context.Context, m *events.Msg) error {
	pr := m.Data.Ref()
	log := s.d.Log.With("pr", pr.String())
	watch := false
	switch m.Data.(type) {
	case *events.WatchRequested, *events.Created:
		watch = true
	}
	at := m.Event.Time()
	_, err := s.d.Store.Update(ctx, pr, func(p *state.PR) error {
		if p.UpdatedAt.IsZero() && !watch {
			return state.ErrNoChange // no record: not watched
		}
		next, changed := reduce(*p, m.Data, at, s.d.Now())
		if !changed {
			return state.ErrNoChange
		}
		*p = next
		return nil
	})
	if err != nil {
		return err
	}
	switch d := m.Data.(type) {
	case *events.WatchRequested:
		log.Info("watching", "worktree", d.Worktree, "context", d.ContextPath)
		s.watch(pr)
	case *events.Created:
		log.Info("watching the PR prloop opened", "branch", d.Branch, "worktree", d.Worktree, "context", d.ContextPath)
		s.watch(pr)
	case *events.FeedbackAddressed:
		s.watch(pr)
	case *events.Escalated:
		if err := s.labelled(ctx, pr, d, log); err != nil {
			return err
		}
	case *events.Merged:
		return nil // nothing follows a merge
	case *events.CommandReceived:
		return s.commandTaken(ctx, d, log)
	}
	// A new head held back while the change request was worked on (see
	// holdsNewHead), or a status to announce again, is published now.
	s.kickAnywhere(pr)
	return nil
}

// labelled takes note that the escalator applied the escalation label
// (PREscalated with the label action). A read of the PR made after that is
// after the label went on, so the label's absence there proves that a human
// removed it: the loop resumes even when that happened before any probe saw
// the label (within a poll interval, or while the escalator was still
// retrying its webhook). An escalation of an epoch that was already
// resolved is old news.
func (s *Service) labelled(ctx context.Context, pr ghref.PR, d *events.Escalated, log *slog.Logger) error {
	if !slices.Contains(d.Actions, events.ActionLabel) {
		return nil
	}
	cur, _, err := s.d.Store.Get(ctx, pr)
	if errors.Is(err, state.ErrNotFound) || (err == nil && (cur.Epoch != d.Epoch || cur.Closed)) {
		return nil
	}
	if err != nil {
		return err
	}
	p, err := s.getPull(ctx, pr)
	if errors.Is(err, github.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s after its escalation: %w", pr, err)
	}
	seen := pullInfoOf(p)
	return s.apply(ctx, nil, pr, log, func(cur state.PR) Decision {
		if cur.Epoch != d.Epoch || cur.Closed {
			return Decision{Next: cur, Hold: true}
		}
		next := cur
		// The label was on before this read, whether or not a probe saw it.
		// The read decides at once, so the placeholder time never lasts.
		if !next.EscalationLabelSeen {
			next.EscalationLabelSeen, next.EscalationLabelSeenAt = true, time.Time{}
		}
		resumeAfterEscalation(&next, seen.labels, seen.updated, s.d.Now(), s.timingOf(pr.RepoRef(), seen.base))
		return Decision{Next: next, Emits: resumed(cur, next)}
	})
}

// sweep deletes, now and then every sweepInterval, the records of PRs
// closed longer than reopenWindow ago, so that the bucket holds the open
// PRs and the recently closed ones, not every PR ever watched. A record
// written meanwhile (a reopen) is kept: the delete is a compare-and-set.
func (s *Service) sweep(ctx context.Context) {
	t := time.NewTicker(s.sweepInterval)
	defer t.Stop()
	for {
		if n, err := s.forgetClosed(ctx); err != nil && ctx.Err() == nil {
			s.d.Log.Warn("deleting the records of long-closed PRs failed; retrying later", "err", err)
		} else if n > 0 {
			s.d.Log.Info("deleted the records of long-closed PRs", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// forgetClosed deletes the records of PRs closed longer than reopenWindow
// ago, with nothing left to publish, and returns how many it deleted.
func (s *Service) forgetClosed(ctx context.Context) (int, error) {
	recs, err := s.d.Store.List(ctx)
	if err != nil {
		return 0, err
	}
	expired := func(r state.PR) bool {
		return r.Closed && len(r.Outbox) == 0 && !r.ClosedAt.IsZero() && s.d.Now().Sub(r.ClosedAt) > reopenWindow
	}
	n := 0
	for _, r := range recs {
		if !expired(r) {
			continue
		}
		cur, rev, err := s.d.Store.Get(ctx, r.PR)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		if !expired(cur) {
			continue
		}
		deleted, err := s.d.Store.Forget(ctx, r.PR, rev)
		if err != nil {
			return n, err
		}
		if deleted {
			n++
		}
	}
	return n, nil
}
