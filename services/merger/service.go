// Package merger is prloop's merger service: it merges approved pull
// requests through a first-come-first-served queue per repository and base
// branch, one merge in flight per base, across any number of replicas.
//
// # Queue and lock
//
// The queues live in the KV bucket PRLOOP_MERGE_QUEUE (see Bucket): one key
// per queued PR holding an Entry, ordered by the stream sequence of its
// PRReviewApproved event, and one lock key per base, a lease (package
// kvlease) taken with Create and renewed while the merge runs, so that a
// dead replica's lock frees itself after PRLOOP_MERGE_LOCK_TTL.
//
// Two parts work on them. The consumer only records: it writes each
// approval as pending under its stream sequence (a KV write, no GitHub) and
// acks. It runs with MaxAckPending 1, so JetStream hands approvals out one
// at a time in stream order across all replicas, and a pending record
// exists for every earlier approval before a later one's is written.
//
// The worker of every replica scans the bucket (on a timer and on every
// change). It queues each repository's pending approvals in sequence order:
// it reads the PR's base, verifies the approval on GitHub, writes the
// queue entry and publishes PRMergeQueued with the position, and only then
// looks at the repository's next pending approval. So when an entry is
// written every earlier approval of its repository is settled, which makes
// positions exact and the order first come, first served within a base;
// and a repository whose GitHub reads fail holds back only its own
// approvals, retried with backoff, never another repository's (the
// consumer used to read GitHub itself, and one repository's failures
// stalled every approval behind it). The worker also takes the lock of any
// base whose queue is not empty and merges that queue's entries in order
// while it holds the lock.
//
// Before every step the worker re-reads the PR from GitHub, never trusting
// the event, and the pure core (Step, core.go) says what to do: a pass is
// observe → Step → store (the entry, with the events in its outbox) →
// execute.
//
// # Events are triggers, never authorities
//
// A PRReviewApproved only says "look now". On enqueue and on every pass
// over a queued entry, right before the merge call included, the merger
// reads the head's review signals from GitHub itself and recomputes the
// verdict with package review, under the poller's policy (CheckApproval).
// It merges only a head that verdict approves: the head a reviewer
// approved, or a head prloop verifiably made from it by bringing it up to
// date with its base (see madeFrom). Every exit from a queue other than a
// merge publishes PRMergeFailed with a reason. A step that changes GitHub
// is written ahead into the entry as its Intent, so a replica that takes
// over after a crash can tell a merge or branch update prloop made from
// someone else's push.
//
// # Own records only
//
// The merger reads and writes no other service's records. What it needs
// from the poller comes in PRReviewApproved: the head's anchor (review
// signals older than it do not count) and the escalation epoch, both kept
// in the queue entry. What the poller needs from the merger goes out as
// events: PRBranchUpdated when prloop made a new head from the approved
// one (the approval carries over to it), and PRMergeFailed with reason
// approval_withdrawn, after which the poller announces the PR's status
// again.
package merger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/review"
)

// Name is the service's name: its durable consumer, its event source
// (/prloop/merger) and its log attribute.
const Name = "merger"

// Types are the event types the service consumes.
var Types = []events.Type{events.TypeReviewApproved, events.TypeQueueFreezeRequested, events.TypeCommandReceived}

// GitHub is the part of the GitHub client the merger uses.
type GitHub interface {
	GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error)
	GetCommit(ctx context.Context, repo ghref.Repo, ref string) (*gh.RepositoryCommit, error)
	GetCombinedStatus(ctx context.Context, repo ghref.Repo, ref string) (*gh.CombinedStatus, error)
	ListCheckRuns(ctx context.Context, repo ghref.Repo, ref string) ([]*gh.CheckRun, error)
	ListBranchRules(ctx context.Context, repo ghref.Repo, branch string) ([]github.BranchRule, error)
	Compare(ctx context.Context, repo ghref.Repo, base, head string) (github.Comparison, error)
	UpdateBranch(ctx context.Context, pr ghref.PR, expectedHeadSHA string) error
	Merge(ctx context.Context, pr ghref.PR, opts github.MergeOptions) (*gh.PullRequestMergeResult, error)
	DeleteBranch(ctx context.Context, repo ghref.Repo, branch string) error
	// review.Source and GetPermission read the review signals and who may
	// give them, to recompute the verdict.
	review.Source
	GetPermission(ctx context.Context, repo ghref.Repo, login string) (string, error)
}

var _ GitHub = (*github.Client)(nil)

// Deps are the merger's dependencies.
type Deps struct {
	GitHub GitHub
	JS     events.JetStreamConsumer
	// Queue is the PRLOOP_MERGE_QUEUE bucket (EnsureQueue).
	Queue QueueKV
	Log   *slog.Logger
	// Holder names this replica in lock leases; default host, pid and a
	// random suffix.
	Holder string
	// GitToken returns the credential for git over HTTP(S) (the rebase and
	// its push, the fetch that verifies a branch update), fresh for each
	// use; nil fetches and pushes without one.
	GitToken func(ctx context.Context) (github.Secret, error)
	// GitBin is the git executable; default "git".
	GitBin string
	// Self is prloop's own GitHub login, whose review signals never count.
	Self string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics records queue depths, merge results and deliveries; default
	// metrics registered nowhere.
	Metrics *metrics.Merger
}

// Service is the merger.
type Service struct {
	cfg  Config
	d    Deps
	q    queue
	emit *events.Emitter
	log  *slog.Logger
	kick chan struct{}

	// auth and policy judge review signals exactly as the poller does.
	auth   *review.Authorization
	policy review.Policy
	// pol reads each base's .github/prloop.yml (policy.go).
	pol *policies

	mu     sync.Mutex
	active map[string]bool // queue ids this replica is draining
	// measured are commits whose CI time this replica recorded (eta.go).
	measured map[string]bool
	wg       sync.WaitGroup
}

var _ app.Service = (*Service)(nil)

// New builds the merger.
func New(cfg Config, d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Holder == "" {
		d.Holder = kvlease.HolderID()
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewMerger(nil)
	}
	s := &Service{
		cfg: cfg, d: d, q: queue{kv: d.Queue}, emit: events.NewEmitter(d.JS, Name), log: d.Log,
		kick: make(chan struct{}, 1), active: map[string]bool{}, measured: map[string]bool{},
		auth: cfg.Authorization(d.GitHub.GetPermission), policy: cfg.Policy(d.Self),
	}
	s.pol = newPolicies(cfg, d.GitHub, s.auth)
	return s
}

// FromRuntime builds the merger for a process: the GitHub client from cfg,
// the queue bucket and the readiness check.
func FromRuntime(ctx context.Context, rt *app.Runtime, cfg Config) (*Service, error) {
	client, err := rt.NewGitHub(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	kv, err := EnsureQueue(ctx, rt.JS, rt.Common.StreamReplicas)
	if err != nil {
		return nil, err
	}
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	return New(cfg, Deps{
		GitHub: client, JS: rt.JS, Queue: kv, Log: rt.Log.With("component", Name), GitToken: client.GitToken,
		Self: rt.SelfLogin(ctx, client, cfg.GitHubLogin), Metrics: metrics.NewMerger(rt.Registry),
	}), nil
}

// Run enqueues approvals and merges queued PRs until ctx is done. On
// shutdown a merge in progress stops where it is; the entry stays queued
// and whichever replica takes the lock next carries on.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("merger started", "holder", s.d.Holder, "method", s.cfg.MergeMethod, "update", s.cfg.UpdateMethod,
		"require_checks", s.cfg.RequireChecks, "dry_run", s.cfg.DryRun)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.work(ctx)
	}()
	err := events.Consume(ctx, s.d.JS, events.ConsumerConfig{
		Durable: Name, Types: Types, Logger: s.log, Concurrency: 1, MaxAckPending: 1, Observer: s.d.Metrics.Consumer,
	}, s.handle)
	s.wg.Wait()
	return err
}

// handle records a PRReviewApproved message as a pending approval, which
// the worker queues (Enqueue): nothing here waits on GitHub. A
// PRQueueFreezeRequested freezes or unfreezes a queue (freeze.go), and a
// PRCommandReceived holds a PR out of the queue or lets it back in
// (command.go).
func (s *Service) handle(ctx context.Context, m *events.Msg) error {
	if f, ok := m.Data.(*events.QueueFreezeRequested); ok {
		return s.handleFreeze(ctx, m, f)
	}
	if c, ok := m.Data.(*events.CommandReceived); ok {
		return s.command(ctx, c)
	}
	d, ok := m.Data.(*events.ReviewApproved)
	if !ok {
		return nil
	}
	if err := s.q.record(ctx, Approval{
		PR: d.PR, Head: d.HeadSHA, Approvers: d.Approvers, Seq: m.Seq, Anchor: d.Anchor, Epoch: d.Epoch, FixCycle: d.FixCycle,
		Base: d.BaseBranch, BaseSince: d.BaseSince,
	}); err != nil {
		return err
	}
	s.Kick()
	return nil
}

// Approval is an approved head, as the poller reports it.
type Approval struct {
	PR        ghref.PR `json:"pr"`
	Head      string   `json:"head"`
	Approvers []string `json:"approvers,omitempty"`
	// Seq is the approval's stream sequence: its place in line.
	Seq uint64 `json:"seq"`
	// Anchor is when Head became the head, as the poller says: review
	// signals older than it do not count. Zero means unknown, and then no
	// reaction or comment counts.
	Anchor time.Time `json:"anchor,omitzero"`
	// Base is the base branch the approval is for ("" when the poller did
	// not say), and BaseSince when the poller saw the PR retargeted to it.
	Base      string    `json:"base,omitempty"`
	BaseSince time.Time `json:"base_since,omitzero"`
	// Epoch is the PR's escalation epoch, carried on to an escalation.
	Epoch int `json:"epoch,omitempty"`
	// FixCycle is the poller's count of fixes pushed to the PR, carried on
	// to a conflict resolution (conflict.go).
	FixCycle int `json:"fix_cycle,omitempty"`
}

// settlePending queues the first pending approval of every repository
// that has one due, each repository in its own goroutine so that a slow or
// failing GitHub for one holds back no other.
func (s *Service) settlePending(ctx context.Context) error {
	pending, err := s.q.pending(ctx)
	if err != nil {
		return err
	}
	for id, ps := range pending {
		if ps[0].NotBefore.After(s.d.Now()) || !s.claim("pending."+id) {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.unclaim("pending." + id)
			s.settleRepo(ctx, ps)
		}()
	}
	return nil
}

// settleRepo queues a repository's pending approvals in sequence order,
// stopping at the first that fails (it is retried with backoff, and the
// later ones wait behind it).
func (s *Service) settleRepo(ctx context.Context, ps []storedPending) {
	for _, p := range ps {
		if ctx.Err() != nil {
			return
		}
		err := s.Enqueue(ctx, p.Approval)
		if err == nil {
			if err := s.q.settle(ctx, p); err != nil {
				s.log.Warn("settle pending approval", "pr", p.PR.String(), "err", err)
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.Failures++
		p.LastError = err.Error()
		// No give-up: a repository whose GitHub does not answer cannot
		// merge anyway, and the approval keeps its place in line.
		delay := retryPolicy(s.cfg.PollInterval).Delay(p.Failures)
		p.NotBefore = s.d.Now().Add(delay)
		s.log.Warn("cannot queue approval yet; will retry", "pr", p.PR.String(), "seq", p.Seq, "err", err,
			"failures", p.Failures, "retry_in", delay)
		if err := s.q.postpone(ctx, p); err != nil {
			s.log.Warn("postpone pending approval", "pr", p.PR.String(), "err", err)
		}
		return
	}
}

// claim marks id as worked on by this replica, or reports that it already is.
func (s *Service) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[id] {
		return false
	}
	s.active[id] = true
	return true
}

func (s *Service) unclaim(id string) {
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
	s.Kick()
}

// Enqueue puts an approved PR in its base's queue and publishes
// PRMergeQueued with its position. Approvals of closed PRs or of heads that
// already moved on are dropped with a log line: the poller re-evaluates.
//
// The approval is a trigger, not an authority: Enqueue reads the head's
// review signals on GitHub and queues the PR only when they approve it.
// When they do not (a forged or replayed event, or one a withdrawal
// overtook) it publishes PRMergeFailed with reason not_approved and queues
// nothing: the event says who tried, and an operator watching the stream
// sees it.
func (s *Service) Enqueue(ctx context.Context, a Approval) error {
	log := s.log.With("pr", a.PR.String(), "head", ghref.ShortSHA(a.Head))
	// observe → admit (the core decides, asking for a second read when it
	// needs one) → write.
	v := admissionView{Now: s.d.Now()}
	var p *gh.PullRequest
	if a.Head != "" {
		var err error
		p, err = s.d.GitHub.GetPull(ctx, a.PR)
		switch {
		case errors.Is(err, github.ErrNotFound):
			v.Missing = true
		case err != nil:
			return fmt.Errorf("queue %s: %w", a.PR, err)
		default:
			v.PR = ViewOf(p)
			if a.PR.URL == "" {
				a.PR.URL = p.GetHTMLURL()
			}
		}
	}
	if h, err := s.held(ctx, a.PR); err != nil {
		return fmt.Errorf("queue %s: %w", a.PR, err)
	} else if h.Held {
		// "/prloop dequeue" or "stop" holds it out until "/prloop queue".
		log.Info("held out of the merge queue by a command; not queued", "command", h.Command, "by", h.Author, "comment", h.CommentID)
		return nil
	}
	var cur stored
	d := admit(a, v, s.cfg.policy())
	switch {
	case d.Verify:
		in := d.Entry.approvalOf(p)
		in.ApprovedBase = a.Base // the approval's, which the queue's base must be
		check, err := s.verify(ctx, a.PR, in, log)
		if err != nil {
			return fmt.Errorf("queue %s: verify its approval: %w", a.PR, err)
		}
		v.Check = &check
		d = admit(a, v, s.cfg.policy())
	case d.Read:
		var err error
		if cur, err = s.q.get(ctx, entryKey(a.PR, v.PR.BaseRef)); err == nil {
			v.Queued = &cur.Entry
		}
		v.QueuedRead = true
		d = admit(a, v, s.cfg.policy())
	}
	if len(d.Events) > 0 {
		return s.notApproved(ctx, d.Events, a, d.Why, log)
	}
	if !d.Queue && !d.Again {
		log.Info(d.Why, "current_head", ghref.ShortSHA(v.PR.HeadSHA), "merged", v.PR.Merged)
		return nil
	}
	st, again := cur, d.Again
	if d.Queue {
		// Whether it goes ahead of the PRs without the label (priority.go):
		// the label as the base's policy names it.
		label, err := s.priorityLabel(ctx, a.PR.RepoRef(), d.Entry.Base)
		if err != nil {
			return fmt.Errorf("queue %s: %w", a.PR, err)
		}
		d.Entry.Priority = hasLabel(p, label)
		if st, again, err = s.q.enqueue(ctx, d.Entry); err != nil {
			return err
		}
	}
	if !again {
		// A replica may have merged the PR and removed its entry between
		// the read above and this new entry: then the new entry goes
		// again without a word, since nothing about a PR follows its
		// PRMerged. (With the old entry still there, the approval would
		// have joined it.)
		p, err := s.d.GitHub.GetPull(ctx, a.PR)
		if err != nil {
			if rerr := s.q.remove(ctx, st); rerr != nil {
				return fmt.Errorf("queue %s: %w (and removing the new entry: %v)", a.PR, err, rerr)
			}
			return fmt.Errorf("queue %s: %w", a.PR, err)
		}
		if v := ViewOf(p); v.Merged || !v.Open {
			log.Info("approved PR merged or closed meanwhile; not queued", "merged", v.Merged)
			return s.q.remove(ctx, st)
		}
	}
	qid := queueID(a.PR.RepoRef(), st.Base)
	pos, ahead, err := s.q.position(ctx, qid, a.PR)
	if err != nil {
		return err
	}
	if _, _, err := s.emit.Emit(ctx, &events.MergeQueued{
		Base: events.Base{PR: a.PR, HeadSHA: st.ApprovedHead}, Position: pos, BaseBranch: st.Base,
		Mode: s.cfg.queueMode(), Ahead: ahead, Priority: st.Priority, ETA: queueETA(pos, s.cfg.queueMode(), s.cfg.queueDepth(), s.ciTimes(ctx, qid)),
	}, st.ApprovedHead, strconv.FormatUint(st.Seq, 10)); err != nil { // one per queued approval
		return err
	}
	log.Info("queued for merge", "base", st.Base, "position", pos, "priority", st.Priority, "already_queued", again, "approvers", a.Approvers)
	s.Kick()
	return nil
}

// notApproved answers an approval GitHub does not show: nothing is queued,
// and PRMergeFailed (reason not_approved, admit's evs) says so.
func (s *Service) notApproved(ctx context.Context, evs []outEvent, a Approval, why string, log *slog.Logger) error {
	for _, ev := range evs {
		if _, _, err := s.emit.Emit(ctx, ev.Data, ev.Parts...); err != nil {
			return err
		}
	}
	log.Warn("PRReviewApproved not confirmed by GitHub; not queued", "why", why, "claimed_approvers", a.Approvers)
	return nil
}

// Kick makes the worker scan the queues now.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// work scans the queues until ctx is done: at every poll interval, and at
// once when the bucket changes (an entry or a lock written or removed by
// any replica).
func (s *Service) work(ctx context.Context) {
	if w, err := s.d.Queue.WatchAll(ctx, jetstream.UpdatesOnly()); err != nil {
		s.log.Warn("cannot watch the merge queue; scanning on the poll interval only", "err", err)
	} else {
		go func() {
			for range w.Updates() {
				s.Kick()
			}
		}()
		defer func() { _ = w.Stop() }()
	}
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		if err := s.scan(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("merge queue scan failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
	}
}

// scan settles pending approvals and starts draining every queue that has
// a ready entry and whose lock this replica can take.
func (s *Service) scan(ctx context.Context) error {
	if err := s.settlePending(ctx); err != nil {
		return err
	}
	if err := s.thaw(ctx); err != nil {
		return err
	}
	ids, depth, err := s.q.queues(ctx)
	if err != nil {
		return err
	}
	depths := make(map[metrics.Queue]int, len(depth))
	for id, n := range depth {
		if name, ok := queueName(id); ok {
			depths[name] += n
		}
	}
	s.d.Metrics.QueueDepths(depths)
	for _, id := range ids {
		s.mu.Lock()
		busy := s.active[id]
		s.mu.Unlock()
		if busy {
			continue
		}
		entries, err := s.q.list(ctx, id)
		if err != nil {
			return err
		}
		if len(entries) == 0 || entries[0].NotBefore.After(s.d.Now()) {
			continue
		}
		lease, err := kvlease.Acquire(ctx, s.d.Queue, lockKey(id), s.d.Holder, kvlease.Options{
			TTL: s.cfg.LockTTL, Now: s.d.Now, Note: "merging " + entries[0].PR.String(), Log: s.log.With("queue", id),
		})
		if errors.Is(err, kvlease.ErrHeld) {
			continue
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.active[id] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.drain(ctx, id, lease)
		}()
	}
	return nil
}

// drain merges the entries of one queue, first come first, while it holds
// the queue's lock; it stops when the queue is empty, its first entry must
// wait, or the lock is lost.
func (s *Service) drain(ctx context.Context, id string, lease *kvlease.Lease) {
	lctx, release := lease.Hold(ctx)
	defer func() {
		release()
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		s.Kick()
	}()
	if s.cfg.queueMode() == QueueSpeculative {
		s.drainSpeculative(lctx, id)
		return
	}
	for lctx.Err() == nil {
		entries, err := s.ordered(lctx, id)
		if err != nil {
			if lctx.Err() == nil {
				s.log.Warn("read merge queue", "queue", id, "err", err)
			}
			return
		}
		if len(entries) == 0 || entries[0].NotBefore.After(s.d.Now()) {
			return
		}
		if err := s.process(lctx, entries[0]); err != nil {
			if lctx.Err() == nil {
				s.log.Warn("merge queue stopped", "queue", id, "pr", entries[0].PR.String(), "err", err)
			} else if cause := context.Cause(lctx); errors.Is(cause, kvlease.ErrLost) {
				s.log.Warn("merge lock lost; another replica carries on", "queue", id, "pr", entries[0].PR.String(), "err", cause)
			}
			return
		}
	}
}
