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

// passState is what the shell keeps of a pass besides the observation:
// the stored entries (their revisions), the riding PRs as GitHub showed
// them, and the batch's revision.
type passState struct {
	entries []stored
	pulls   []*gh.PullRequest
	rev     uint64
}

// riders returns the first n entries with their PRs.
func (ps *passState) riders(n int) []rider {
	out := make([]rider, n)
	for i := range n {
		out[i] = rider{st: ps.entries[i], p: ps.pulls[i]}
	}
	return out
}

// pull is the PR of the entry at i as this pass read it (nil: not read).
func (ps *passState) pull(i int) *gh.PullRequest {
	if i < len(ps.pulls) {
		return ps.pulls[i]
	}
	return nil
}

// pass looks at the queue once: observe (the queue, its candidates, then
// each phase stepBatch asks for) → stepBatch → store → execute. It
// settles PRs that must leave, brings the candidates in line with GitHub,
// merges what a green candidate proved or removes what a failed one
// disproved. It reports whether to go on at once (false: the queue is
// empty or must wait for NotBefore).
func (sp *speculation) pass(ctx context.Context) (bool, error) {
	o, ps, err := sp.observe(ctx)
	if err != nil {
		return false, err
	}
	pol := sp.s.cfg.policy()
	for {
		t := stepBatch(o, pol)
		// The CI times of the candidates judged (the queue's ETA);
		// measure records each commit once.
		sp.s.measure(ctx, sp.qid, true, t.Samples...)
		if t.Ask == nil {
			return sp.carryOut(ctx, t, o, &ps)
		}
		if err := sp.answer(ctx, t.Ask, &o, &ps); err != nil {
			return false, err
		}
	}
}

// observe reads the queue's entries and its stored batch: what every pass
// starts from.
func (sp *speculation) observe(ctx context.Context) (batchObservation, passState, error) {
	entries, err := sp.s.ordered(ctx, sp.qid)
	if err != nil {
		return batchObservation{}, passState{}, err
	}
	batch, rev, err := sp.load(ctx)
	if err != nil {
		return batchObservation{}, passState{}, err
	}
	o := batchObservation{Now: sp.s.d.Now(), Batch: batch}
	for _, st := range entries {
		o.Entries = append(o.Entries, st.Entry)
	}
	return o, passState{entries: entries, rev: rev}, nil
}

// answer carries out the phase stepBatch asked for and adds what came of
// it to o. A read that fails is o.Err, for stepBatch to charge; only a
// failed write of the batch (the lock lost) or the end of ctx stops the
// pass.
func (sp *speculation) answer(ctx context.Context, ask batchAsk, o *batchObservation, ps *passState) error {
	var err error
	switch a := ask.(type) {
	case askRiders:
		o.Riders, ps.pulls, err = sp.readRiders(ctx, ps.entries[:a.N])
	case askFlush:
		if ps.rev, err = sp.flush(ctx, o.Batch, ps.rev); err != nil {
			return err
		}
		o.Batch.Outbox = nil
	case askBuild:
		o.Built = true
		o.Chain, o.Fresh, o.BaseSHA, o.Conflict, err = sp.build(ctx, ps.riders(a.N), o.Batch.Candidates)
	case askChecks:
		o.ChecksRead = true
		o.Required, o.Inputs, err = sp.readCandidateChecks(ctx, ps.entries[0].Entry, o.Chain[:a.N])
		o.ChecksAt = sp.s.d.Now()
	case askHeads:
		o.Heads, err = sp.readHeads(ctx, ps.entries[:a.N])
	case askStack:
		o.Stacked = true
		o.StackedChain, o.StackedFresh, o.StackErr = sp.stack(ctx, o.Chain, o.BaseSHA, ps.entries[a.From:a.From+a.N], o.Batch.Candidates)
		if o.StackErr != nil && ctx.Err() == nil {
			sp.log.Info("cannot stack the next candidates before merging", "err", o.StackErr)
		}
	case askPush:
		o.Pushed = true
		o.PushErr = sp.push(ctx, ps.pulls[0], a.Candidates)
		if o.PushErr != nil && ctx.Err() == nil {
			sp.log.Info("cannot push the candidates", "err", o.PushErr)
		}
	case askStore:
		if ps.rev, err = sp.record(ctx, a, ps.rev); err != nil {
			return err
		}
		sp.countFlaky(o.Batch, a.Batch)
		// The observation holds the batch as stored from now on: what a
		// later phase of the pass compares with it (unstoredFlaky) is the
		// record, not what the pass began with.
		o.Batch, o.Batch.Outbox = a.Batch, nil
		o.Stored = true
	case askRerun:
		if err := sp.rerun(ctx, a, o, ps); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return nil
	case askOwn:
		st := ps.entries[a.Index]
		var own ChecksInput
		if own, err = sp.s.readChecks(ctx, st.PR.RepoRef(), st.Head); err == nil {
			o.Own = &own
		}
		err = about(st.PR, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	o.Err = err
	return nil
}

// carryOut executes the commands that end a pass, in order.
func (sp *speculation) carryOut(ctx context.Context, t batchTransition, o batchObservation, ps *passState) (bool, error) {
	s := sp.s
	for _, c := range t.Commands {
		switch c := c.(type) {
		case cmdClear:
			return false, sp.clear(ctx, o.Batch, ps.rev)
		case cmdFinish:
			return true, s.finish(ctx, ps.entries[c.Index])
		case cmdEntry:
			st := &ps.entries[c.Index]
			log := sp.log.With("pr", st.PR.String())
			switch {
			case c.T.Leave != "":
				log.Info("leaving the merge queue", "why", c.T.Why, "result", c.T.Leave)
			case c.T.Next.Failures > st.Failures:
				log.Warn("merge step failed; will retry", "why", c.T.Why, "failures", c.T.Next.Failures)
			}
			if err := s.apply(ctx, st, ps.pull(c.Index), c.T, log); err != nil {
				return t.More, unlessReplaced(err)
			}
		case cmdMergeUpTo:
			return true, sp.mergeUpTo(ctx, ps.entries[:len(c.Candidates)], c)
		}
	}
	if t.Wait {
		return t.More, ctxtime.Sleep(ctx, s.cfg.PollInterval)
	}
	return t.More, nil
}

// record stores the batch a with its events in its outbox, publishes
// them, and deletes the branches of candidates whose PRs left: store,
// then execute. It returns the batch's new revision.
func (sp *speculation) record(ctx context.Context, a askStore, rev uint64) (uint64, error) {
	next := a.Batch
	for _, ev := range a.Events {
		e, err := sp.s.emit.Build(ev.Data, ev.Parts...)
		if err != nil {
			return rev, err
		}
		next.Outbox = append(next.Outbox, e)
	}
	rev, err := sp.save(ctx, next, rev)
	if err != nil {
		return rev, err
	}
	for _, c := range a.Gone {
		sp.deleteBranch(ctx, c)
	}
	return sp.flush(ctx, next, rev)
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

// readRiders re-reads the first PRs of the queue on GitHub, for ride to
// judge whether each rides or leaves: the PR, its approval when it is on
// the queued head, the tree of a merge prloop made whose answer was lost.
func (sp *speculation) readRiders(ctx context.Context, entries []stored) ([]Observation, []*gh.PullRequest, error) {
	s := sp.s
	// The reads go in parallel: right after a batch merges, the next PRs'
	// reads are the whole of the queue's critical path.
	obs := make([]Observation, len(entries))
	pulls := make([]*gh.PullRequest, len(entries))
	err := parallel(len(entries), func(i int) error {
		st := entries[i]
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			return about(st.PR, err)
		}
		v := ViewOf(p)
		pulls[i], obs[i].PR = p, v
		switch {
		case v.Open && !v.Merged && v.HeadSHA == st.Head:
			obs[i].Approval, err = s.verify(ctx, st.PR, st.approvalOf(p), sp.log.With("pr", st.PR.String()))
		case wants(st.Entry, v).MergedTree:
			// Merged by prloop, and the answer was lost: checked as if it
			// had come.
			obs[i].MergedTree, err = s.readTree(ctx, st, v.MergeSHA)
		}
		return about(st.PR, err)
	})
	if err != nil {
		return nil, nil, err
	}
	return obs, pulls, nil
}

// readCandidateChecks reads what reported on each of the chain's
// candidates, and, once for every candidate, what their base requires.
func (sp *speculation) readCandidateChecks(ctx context.Context, first Entry, chain []Candidate) ([]string, []ChecksInput, error) {
	s := sp.s
	required, err := s.readRequiredChecks(ctx, first.PR.RepoRef(), first.Base)
	if err != nil {
		return nil, nil, err
	}
	inputs := make([]ChecksInput, len(chain))
	if err := parallel(len(chain), func(i int) error {
		var err error
		inputs[i], err = s.readChecks(ctx, chain[i].PR.RepoRef(), chain[i].SHA)
		return about(chain[i].PR, err)
	}); err != nil {
		return nil, nil, err
	}
	return required, inputs, nil
}

// readHeads reads what reported on the entries' own heads.
func (sp *speculation) readHeads(ctx context.Context, entries []stored) ([]ChecksInput, error) {
	inputs := make([]ChecksInput, len(entries))
	if err := parallel(len(entries), func(i int) error {
		var err error
		inputs[i], err = sp.s.readChecks(ctx, entries[i].PR.RepoRef(), entries[i].Head)
		return err
	}); err != nil {
		return nil, err
	}
	return inputs, nil
}

// stack builds candidates for the queued PRs in entries (those after the
// batch) on chain, while the batch's proven PRs merge: it reads them (the
// ones open on their queued head, in order, up to the first that is not;
// they are not let leave here, their own pass does that), fetches their
// heads and extends the chain. It returns the chain with them and the new
// ones among them, not pushed yet.
func (sp *speculation) stack(ctx context.Context, chain []Candidate, baseSHA string, entries []stored, old []Candidate) (_, fresh []Candidate, _ error) {
	pulls := make([]*gh.PullRequest, len(entries))
	if err := parallel(len(entries), func(i int) error {
		var err error
		pulls[i], err = sp.s.d.GitHub.GetPull(ctx, entries[i].PR)
		return err
	}); err != nil {
		return nil, nil, err
	}
	var next []rider
	for i, st := range entries {
		if v := ViewOf(pulls[i]); !v.Open || v.Merged || v.HeadSHA != st.Head || v.BaseRef != st.Base {
			break
		}
		next = append(next, rider{st: st, p: pulls[i]})
	}
	if len(next) == 0 {
		return chain, nil, nil
	}
	if err := sp.fetchHeads(ctx, next); err != nil {
		return nil, nil, err
	}
	chain, fresh, _, err := sp.extend(ctx, chain, baseSHA, next, old)
	return chain, fresh, err
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

// mergeUpTo merges the entries whose own candidates are green, in order
// (m: the candidates, what each one's checks were judged on, the tip they
// were built on, and those to count as flaky as they merge). Each merge is
// observe → land → store → execute: GitHub re-read (the PR, its approval,
// the base tip), the core's land decides with mayLand (the PR still open
// on the tested head with its approval standing for this base, the base
// where the previous merge, or the batch, left it, the candidate green),
// the merge intent is stored, the merge call made, and what came of it
// judged by the core as the serial queue's is (afterCommand: main's tree
// must be the candidate's). Otherwise it stops, and the next pass lets the
// PR leave or rebuilds.
func (sp *speculation) mergeUpTo(ctx context.Context, entries []stored, m cmdMergeUpTo) error {
	s := sp.s
	pol := s.cfg.policy()
	expect := m.BuiltOn
	for i, st := range entries {
		c := m.Candidates[i]
		log := sp.log.With("pr", st.PR.String())
		p, o, err := sp.observeLanding(ctx, st, expect, log)
		if err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
		t := land(st.Entry, o, c, m.Judged[i], expect, pol)
		if len(t.Commands) == 0 {
			log.Info("not merging now", "why", t.Why)
			return s.applyThenWait(ctx, &st, p, t, log)
		}
		out, err := s.execute(ctx, &st, p, t, log)
		if err != nil || out == nil {
			return unlessReplaced(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t = Step(st.Entry, Observation{Now: s.d.Now(), Outcome: out}, pol)
		if out.Kind == merged && slices.Contains(m.Flaky, c.SHA) {
			s.d.Metrics.CandidateRerun(metrics.RerunFlaky)
			log.Info("a re-run candidate passed: flaky", "candidate", short(c.SHA))
		}
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
// its approval (when it is still on the queued head), the base's policy
// for the merge (when that approval stands), and last the base tip. The
// policy is read at builtOn, the tip the candidate was built on, before
// the tip is read for the last time, as the serial queue's executor reads
// it: mayLand lets the merge go only when builtOn is still the tip, and
// the policy's requests (the file, the comparison, the file's blobs) do
// not stand between that read and the merge call, which does not guard
// the tip.
func (sp *speculation) observeLanding(ctx context.Context, st stored, builtOn string, log *slog.Logger) (*gh.PullRequest, Observation, error) {
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
	if o.Approval.Approved {
		ms, err := s.readMergeSettings(ctx, st.PR, st.Base, builtOn, st.Head, o.Approval.Approvers)
		if err != nil {
			return nil, Observation{}, err
		}
		o.Settings = &ms
	}
	if o.Freezes, err = s.freezesOf(ctx, st.PR.RepoRef()); err != nil {
		return nil, Observation{}, err
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

// clear forgets an empty queue's candidates (b, stored at rev) and
// deletes their branches.
// The checks seen on them stay expected of the next candidates: with no
// rule naming them, they are all prloop knows of what CI runs, and a
// candidate built after an empty queue must not be green as soon as one
// check passed while the others have not registered yet.
func (sp *speculation) clear(ctx context.Context, b Batch, rev uint64) error {
	if len(b.Candidates) == 0 && b.BaseSHA == "" && len(b.Outbox) == 0 {
		return nil
	}
	var err error
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
