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

	gh "github.com/google/go-github/v66/github"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/gitx"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
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
}

// candidateBranch is the prloop-owned branch the candidate of PR number n
// in base's queue is pushed as. One branch per PR, not per position: a
// rebuilt candidate replaces only its own PR's stale one (CI set to cancel
// superseded runs of a branch cancels just that), never a live candidate
// that moved up after a merge.
func candidateBranch(base string, n int) string {
	return "prloop/queue/" + base + "/" + strconv.Itoa(n)
}

// mergeDecision is chooseMerge's answer.
type mergeDecision struct {
	// Merge is how many PRs, from the first, can be merged now: each of
	// them has its own candidate green.
	Merge int
	// Remove, when not 0, is the place (from 1) of a PR whose candidate
	// failed while the candidate before it passed (or it is the first):
	// that PR broke the build and leaves the queue.
	Remove int
	// Stack says new candidates may be built at the end of the chain. Not
	// after a failed candidate: a candidate stacked on it holds the
	// failure too, and would only spend a CI run on a certain red. They
	// are built once the failing PR has left.
	Stack bool
}

// chooseMerge decides from the candidates' check verdicts, in order, what
// the queue can do: merge the PRs whose candidates are green, from the
// first up to the first that is not; remove the PR whose candidate is the
// first failed one when the candidate before it passed (the base plus the
// PRs ahead was green, adding this PR made it red); or wait. It is pure.
//
// Merging PR k moves the base to candidate k's tree, so candidate k must
// be green before that merge call, whatever a later candidate says: a
// green candidate k+1 proves the PRs 1…k+1 together, not the tree main
// sits on between the two merges, and if the second merge does not come
// (refused, approval withdrawn, base moved) main stays on that tree. So
// [pending, green] waits for the first candidate. Squash merges land one
// PR at a time; nothing can move the base to candidate k+1 in one step.
//
// A failed candidate after a pending one only waits: its fault may lie
// with a PR before it, which that PR's own candidate will show.
func chooseMerge(states []ChecksState) mergeDecision {
	d := mergeDecision{Stack: true}
	proven := true // every candidate so far is green
	for i, st := range states {
		if st == ChecksFailed {
			d.Stack = false
			if i == 0 || states[i-1] == ChecksGreen {
				d.Remove = i + 1
			}
			break
		}
		proven = proven && st == ChecksGreen
		if proven {
			d.Merge = i + 1
		}
	}
	return d
}

// reusable returns the old candidate that still tests what the chain's
// candidate for pr at head must test: the same tree. Its place may have
// changed (the PRs ahead of it merged): the tree, not the place, is what
// CI tested.
func reusable(old []Candidate, pr ghref.PR, head, tree string) (Candidate, bool) {
	for _, c := range old {
		if c.PR.Number == pr.Number && c.Head == head && c.Tree == tree {
			return c, true
		}
	}
	return Candidate{}, false
}

// invalidated returns the candidates of old that next no longer holds
// (by commit), for PRs still queued.
func invalidated(old, next []Candidate, queued func(ghref.PR) bool) []Candidate {
	var out []Candidate
	for _, c := range old {
		if !slices.ContainsFunc(next, func(n Candidate) bool { return n.SHA == c.SHA }) && queued(c.PR) {
			out = append(out, c)
		}
	}
	return out
}

// speculation is one replica's work on one queue in speculative mode,
// while it holds the queue's lock: a scratch repository kept across
// passes, so that only new commits are fetched.
type speculation struct {
	s   *Service
	qid string
	dir string
	g   gitCmd
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
	states := make([]ChecksState, len(chain))
	checks := make([]Checks, len(chain))
	for i := kept; i < len(chain); i++ {
		states[i] = ChecksPending
		checks[i] = Checks{State: ChecksPending, Pending: []string{"any check (the candidate is new)"}}
	}
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
	judged, judgedOn, seen := judgeCandidates(inputs, required, batch.SeenChecks, headChecks(riders[:kept]))
	if n := greenPrefix(judged); n > 0 {
		// About to trust a green candidate: what reported on the heads it
		// carries is expected of it too, read now, when CI on those heads
		// has had the longest time to register.
		grew, err := sp.readHeadChecks(ctx, riders[:n])
		if errors.Is(err, errReplaced) {
			return true, nil
		}
		if err != nil {
			return retry(err)
		}
		if grew {
			judged, judgedOn, seen = judgeCandidates(inputs, required, batch.SeenChecks, headChecks(riders[:kept]))
		}
	}
	copy(checks, judged)
	for i := range kept {
		states[i] = checks[i].State
	}
	d := chooseMerge(states)
	if d.Merge > 0 && d.Remove == 0 {
		// The checks seen on the candidates about to merge stay expected
		// of those behind them, which are built on their trees.
		next := batch
		next.SeenChecks = seen
		if d.Stack && len(chain) == len(riders) {
			stacked, err := sp.stackNext(ctx, next, chain, fresh, riders, entries, d.Merge, baseSHA)
			switch {
			case err == nil:
				next = stacked
			case ctx.Err() != nil:
				return false, err
			default:
				// Only time is lost: the next pass builds them on the
				// base the merges leave.
				sp.log.Info("cannot stack the next candidates before merging", "err", err)
			}
		}
		if _, err := sp.save(ctx, next, rev); err != nil {
			return false, err
		}
		return true, sp.mergeUpTo(ctx, riders[:d.Merge], chain[:d.Merge], judgedOn[:d.Merge], baseSHA)
	}
	if !d.Stack {
		// Built in the scratch repository only; the next pass, after the
		// failing PR has left, builds what is worth testing.
		chain, fresh = chain[:kept], nil
	}
	if err := sp.push(ctx, riders[0].p, fresh); err != nil {
		return retry(err)
	}
	if err := sp.publish(ctx, batch, chain, riders[0].st.Base, baseSHA, entries); err != nil {
		return retry(err)
	}
	batch.BaseSHA, batch.Candidates, batch.SeenChecks = baseSHA, chain, seen
	if _, err = sp.save(ctx, batch, rev); err != nil {
		return false, err
	}
	log := sp.log.With("pr", riders[0].st.PR.String())
	switch {
	case d.Remove > 0:
		// The culprit leaves first, before the PRs ahead of it merge: the
		// next pass stacks the PRs behind it on the green prefix while
		// those merges go on.
		i := d.Remove - 1
		c, st := chain[i], riders[i].st
		var plus strings.Builder
		for _, a := range chain[:i] {
			fmt.Fprintf(&plus, "#%d, ", a.PR.Number)
		}
		return true, s.fail(ctx, st, events.ReasonChecksFailed, fmt.Sprintf(
			"checks failed on candidate %s (branch %s: %s at %s plus %sthis PR at %s): %s",
			ghref.ShortSHA(c.SHA), c.Branch, st.Base, ghref.ShortSHA(baseSHA), plus.String(), ghref.ShortSHA(c.Head), strings.Join(checks[i].Failed, ", ")),
			sp.log.With("pr", st.PR.String()))
	case s.d.Now().Sub(chain[0].BuiltAt) >= s.cfg.ChecksTimeout:
		c := chain[0]
		return true, s.fail(ctx, riders[0].st, events.ReasonChecksFailed, fmt.Sprintf(
			"checks on candidate %s (branch %s) still pending after %s: %s",
			ghref.ShortSHA(c.SHA), c.Branch, s.cfg.ChecksTimeout, strings.Join(checks[0].Pending, ", ")), log)
	}
	// The pass went through: every rider's earlier errors are behind it.
	for i := range riders {
		if err := s.recovered(ctx, &riders[i].st); err != nil {
			return true, s.saved(err)
		}
	}
	st := riders[0].st
	if err := s.announceWaiting(ctx, &st, checks[0]); err != nil {
		return false, s.saved(err)
	}
	return true, ctxtime.Sleep(ctx, s.cfg.PollInterval)
}

// riders re-reads the first PRs of the queue on GitHub and lets those
// that must leave (merged, closed, moved on, approval gone, base changed)
// do so, as the serial queue would. It reports left when one did: the
// caller looks again from the start.
func (sp *speculation) riders(ctx context.Context, entries []stored) ([]rider, bool, error) {
	s := sp.s
	// The reads go in parallel: right after a batch merges, the next PRs'
	// reads are the whole of the queue's critical path.
	type read struct {
		p        *gh.PullRequest
		approval ApprovalCheck
	}
	reads := make([]read, len(entries))
	err := parallel(len(entries), func(i int) error {
		st := entries[i]
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			return about(st.PR, err)
		}
		reads[i].p = p
		if v := ViewOf(p); v.Open && !v.Merged && v.HeadSHA == st.Head {
			reads[i].approval, err = s.verify(ctx, st.PR, st.approvalOf(p), sp.log.With("pr", st.PR.String()))
		}
		return about(st.PR, err)
	})
	if err != nil {
		return nil, false, err
	}
	var out []rider
	for i, st := range entries {
		log := sp.log.With("pr", st.PR.String())
		p := reads[i].p
		v := ViewOf(p)
		d := Decide(Input{PR: v, Head: st.Head, Approval: reads[i].approval, ChecksTimeout: s.cfg.ChecksTimeout})
		switch d.Action {
		case ActMerged:
			if st.MergingHead != "" && st.MergingHead == v.HeadSHA {
				// Merged by prloop, and the answer was lost: check it as if
				// it had come.
				_, err := sp.verifyMerged(ctx, st, p, p.GetMergeCommitSHA(), log)
				return nil, true, err
			}
			log.Info("merged outside prloop; leaving the merge queue")
			return nil, true, s.left(ctx, st, metrics.MergeMergedElsewhere)
		case ActDrop:
			return nil, true, s.drop(ctx, st, d.Reason, d.Why, log)
		case ActFail:
			if d.Reason == events.ReasonMergeConflict {
				return nil, true, s.conflicted(ctx, st, "", d.Why, log)
			}
			return nil, true, s.fail(ctx, st, d.Reason, d.Why, log)
		}
		// Wait (mergeability not computed yet), update (behind: the
		// candidate brings it up to date) and merge all ride.
		out = append(out, rider{st: st, p: p})
	}
	return out, false, nil
}

// riding returns how many of the first entries of a queue ride in
// candidates: at most depth, up to the first that is waiting out the
// backoff of an error of its own (NotBefore after now). Queue order holds:
// the PRs behind such an entry wait with it, the PRs ahead of it go on. It
// is pure.
func riding(entries []stored, depth int, now time.Time) int {
	n := min(len(entries), depth)
	for i := range n {
		if entries[i].NotBefore.After(now) {
			return i
		}
	}
	return n
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

// blame returns the place (from 0) in prs of the PR an error of a pass is
// about: the first of them when the error (or one joined in it) is about
// none of them in particular (the base, the queue, a local failure),
// otherwise the earliest PR named, since the PRs behind it wait for it
// anyway. It is pure.
func blame(err error, prs []ghref.PR) int {
	place := len(prs)
	var walk func(error) bool // false: err is about no PR of prs
	walk = func(err error) bool {
		switch e := err.(type) {
		case *prError:
			i := slices.IndexFunc(prs, func(p ghref.PR) bool { return p == e.pr })
			if i < 0 {
				return false
			}
			place = min(place, i)
			return true
		case interface{ Unwrap() []error }:
			for _, sub := range e.Unwrap() {
				if !walk(sub) {
					return false
				}
			}
			return len(e.Unwrap()) > 0
		case interface{ Unwrap() error }:
			if sub := e.Unwrap(); sub != nil {
				return walk(sub)
			}
		}
		return false
	}
	if !walk(err) || place == len(prs) {
		return 0
	}
	return place
}

// prsOf returns the PRs of entries, in order.
func prsOf(entries []stored) []ghref.PR {
	out := make([]ghref.PR, len(entries))
	for i, e := range entries {
		out[i] = e.PR
	}
	return out
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
// by merging, so no more than the depth are ever pending. It returns the
// batch holding them, for the caller to save.
func (sp *speculation) stackNext(ctx context.Context, batch Batch, chain, fresh []Candidate, riders []rider, entries []stored, merge int, baseSHA string) (Batch, error) {
	more := entries[len(riders):min(len(entries), len(riders)+merge)]
	more = more[:riding(more, len(more), sp.s.d.Now())]
	if len(more) == 0 && len(fresh) == 0 {
		return batch, nil
	}
	next, err := sp.nextRiders(ctx, more)
	if err != nil {
		return Batch{}, err
	}
	if len(next) > 0 {
		if err := sp.fetchHeads(ctx, next); err != nil {
			return Batch{}, err
		}
	}
	chain, extra, _, err := sp.extend(ctx, chain, baseSHA, next, batch.Candidates)
	if err != nil {
		return Batch{}, err
	}
	fresh = append(fresh, extra...)
	if err := sp.push(ctx, riders[0].p, fresh); err != nil {
		return Batch{}, err
	}
	if err := sp.publish(ctx, batch, chain, riders[0].st.Base, baseSHA, entries); err != nil {
		return Batch{}, err
	}
	batch.BaseSHA, batch.Candidates = baseSHA, chain
	return batch, nil
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
	sha, err := sp.g.r.Run(ctx, gitx.Cmd{Args: args, Dir: sp.dir, Env: []string{
		"GIT_AUTHOR_DATE=" + candidateDate, "GIT_COMMITTER_DATE=" + candidateDate,
	}})
	if err != nil {
		return "", fmt.Errorf("build candidate for %s: %w", c.PR, err)
	}
	return sha, nil
}

// publish announces the chain: PRMergeCandidate "invalidated" for every
// old candidate it no longer holds whose PR is still queued, then "built"
// for each new one. Ids carry the candidate commit, so a pass repeated
// after a crash publishes nothing twice.
func (sp *speculation) publish(ctx context.Context, old Batch, chain []Candidate, base, baseSHA string, entries []stored) error {
	queued := func(pr ghref.PR) bool {
		return slices.ContainsFunc(entries, func(e stored) bool { return e.PR.Number == pr.Number })
	}
	for _, c := range old.Candidates {
		if !queued(c.PR) {
			sp.deleteBranch(ctx, c)
		}
	}
	for _, c := range invalidated(old.Candidates, chain, queued) {
		detail := "the base branch moved"
		if i := slices.IndexFunc(chain, func(n Candidate) bool { return n.PR.Number == c.PR.Number }); i >= 0 && chain[i].Head != c.Head {
			detail = "the PR's head changed"
		} else if old.BaseSHA == baseSHA {
			detail = "a PR ahead of it left the queue or changed"
		}
		if err := sp.emit(ctx, c, events.CandidateInvalidated, base, old.BaseSHA, old.Candidates, detail); err != nil {
			return err
		}
	}
	for _, c := range chain {
		if slices.ContainsFunc(old.Candidates, func(o Candidate) bool { return o.SHA == c.SHA && o.PR.Number == c.PR.Number }) {
			continue
		}
		if err := sp.emit(ctx, c, events.CandidateBuilt, base, baseSHA, chain, ""); err != nil {
			return err
		}
	}
	return nil
}

// emit publishes one PRMergeCandidate about c, a member of chain.
func (sp *speculation) emit(ctx context.Context, c Candidate, state, base, baseSHA string, chain []Candidate, detail string) error {
	pos := slices.IndexFunc(chain, func(o Candidate) bool { return o.SHA == c.SHA }) + 1
	var ahead []int
	for _, o := range chain[:max(pos-1, 0)] {
		ahead = append(ahead, o.PR.Number)
	}
	_, _, err := sp.s.emit.Emit(ctx, &events.MergeCandidate{
		Base: events.Base{PR: c.PR, HeadSHA: c.Head}, BaseBranch: base, State: state, Candidate: c.SHA, Tree: c.Tree,
		Branch: c.Branch, BaseSHA: baseSHA, Position: pos, Ahead: ahead, Detail: detail,
	}, state, c.SHA)
	if err == nil {
		sp.log.Info("merge candidate "+state, "pr", c.PR.String(), "candidate", ghref.ShortSHA(c.SHA), "branch", c.Branch, "ahead", ahead, "detail", detail)
	}
	return err
}

// judgeCandidates evaluates the checks of a chain's candidates, in chain
// order. Each must report what the base requires and every check seen
// before it: on the queue's earlier candidates (seen), on the ones ahead
// of it in this chain, read at the same moment, because CI may have
// registered a check on candidate 1 and not yet on candidate 2, and on the
// heads of the PRs it carries (heads[i] for the PR of candidate i): with
// no rule naming them, a check that ran on a PR's own head is how prloop
// knows CI has it. It returns the verdicts, what each was judged on (the
// input with what was expected of the candidate: mayLand judges it again
// right before the merge), and every check seen on a candidate so far.
func judgeCandidates(inputs []ChecksInput, required, seen []string, heads [][]string) ([]Checks, []ChecksInput, []string) {
	out := make([]Checks, len(inputs))
	on := make([]ChecksInput, len(inputs))
	var carried []string
	for i, in := range inputs {
		if i < len(heads) {
			carried = union(carried, heads[i])
		}
		in.Required, in.Seen = required, union(seen, carried)
		on[i], out[i] = in, candidateChecks(in)
		seen = union(seen, out[i].Reported)
	}
	return out, on, seen
}

// greenPrefix returns how many candidates, from the first, chooseMerge
// would merge on these verdicts: those whose checks are about to be
// trusted.
func greenPrefix(judged []Checks) int {
	states := make([]ChecksState, len(judged))
	for i, c := range judged {
		states[i] = c.State
	}
	return chooseMerge(states).Merge
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

// candidateChecks evaluates a candidate's checks: those the base requires
// and those seen on the queue's earlier candidates (in.Required, in.Seen)
// must all report and pass, and a candidate on which nothing reported is
// never green (it was not tested).
func candidateChecks(in ChecksInput) Checks {
	c := EvaluateChecks(in)
	if c.State == ChecksGreen && len(c.Reported) == 0 {
		c.State = ChecksPending
		c.Pending = []string{"any check (none reported on the candidate yet)"}
	}
	return c
}

// mergeUpTo merges the riders whose own candidates are green, in order;
// judged holds what each candidate's checks were judged on. Before each
// merge it re-reads GitHub (the PR, its approval, the base tip) and
// mayLand decides: the PR still open on the tested head with its
// approval standing for this base, the base where the previous merge (or
// the batch) left it, the candidate green. Otherwise it stops, and the
// next pass lets the PR leave or rebuilds. After each merge, main's tree
// must be the candidate's.
func (sp *speculation) mergeUpTo(ctx context.Context, riders []rider, chain []Candidate, judged []ChecksInput, baseSHA string) error {
	s := sp.s
	expect := baseSHA
	for i, r := range riders {
		st, c := r.st, chain[i]
		log := sp.log.With("pr", st.PR.String())
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
		v := ViewOf(p)
		if !v.Open || v.Merged {
			return nil // the next pass lets it leave and rebuilds
		}
		var approval ApprovalCheck
		if v.HeadSHA == st.Head {
			if approval, err = s.verify(ctx, st.PR, st.approvalOf(p), log); err != nil {
				return s.retryLater(ctx, &st, err, log)
			}
		}
		tip, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), st.Base)
		if err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
		verdict := mayLand(landing{
			Head: v.HeadSHA, Approved: st.Head, Base: v.BaseRef, ApprovedBase: st.Base, Approval: approval,
			Tested: c.SHA, TestedHead: c.Head, Candidate: true, BuiltOn: expect, Tip: tip.GetSHA(),
			RequireChecks: true, Required: judged[i].Required, Seen: judged[i].Seen, Reports: judged[i],
		})
		if !verdict.ok() {
			return sp.withheld(ctx, st, verdict, log)
		}
		if ms, err := s.mergeSettingsOf(ctx, st.PR, st.Base, tip.GetSHA(), c.Head, approval.Approvers); err != nil {
			return s.retryLater(ctx, &st, err, log)
		} else if ms.Hold != "" {
			_, err := s.policyHeld(ctx, &st, ms.Hold, log)
			return err
		}
		st.MergingHead, st.MergingTree = c.Head, c.Tree
		if err := s.q.save(ctx, &st); err != nil {
			return s.saved(err)
		}
		res, err := s.d.GitHub.Merge(ctx, st.PR, github.MergeOptions{
			Method: s.cfg.MergeMethod, SHA: c.Head, Title: commitTitle(p), Message: p.GetBody(),
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if after, gerr := s.d.GitHub.GetPull(ctx, st.PR); gerr == nil && after.GetMerged() {
				_, err := sp.verifyMerged(ctx, st, after, after.GetMergeCommitSHA(), log)
				return err
			}
			if isRefusal(err) {
				st.MergingHead, st.MergingTree = "", ""
				_, err := s.refused(ctx, &st, "merge", err, log)
				return err
			}
			return s.retryLater(ctx, &st, err, log)
		}
		if ok, err := sp.verifyMerged(ctx, st, p, res.GetSHA(), log); err != nil || !ok {
			return err // not as tested: escalated; the next pass rebuilds on the real base
		}
		expect = res.GetSHA()
	}
	return nil
}

// withheld handles a merge mayLand refused in mergeUpTo: the merges stop
// there, and the next pass decides what to do next. A head or base that
// changed lets the PR leave on that pass (riders), a base tip moved by
// someone else rebuilds the candidates, a withdrawn approval makes the PR
// leave now; anything else (a candidate whose checks are not green after
// all) is counted like a merge GitHub refused, so that a disagreement
// between the rule and what chose the merge cannot spin.
func (sp *speculation) withheld(ctx context.Context, st stored, v landVerdict, log *slog.Logger) error {
	switch v.Refusal {
	case refusedHead, refusedBase:
		log.Info("the PR changed before its merge; the next pass looks again", "why", v.Why)
		return nil
	case refusedTip:
		log.Info("the base branch moved; rebuilding the candidates", "why", v.Why)
		return nil
	}
	_, err := sp.s.withheld(ctx, &st, v, log)
	return err
}

// verifyMerged finishes a merge prloop made of st: PRMerged, the entry
// leaves; and when main's tree after it is not the tree of the green
// candidate the merge was made for (st.MergingTree, recorded before the
// merge call: not whatever candidate of the PR the batch holds now, which
// may be a rebuilt one CI has not passed), a human is called: the change
// landed, but not as tested. It reports whether the tree matched.
func (sp *speculation) verifyMerged(ctx context.Context, st stored, p *gh.PullRequest, mergeSHA string, log *slog.Logger) (bool, error) {
	s := sp.s
	tree := st.MergingTree
	ok, err := sp.treeMatches(ctx, st, mergeSHA, tree)
	if err != nil {
		return false, err
	}
	if !ok {
		why := fmt.Sprintf("merged %s as %s, whose tree is not the tree of the candidate prloop tested (%s); main may hold an untested combination, and the queue's later candidates are rebuilt on it",
			ghref.ShortSHA(st.MergingHead), ghref.ShortSHA(mergeSHA), ghref.ShortSHA(tree))
		log.Error("merged tree differs from the tested candidate", "merge_sha", mergeSHA, "want_tree", tree)
		if _, _, err := s.emit.Emit(ctx, &events.EscalationRequested{
			Base: events.Base{PR: st.PR, HeadSHA: st.MergingHead}, Reason: events.ReasonUntestedMerge, Severity: events.SeverityBlocking,
			Detail: why, Actor: Name, Epoch: st.Epoch,
		}, string(events.ReasonUntestedMerge), mergeSHA); err != nil {
			return false, err
		}
	}
	return ok, s.merged(ctx, st, p, mergeSHA, log)
}

// treeMatches reports whether the commit mergeSHA has tree; with no tree
// to compare (a candidate record lost), it does not.
func (sp *speculation) treeMatches(ctx context.Context, st stored, mergeSHA, tree string) (bool, error) {
	if tree == "" || mergeSHA == "" {
		return false, nil
	}
	c, err := sp.s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), mergeSHA)
	if err != nil {
		return false, fmt.Errorf("read the merge of %s: %w", st.PR, err)
	}
	return c.GetCommit().GetTree().GetSHA() == tree, nil
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
	if err != nil || (len(b.Candidates) == 0 && b.BaseSHA == "") {
		return err
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
