package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gh "github.com/google/go-github/v66/github"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/gitx"
	"github.com/prloop/prloop/pkg/kvlease"
)

// The speculative queue (PRLOOP_QUEUE_MODE=speculative).
//
// The first PRLOOP_QUEUE_DEPTH PRs of a queue ride in candidates: commit 1
// is the base tip plus PR 1, commit 2 is commit 1 plus PR 2, and so on,
// each built exactly as GitHub's squash (or merge) of that PR will build
// it, with git merge-tree. The candidates are pushed as the prloop-owned
// branches prloop/queue/<base>/<n>, where CI tests them. When candidates
// 1…k are all green, PRs 1…k are merged in order (PR i only on its own
// green candidate i, the tree main gets after it), each with the head
// guard, each after GitHub is re-read (the PR still open on the tested
// head, its approval standing, the base where the candidate left it), and
// main's tree after each merge is checked against that candidate's: a tree
// nobody tested never lands silently. When the first
// candidate fails, its PR leaves with checks_failed naming the failing
// checks, and the candidates after it are rebuilt without it.
//
// Candidates are kept by what they test, their tree: after prloop merges
// PR 1, candidate 2 still tests exactly main plus PR 2, and is not built
// again. A base tip moved by someone else, a PR's new head or a PR that
// left changes the trees from there on; those candidates are invalidated
// (PRMergeCandidate "invalidated") and new ones built.
//
// Candidate commits are deterministic (fixed identity and dates, a message
// naming the PRs): a replica taking over builds the same commits, so the
// CI already run on them counts.

// batchKey names a queue's candidates in the bucket: batch.<qid>.
func batchKey(qid string) string { return "batch." + qid }

// Batch is a queue's candidates, written only by the replica holding the
// queue's lock.
type Batch struct {
	// BaseSHA is the base tip the candidates were last checked against.
	BaseSHA    string      `json:"base_sha"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// SeenChecks names every check that reported on a candidate of the
	// queue: each must report, and pass, on later candidates too.
	SeenChecks []string `json:"seen_checks,omitempty"`
	// Outbox holds the PRMergeCandidate events decided with this batch,
	// published after it is stored; a pass that stops in between leaves
	// them for the next, which publishes them first.
	Outbox []cloudevents.Event `json:"outbox,omitempty"`
}

// Candidate is one tested combination: the base tip plus the PRs up to and
// including PR at Head.
type Candidate struct {
	PR   ghref.PR `json:"pr"`
	Seq  uint64   `json:"seq"`
	Head string   `json:"head"`
	// SHA is the candidate commit, Tree its tree (what a merge of the PRs
	// must give), Branch where it was pushed.
	SHA    string `json:"sha"`
	Tree   string `json:"tree"`
	Branch string `json:"branch"`
	// BuiltAt is when the candidate was first pushed: its checks time out
	// PRLOOP_CHECKS_TIMEOUT after it.
	BuiltAt time.Time `json:"built_at"`
	// Rerun is the one re-run of its failed jobs, once made (flaky.go).
	Rerun *Rerun `json:"rerun,omitempty"`
}

// candidateBranch is the prloop-owned branch the candidate of PR number n
// in base's queue is pushed as. One branch per PR, not per position: a
// rebuilt candidate replaces only its own PR's stale one (CI set to cancel
// superseded runs of a branch cancels just that), never a live candidate
// that moved up after a merge.
func candidateBranch(base string, n int) string {
	return "prloop/queue/" + base + "/" + strconv.Itoa(n)
}

// speculation is one replica's work on one queue in speculative mode,
// while it holds the queue's lock: a scratch repository kept across
// passes, so that only new commits are fetched.
type speculation struct {
	s   *Service
	qid string
	dir string
	g   gitRunner
	log *slog.Logger
}

// drainSpeculative runs passes over the queue until it is empty, must
// wait, or ctx (the lock) ends.
func (s *Service) drainSpeculative(ctx context.Context, qid string) {
	dir, err := os.MkdirTemp("", "prloop-queue-")
	if err != nil {
		s.log.Warn("speculative queue: scratch repository", "queue", qid, "err", err)
		return
	}
	defer func() { _ = os.RemoveAll(dir) }()
	sp := &speculation{
		s: s, qid: qid, dir: dir, log: s.log.With("queue", qid, "mode", QueueSpeculative),
		g: gitCmd{dir: dir, r: &gitx.Runner{Bin: s.d.GitBin, Env: gitEnv(dir), Token: s.d.GitToken}},
	}
	if _, err := sp.g.run(ctx, "init", "-q"); err != nil {
		sp.log.Warn("speculative queue: scratch repository", "err", err)
		return
	}
	for ctx.Err() == nil {
		more, err := sp.pass(ctx)
		if err != nil {
			if ctx.Err() == nil {
				sp.log.Warn("merge queue stopped", "err", err)
			} else if cause := context.Cause(ctx); errors.Is(cause, kvlease.ErrLost) {
				sp.log.Warn("merge lock lost; another replica carries on", "err", cause)
			}
			return
		}
		if !more {
			return
		}
	}
}

// rider is a queued PR in the batch, with what GitHub says of it now.
type rider struct {
	st stored
	p  *gh.PullRequest
}

// pass looks at the queue once: settles PRs that must leave, brings the
// candidates in line with GitHub, merges what a green candidate proved or
// removes what a failed one disproved. It reports whether to go on at
// once (false: the queue is empty or must wait for NotBefore).
func (sp *speculation) pass(ctx context.Context) (bool, error) {
	s := sp.s
	entries, err := s.q.list(ctx, sp.qid)
	if err != nil {
		return false, err
	}
	if len(entries) == 0 {
		return false, sp.clear(ctx)
	}
	for _, st := range entries {
		if len(st.Outbox) > 0 || st.Leaving != "" {
			// A decision stored and not carried out (a crash): its events
			// first, and an entry that was leaving leaves.
			return true, s.finish(ctx, st)
		}
	}
	if entries[0].NotBefore.After(s.d.Now()) {
		return false, nil
	}
	ride := entries[:riding(entries, s.cfg.queueDepth(), s.d.Now())]
	retry := func(err error) (bool, error) {
		// An error is charged to the PR it is about; one about the base
		// or the queue to the first, and it holds the whole queue, first
		// come first served. A PR further back waits on its own: the next
		// pass leaves it and those behind it out of the candidates until
		// its backoff ends (riding), and the PRs ahead of it go on.
		i := blame(err, prsOf(ride))
		st := &entries[i]
		if err := s.retryLater(ctx, st, err, sp.log.With("pr", st.PR.String())); err != nil || i == 0 {
			return false, err
		}
		return true, nil
	}
	riders, left, err := sp.riders(ctx, ride)
	if err != nil {
		return retry(err)
	}
	if left {
		return true, nil // a PR left the queue: look again
	}
	batch, rev, err := sp.load(ctx)
	if err != nil {
		return false, err
	}
	if len(batch.Outbox) > 0 {
		// Decided and stored, not said: a pass stopped in between.
		if rev, err = sp.flush(ctx, batch, rev); err != nil {
			return false, err
		}
		batch.Outbox = nil
	}
	chain, fresh, baseSHA, conflict, err := sp.build(ctx, riders, batch.Candidates)
	if err != nil {
		return retry(err)
	}
	if conflict != "" {
		// The first PR conflicts with the base itself.
		st := riders[0].st
		return true, s.conflicted(ctx, st, baseSHA, conflict, sp.log.With("pr", st.PR.String()))
	}
	// The candidates kept from earlier passes form a prefix of the chain
	// (a changed tree changes every tree after it); only they can have
	// checks. New ones are pending by definition.
	kept := len(chain) - len(fresh)
	// One base, one read of what it requires, for every candidate.
	var required []string
	if kept > 0 {
		if required, err = s.requiredChecks(ctx, riders[0].st.PR.RepoRef(), riders[0].st.Base); err != nil {
			return retry(err)
		}
	}
	inputs := make([]ChecksInput, kept)
	if err := parallel(kept, func(i int) error {
		var err error
		inputs[i], err = s.readChecks(ctx, chain[i].PR.RepoRef(), chain[i].SHA)
		return about(chain[i].PR, err)
	}); err != nil {
		return retry(err)
	}
	pol := s.cfg.policy()
	view := batchView{
		Now: s.d.Now(), Base: riders[0].st.Base, BaseSHA: baseSHA, Chain: chain, Kept: kept, Inputs: inputs,
		Required: required, Seen: batch.SeenChecks, Heads: headChecks(riders[:kept]),
	}
	d := decideBatch(view, pol)
	if d.ReadHeads > 0 {
		_, err := sp.readHeadChecks(ctx, riders[:d.ReadHeads])
		if errors.Is(err, errReplaced) {
			return true, nil
		}
		if err != nil {
			return retry(err)
		}
		view.Heads, view.HeadsRead = headChecks(riders[:kept]), true
		d = decideBatch(view, pol)
	}
	// Issue #34, apart from the pass's own flow: the CI times measured
	// for the ETA (eta.go), and a failed candidate's jobs re-run once
	// before its PR is removed (flaky.go).
	s.measure(ctx, sp.qid, true, candidateSamples(chain, d.Checks, kept, view.Now)...)
	if rev, err = sp.retryFailed(ctx, &d, view, &batch, rev); err != nil {
		return retry(err)
	}
	if d.Merge > 0 && d.Remove == 0 {
		// The checks seen on the candidates about to merge stay expected
		// of those behind them, which are built on their trees.
		next := batch
		next.SeenChecks = d.Seen
		if d.Stack && len(chain) == len(riders) {
			stacked, err := sp.stackNext(ctx, chain, fresh, riders, entries, d.Merge, baseSHA, batch.Candidates)
			switch {
			case err == nil:
				next.BaseSHA, next.Candidates = baseSHA, stacked
			case ctx.Err() != nil:
				return false, err
			default:
				// Only time is lost: the next pass builds them on the
				// base the merges leave.
				sp.log.Info("cannot stack the next candidates before merging", "err", err)
			}
		}
		if err := sp.record(ctx, batch, next, rev, entries); err != nil {
			return false, err
		}
		return true, sp.mergeUpTo(ctx, riders[:d.Merge], chain[:d.Merge], d.Judged[:d.Merge], baseSHA)
	}
	if !d.Stack {
		// Built in the scratch repository only; the next pass, after the
		// failing PR has left, builds what is worth testing.
		chain, fresh = chain[:kept], nil
	}
	// The push comes before the record: a candidate recorded is one CI
	// can see, and a pass that stops in between builds the same commit
	// again.
	if err := sp.push(ctx, riders[0].p, fresh); err != nil {
		return retry(err)
	}
	next := batch
	next.BaseSHA, next.Candidates, next.SeenChecks = baseSHA, chain, d.Seen
	if err := sp.record(ctx, batch, next, rev, entries); err != nil {
		return false, err
	}
	if d.Fail > 0 {
		// The culprit leaves first, before the PRs ahead of it merge: the
		// next pass stacks the PRs behind it on the green prefix while
		// those merges go on.
		st := riders[d.Fail-1].st
		log := sp.log.With("pr", st.PR.String())
		if d.Remove == 0 {
			return true, s.fail(ctx, st, events.ReasonChecksFailed, d.Why, log)
		}
		// Its candidate failed: whether its own head is green says
		// whether the agent or a human is asked.
		own, err := s.readChecks(ctx, st.PR.RepoRef(), st.Head)
		if err != nil {
			return retry(about(st.PR, err))
		}
		t := removed(st.Entry, chain[d.Fail-1], d.Judged[d.Fail-1], own, baseSHA, d.Why, pol)
		log.Warn("leaving the merge queue: its candidate failed", "reason", t.Leave, "why", t.Why)
		return true, s.saved(s.apply(ctx, &st, nil, t, log))
	}
	// The pass went through: every rider's earlier errors are behind it.
	for i := range riders {
		if err := s.recovered(ctx, &riders[i].st); err != nil {
			return true, s.saved(err)
		}
	}
	st := riders[0].st
	if err := s.announce(ctx, &st, d.Checks[0], sp.log.With("pr", st.PR.String())); err != nil {
		return false, s.saved(err)
	}
	return true, ctxtime.Sleep(ctx, s.cfg.PollInterval)
}

// record stores the queue's next batch with the PRMergeCandidate events
// that say how it differs from old in its outbox, publishes them, and
// deletes the branches of candidates whose PRs left: store, then execute.
func (sp *speculation) record(ctx context.Context, old, next Batch, rev uint64, entries []stored) error {
	queued := func(pr ghref.PR) bool {
		return slices.ContainsFunc(entries, func(e stored) bool { return e.PR.Number == pr.Number })
	}
	base := entries[0].Base
	evs, gone := candidateEvents(old, next.Candidates, base, next.BaseSHA, queued)
	for _, ev := range evs {
		e, err := sp.s.emit.Build(ev.Data, ev.Parts...)
		if err != nil {
			return err
		}
		next.Outbox = append(next.Outbox, e)
	}
	rev, err := sp.save(ctx, next, rev)
	if err != nil {
		return err
	}
	for _, c := range gone {
		sp.deleteBranch(ctx, c)
	}
	_, err = sp.flush(ctx, next, rev)
	return err
}

// flush publishes the events in the batch's outbox and then empties it.
func (sp *speculation) flush(ctx context.Context, b Batch, rev uint64) (uint64, error) {
	if len(b.Outbox) == 0 {
		return rev, nil
	}
	for _, e := range b.Outbox {
		if _, err := sp.s.emit.Send(ctx, e); err != nil {
			return rev, err
		}
		if d, err := events.DataOf(e); err == nil {
			if mc, ok := d.(*events.MergeCandidate); ok {
				sp.log.Info("merge candidate "+mc.State, "pr", mc.PR.String(), "candidate", ghref.ShortSHA(mc.Candidate), "branch", mc.Branch, "ahead", mc.Ahead, "detail", mc.Detail)
			}
		}
	}
	b.Outbox = nil
	return sp.save(ctx, b, rev)
}

// riders re-reads the first PRs of the queue on GitHub (observe) and
// lets those that must leave (merged, closed, moved on, approval gone,
// base changed) do so, as the serial queue would (ride, the core's
// decision). It reports left when one did: the caller looks again from
// the start.
func (sp *speculation) riders(ctx context.Context, entries []stored) ([]rider, bool, error) {
	s := sp.s
	// The reads go in parallel: right after a batch merges, the next PRs'
	// reads are the whole of the queue's critical path.
	type read struct {
		p *gh.PullRequest
		o Observation
	}
	reads := make([]read, len(entries))
	err := parallel(len(entries), func(i int) error {
		st := entries[i]
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			return about(st.PR, err)
		}
		v := ViewOf(p)
		reads[i].p, reads[i].o.PR = p, v
		switch {
		case v.Open && !v.Merged && v.HeadSHA == st.Head:
			reads[i].o.Approval, err = s.verify(ctx, st.PR, st.approvalOf(p), sp.log.With("pr", st.PR.String()))
		case wants(st.Entry, v).MergedTree:
			// Merged by prloop, and the answer was lost: checked as if it
			// had come.
			reads[i].o.MergedTree, err = s.treeOf(ctx, st, v.MergeSHA)
		}
		return about(st.PR, err)
	})
	if err != nil {
		return nil, false, err
	}
	pol := s.cfg.policy()
	var out []rider
	for i, st := range entries {
		t, rides := ride(st.Entry, reads[i].o, pol)
		if !rides {
			log := sp.log.With("pr", st.PR.String())
			log.Info("leaving the merge queue", "why", t.Why, "result", t.Leave)
			return nil, true, s.saved(s.apply(ctx, &st, reads[i].p, t, log))
		}
		// Wait (mergeability not computed yet), update (behind: the
		// candidate brings it up to date) and merge all ride.
		out = append(out, rider{st: st, p: reads[i].p})
	}
	return out, false, nil
}

// prError is an error about one PR of the queue (its read, its approval,
// its head, its candidate's checks), which is charged to that PR.
type prError struct {
	pr  ghref.PR
	err error
}

func (e *prError) Error() string { return e.err.Error() }
func (e *prError) Unwrap() error { return e.err }

// about marks err (nil stays nil) as being about pr.
func about(pr ghref.PR, err error) error {
	if err == nil {
		return nil
	}
	return &prError{pr: pr, err: err}
}

// parallel runs f(0) … f(n-1) at once and returns the first error.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// build fetches the base and the riders' heads and computes the chain of
// candidates, keeping every old candidate that still tests the same tree
// and committing new ones (fresh, not pushed yet). It returns the base tip
// it built on, and when the first PR conflicts with the base, why.
func (sp *speculation) build(ctx context.Context, riders []rider, old []Candidate) (chain, fresh []Candidate, baseSHA, conflict string, err error) {
	s := sp.s
	base := riders[0].p.GetBase()
	baseURL, baseRef := base.GetRepo().GetCloneURL(), base.GetRef()
	if baseURL == "" || baseRef == "" {
		return nil, nil, "", "", fmt.Errorf("build candidates: GitHub did not say where %s's base lives", riders[0].st.PR)
	}
	// The tip from the API, and git only for commits not fetched yet: most
	// passes find nothing new and spawn no network git at all.
	tip, err := s.d.GitHub.GetCommit(ctx, riders[0].st.PR.RepoRef(), baseRef)
	if err != nil {
		return nil, nil, "", "", fmt.Errorf("build candidates: read %s: %w", baseRef, err)
	}
	baseSHA = tip.GetSHA()
	if !sp.has(ctx, baseSHA) {
		if _, err := sp.g.remote(ctx, baseURL, "fetch", "-q", "--no-tags", baseURL, "+refs/heads/"+baseRef+":refs/prloop/base"); err != nil {
			return nil, nil, "", "", fmt.Errorf("build candidates: fetch %s: %w", baseRef, err)
		}
		if !sp.has(ctx, baseSHA) {
			return nil, nil, "", "", fmt.Errorf("build candidates: %s moved past %s while fetching it", baseRef, ghref.ShortSHA(baseSHA))
		}
	}
	if err := sp.fetchCandidates(ctx, baseURL, old); err != nil {
		return nil, nil, "", "", err
	}
	if err := sp.fetchHeads(ctx, riders); err != nil {
		return nil, nil, "", "", err
	}
	chain, fresh, conflict, err = sp.extend(ctx, nil, baseSHA, riders, old)
	return chain, fresh, baseSHA, conflict, err
}

// extend stacks a candidate for each rider on chain (on base when chain is
// empty), reusing an old candidate that tests the same tree. It stops at a
// rider that conflicts with a PR ahead of it in the batch (that PR waits);
// a first rider conflicting with base itself is reported as conflict.
func (sp *speculation) extend(ctx context.Context, chain []Candidate, base string, riders []rider, old []Candidate) (_, fresh []Candidate, conflict string, err error) {
	prev := base
	if len(chain) > 0 {
		prev = chain[len(chain)-1].SHA
	}
	for _, r := range riders {
		head := r.st.Head
		out, err := sp.g.run(ctx, "merge-tree", "--write-tree", "--no-messages", prev, head)
		if gitx.ExitCode(err) == 1 {
			if len(chain) == 0 {
				return nil, nil, fmt.Sprintf("the PR conflicts with its base branch %s", r.st.Base), nil
			}
			// It conflicts with a PR ahead of it: it waits until those
			// are merged, and then conflicts with the base itself.
			sp.log.Info("PR conflicts with a PR ahead of it in the batch; it waits", "pr", r.st.PR.String())
			break
		}
		if err != nil {
			return nil, nil, "", fmt.Errorf("build candidate for %s: %w", r.st.PR, err)
		}
		tree, _, _ := strings.Cut(out, "\n")
		if c, ok := reusable(old, r.st.PR, head, tree); ok && sp.has(ctx, c.SHA) {
			chain = append(chain, c)
			prev = c.SHA
			continue
		}
		c := Candidate{PR: r.st.PR, Seq: r.st.Seq, Head: head, Tree: tree, Branch: candidateBranch(r.st.Base, r.st.PR.Number), BuiltAt: sp.s.d.Now().UTC()}
		if c.SHA, err = sp.commit(ctx, c, prev, chain); err != nil {
			return nil, nil, "", err
		}
		chain = append(chain, c)
		fresh = append(fresh, c)
		prev = c.SHA
	}
	return chain, fresh, "", nil
}

// nextRiders returns the queued PRs in entries that are open on their
// queued head, in order, up to the first that is not: the PRs after the
// batch, whose candidates are stacked on it while its proven PRs merge.
// They are not let leave here; their own pass does that.
func (sp *speculation) nextRiders(ctx context.Context, entries []stored) ([]rider, error) {
	pulls := make([]*gh.PullRequest, len(entries))
	if err := parallel(len(entries), func(i int) error {
		var err error
		pulls[i], err = sp.s.d.GitHub.GetPull(ctx, entries[i].PR)
		return err
	}); err != nil {
		return nil, err
	}
	var out []rider
	for i, st := range entries {
		if v := ViewOf(pulls[i]); !v.Open || v.Merged || v.HeadSHA != st.Head || v.BaseRef != st.Base {
			break
		}
		out = append(out, rider{st: st, p: pulls[i]})
	}
	return out, nil
}

// stackNext gives the PRs after the batch their candidates before the
// batch's proven PRs merge, so that their CI runs during the merges rather
// than after them. The merges leave the base at the tree of the last
// merged candidate, so a candidate stacked on the chain now has the tree
// the next pass computes on the new base, and that pass keeps it (by
// tree) with its CI already under way. If the merges stop early, the next
// pass finds other trees and rebuilds: a CI run spent, nothing untested
// merged. At most merge more candidates are stacked: as many as leave CI
// by merging, so no more than the depth are ever pending. It pushes the
// new candidates and returns the chain holding them, for the caller to
// record.
func (sp *speculation) stackNext(ctx context.Context, chain, fresh []Candidate, riders []rider, entries []stored, merge int, baseSHA string, old []Candidate) ([]Candidate, error) {
	more := entries[len(riders):min(len(entries), len(riders)+merge)]
	more = more[:riding(more, len(more), sp.s.d.Now())]
	if len(more) == 0 && len(fresh) == 0 {
		return chain, nil
	}
	next, err := sp.nextRiders(ctx, more)
	if err != nil {
		return nil, err
	}
	if len(next) > 0 {
		if err := sp.fetchHeads(ctx, next); err != nil {
			return nil, err
		}
	}
	chain, extra, _, err := sp.extend(ctx, chain, baseSHA, next, old)
	if err != nil {
		return nil, err
	}
	if err := sp.push(ctx, riders[0].p, append(fresh, extra...)); err != nil {
		return nil, err
	}
	return chain, nil
}

// push pushes new candidates to their branches in the base repository
// of p, in one push.
func (sp *speculation) push(ctx context.Context, p *gh.PullRequest, fresh []Candidate) error {
	if len(fresh) == 0 {
		return nil
	}
	baseURL := p.GetBase().GetRepo().GetCloneURL()
	args := []string{"push", "-q", "--no-verify", baseURL}
	for _, c := range fresh {
		args = append(args, "+"+c.SHA+":refs/heads/"+c.Branch)
	}
	if _, err := sp.g.remote(ctx, baseURL, args...); err != nil {
		return fmt.Errorf("push the candidates of %s: %w", sp.qid, err)
	}
	return nil
}

// fetchCandidates makes the old candidates available in the scratch
// repository (another replica, or an earlier drain, built them), so that
// the chain can go on from them; a candidate that cannot be fetched is
// simply built again.
func (sp *speculation) fetchCandidates(ctx context.Context, baseURL string, old []Candidate) error {
	var refspecs []string
	for _, c := range old {
		if !sp.has(ctx, c.SHA) {
			refspecs = append(refspecs, "+refs/heads/"+c.Branch+":refs/prloop/candidate/"+strconv.Itoa(c.PR.Number))
		}
	}
	if len(refspecs) == 0 {
		return nil
	}
	args := append([]string{"fetch", "-q", "--no-tags", baseURL}, refspecs...)
	if _, err := sp.g.remote(ctx, baseURL, args...); err != nil {
		sp.log.Info("cannot fetch earlier candidates; building them again", "err", err)
	}
	return nil
}

// fetchHeads makes the riders' heads available in the scratch
// repository: one fetch per repository they live in, for the heads not
// fetched yet, and then each branch must have been at its approved head.
func (sp *speculation) fetchHeads(ctx context.Context, riders []rider) error {
	var urls []string
	refspecs := map[string][]string{}
	owners := map[string][]ghref.PR{} // the PRs whose heads live at each URL
	for _, r := range riders {
		if sp.has(ctx, r.st.Head) {
			continue
		}
		url, ref := r.p.GetHead().GetRepo().GetCloneURL(), r.p.GetHead().GetRef()
		if url == "" || ref == "" {
			// head.repo is null when the fork was deleted.
			return about(r.st.PR, fmt.Errorf("fetch %s: GitHub did not say where its head lives", r.st.PR))
		}
		if refspecs[url] == nil {
			urls = append(urls, url)
		}
		refspecs[url] = append(refspecs[url], "+refs/heads/"+ref+":refs/prloop/pr/"+strconv.Itoa(r.st.PR.Number))
		owners[url] = append(owners[url], r.st.PR)
	}
	for _, url := range urls {
		args := append([]string{"fetch", "-q", "--no-tags", url}, refspecs[url]...)
		if _, err := sp.g.remote(ctx, url, args...); err != nil {
			err = fmt.Errorf("fetch the heads of %s's queue: %w", sp.qid, err)
			if len(owners[url]) == 1 {
				// A repository only this PR's head lives in (its fork).
				err = about(owners[url][0], err)
			}
			return err
		}
	}
	for _, r := range riders {
		if !sp.has(ctx, r.st.Head) {
			return about(r.st.PR, fmt.Errorf("fetch %s: branch %s is no longer at the approved %s", r.st.PR, r.p.GetHead().GetRef(), ghref.ShortSHA(r.st.Head)))
		}
	}
	return nil
}

// has reports whether the scratch repository holds commit sha.
func (sp *speculation) has(ctx context.Context, sha string) bool {
	ok, _ := sp.g.ok(ctx, "cat-file", "-e", sha+"^{commit}")
	return ok
}

// candidateDate is every candidate commit's author and committer date:
// fixed, so that the same inputs make the same commit on any replica.
const candidateDate = "2000-01-01T00:00:00Z"

// commit writes candidate c on top of prev: a squash (one parent) or, for
// PRLOOP_MERGE_METHOD=merge, a merge commit of prev and the PR's head.
func (sp *speculation) commit(ctx context.Context, c Candidate, prev string, ahead []Candidate) (string, error) {
	var msg strings.Builder
	fmt.Fprintf(&msg, "prloop merge queue candidate for %s\n\n", c.PR.RepoRef())
	for _, a := range ahead {
		fmt.Fprintf(&msg, "#%d at %s\n", a.PR.Number, a.Head)
	}
	fmt.Fprintf(&msg, "#%d at %s\n", c.PR.Number, c.Head)
	args := []string{"commit-tree", c.Tree, "-p", prev}
	if sp.s.cfg.MergeMethod == github.MergeMethodMerge {
		args = append(args, "-p", c.Head)
	}
	args = append(args, "-m", msg.String())
	sha, err := sp.g.runEnv(ctx, []string{"GIT_AUTHOR_DATE=" + candidateDate, "GIT_COMMITTER_DATE=" + candidateDate}, args...)
	if err != nil {
		return "", fmt.Errorf("build candidate for %s: %w", c.PR, err)
	}
	return sha, nil
}

// headChecks returns, per rider, the checks that reported on its PR's
// heads (the entry's SeenChecks).
func headChecks(riders []rider) [][]string {
	out := make([][]string, len(riders))
	for i, r := range riders {
		out[i] = r.st.SeenChecks
	}
	return out
}

// readHeadChecks reads what reported on the riders' own heads and adds it
// to their entries' SeenChecks; it reports whether any grew.
func (sp *speculation) readHeadChecks(ctx context.Context, riders []rider) (bool, error) {
	s := sp.s
	inputs := make([]ChecksInput, len(riders))
	if err := parallel(len(riders), func(i int) error {
		var err error
		inputs[i], err = s.readChecks(ctx, riders[i].st.PR.RepoRef(), riders[i].st.Head)
		return err
	}); err != nil {
		return false, err
	}
	grew := false
	for i := range riders {
		st := &riders[i].st
		seen := union(st.SeenChecks, EvaluateChecks(inputs[i]).Reported)
		if len(seen) == len(st.SeenChecks) {
			continue
		}
		st.SeenChecks, grew = seen, true
		if err := s.q.save(ctx, st); err != nil {
			return false, err
		}
	}
	return grew, nil
}

// mergeUpTo merges the riders whose own candidates are green, in order;
// judged holds what each candidate's checks were judged on. Each merge is
// observe → land → store → execute: GitHub re-read (the PR, its approval,
// the base tip), the core's land decides with mayLand (the PR still open
// on the tested head with its approval standing for this base, the base
// where the previous merge, or the batch, left it, the candidate green),
// the merge intent is stored, the merge call made, and what came of it
// judged by the core as the serial queue's is (afterCommand: main's tree
// must be the candidate's). Otherwise it stops, and the next pass lets the
// PR leave or rebuilds.
func (sp *speculation) mergeUpTo(ctx context.Context, riders []rider, chain []Candidate, judged []ChecksInput, baseSHA string) error {
	s := sp.s
	pol := s.cfg.policy()
	expect := baseSHA
	for i, r := range riders {
		st, c := r.st, chain[i]
		log := sp.log.With("pr", st.PR.String())
		p, o, err := sp.observeLanding(ctx, st, log)
		if err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
		t := land(st.Entry, o, c, judged[i], expect, pol)
		if len(t.Commands) == 0 {
			log.Info("not merging now", "why", t.Why)
			return s.applyThenWait(ctx, &st, p, t, log)
		}
		out, err := s.execute(ctx, &st, p, t, log)
		if err != nil || out == nil {
			return s.saved(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t = Step(st.Entry, Observation{Now: s.d.Now(), Outcome: out}, pol)
		if out.Kind == merged && out.MergedTree != c.Tree {
			log.Error("merged tree differs from the tested candidate", "merge_sha", out.MergeSHA, "tree", out.MergedTree, "want_tree", c.Tree)
		}
		if err := s.applyThenWait(ctx, &st, p, t, log); err != nil {
			return err
		}
		if out.Kind != merged || out.MergedTree != c.Tree {
			return nil // not merged, or not as tested (escalated): the next pass rebuilds on the real base
		}
		log.Info("merged", "head", ghref.ShortSHA(c.Head), "merge_sha", out.MergeSHA, "candidate", ghref.ShortSHA(c.SHA))
		expect = out.MergeSHA
	}
	return nil
}

// observeLanding reads what land judges, right before the merge: the PR,
// its approval (when it is still on the queued head), and last the base
// tip.
func (sp *speculation) observeLanding(ctx context.Context, st stored, log *slog.Logger) (*gh.PullRequest, Observation, error) {
	s := sp.s
	p, err := s.d.GitHub.GetPull(ctx, st.PR)
	if err != nil {
		return nil, Observation{}, err
	}
	o := Observation{PR: ViewOf(p)}
	if o.PR.Open && !o.PR.Merged && o.PR.HeadSHA == st.Head {
		if o.Approval, err = s.verify(ctx, st.PR, st.approvalOf(p), log); err != nil {
			return nil, Observation{}, err
		}
	}
	tip, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), st.Base)
	if err != nil {
		return nil, Observation{}, err
	}
	o.Tip, o.Now = tip.GetSHA(), s.d.Now()
	return p, o, nil
}

// load reads the queue's batch (empty when there is none) and its revision.
func (sp *speculation) load(ctx context.Context) (Batch, uint64, error) {
	e, err := sp.s.d.Queue.Get(ctx, batchKey(sp.qid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Batch{}, 0, nil
	}
	if err != nil {
		return Batch{}, 0, fmt.Errorf("read the candidates of %s: %w", sp.qid, err)
	}
	var b Batch
	if err := json.Unmarshal(e.Value(), &b); err != nil {
		// Candidates are a cache of what CI runs on: a record that cannot
		// be read is rebuilt, never trusted.
		sp.log.Warn("unreadable candidates record; rebuilding", "err", err)
		return Batch{}, e.Revision(), nil
	}
	return b, e.Revision(), nil
}

// save writes the batch at rev (0: creates it); only the lock holder
// writes it, so a conflict means the lock was lost.
func (sp *speculation) save(ctx context.Context, b Batch, rev uint64) (uint64, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return 0, fmt.Errorf("encode the candidates of %s: %w", sp.qid, err)
	}
	if rev == 0 {
		rev, err = sp.s.d.Queue.Create(ctx, batchKey(sp.qid), body)
	} else {
		rev, err = sp.s.d.Queue.Update(ctx, batchKey(sp.qid), body, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("save the candidates of %s: %w", sp.qid, err)
	}
	return rev, nil
}

// deleteBranch deletes the branch of a candidate whose PR left the queue;
// a failure only leaves a stale branch behind.
func (sp *speculation) deleteBranch(ctx context.Context, c Candidate) {
	if err := sp.s.d.GitHub.DeleteBranch(ctx, c.PR.RepoRef(), c.Branch); err != nil && !errors.Is(err, github.ErrNotFound) {
		sp.log.Warn("cannot delete a candidate branch", "branch", c.Branch, "err", err)
	}
}

// clear forgets an empty queue's candidates and deletes their branches.
// The checks seen on them stay expected of the next candidates: with no
// rule naming them, they are all prloop knows of what CI runs, and a
// candidate built after an empty queue must not be green as soon as one
// check passed while the others have not registered yet.
func (sp *speculation) clear(ctx context.Context) error {
	b, rev, err := sp.load(ctx)
	if err != nil || (len(b.Candidates) == 0 && b.BaseSHA == "" && len(b.Outbox) == 0) {
		return err
	}
	if len(b.Outbox) > 0 {
		if rev, err = sp.flush(ctx, b, rev); err != nil {
			return err
		}
	}
	for _, c := range b.Candidates {
		sp.deleteBranch(ctx, c)
	}
	if len(b.SeenChecks) > 0 {
		_, err := sp.save(ctx, Batch{SeenChecks: b.SeenChecks}, rev)
		return err
	}
	if err := sp.s.d.Queue.Delete(ctx, batchKey(sp.qid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget the candidates of %s: %w", sp.qid, err)
	}
	return nil
}
