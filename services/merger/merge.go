package merger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
)

// maxFailures bounds transient errors (GitHub or git unreachable) about
// one entry in a row, with no pass going through between them, before the
// merger gives up on it.
const maxFailures = 8

// process works on the first entry of a queue until it leaves the queue
// (merged, dropped, failed) or must wait (NotBefore set after an error). It
// returns an error only when the queue itself cannot be written or ctx is
// done; the drain loop then stops and the lock is released.
//
// Each pass is observe → Step → store → execute: it reads the PR and what
// the entry needs (wants), Step decides, the next entry is stored with
// Step's events in its outbox, the events are published, and Step's
// commands run; what a command found out goes back to Step. Every pass
// re-reads the PR and re-verifies its approval on GitHub, so an approval
// withdrawn while the entry waits makes it leave, and the merge call
// follows a verification in the same pass.
func (s *Service) process(ctx context.Context, st stored) error {
	log := s.log.With("pr", st.PR.String(), "base", st.Base)
	pol := s.cfg.policy()
	if len(st.Outbox) > 0 || st.Leaving != "" {
		// A pass that stopped between storing its decision and carrying
		// it out: the events first.
		return s.finish(ctx, st)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, o := s.observe(ctx, st, log)
		t := Step(st.Entry, o, pol)
		if x, ok := headSample(st.Entry, o, pol); ok {
			s.measure(ctx, queueID(st.PR.RepoRef(), st.Base), false, x) // the ETA's CI time (eta.go)
		}
		for {
			out, err := s.execute(ctx, &st, p, t, log)
			if err != nil {
				return unlessReplaced(err)
			}
			if out == nil {
				break
			}
			t = Step(st.Entry, Observation{Now: s.d.Now(), Outcome: out}, pol)
		}
		if st.Leaving != "" || st.NotBefore.After(s.d.Now()) {
			return nil
		}
		if t.Wait {
			if err := ctxtime.Sleep(ctx, s.cfg.PollInterval); err != nil {
				return err
			}
			if s.yields(ctx, st, log) {
				return nil
			}
		}
	}
}

// observe reads what Step needs about the entry: the PR, and what wants
// asks for given the PR. A read that fails is the observation's Err.
func (s *Service) observe(ctx context.Context, st stored, log *slog.Logger) (*gh.PullRequest, Observation) {
	o := Observation{Now: s.d.Now()}
	p, err := s.d.GitHub.GetPull(ctx, st.PR)
	if err != nil {
		// Not found included: a glitchy read is re-checked, and only
		// maxFailures of them in a row give up (and escalate).
		o.Err = err
		return nil, o
	}
	o.PR = ViewOf(p)
	w := wants(st.Entry, o.PR)
	switch {
	case w.Own:
		own, err := s.madeFrom(ctx, &st, p, o.PR.HeadSHA, st.updating())
		o.Own, o.Err = &own, err
	case w.Adopt:
		// Nothing says when that head was first seen, so only a native
		// review of it can show it approved (no reaction or comment
		// counts); a head approved otherwise comes back with the poller's
		// PRReviewApproved and its anchor.
		check, err := s.verify(ctx, st.PR, ApprovalInput{ApprovedHead: o.PR.HeadSHA, Head: o.PR.HeadSHA, Author: p.GetUser().GetLogin(), BaseSince: st.BaseSince}, log)
		o.Adopted, o.Err = &check, err
	case w.MergedTree:
		o.MergedTree, o.Err = s.readTree(ctx, st, o.PR.MergeSHA)
	case w.OnHead:
		if o.Freezes, o.Err = s.freezesOf(ctx, st.PR.RepoRef()); o.Err == nil {
			o.Err = s.observeHead(ctx, st, p, &o, log)
		}
	}
	o.Now = s.d.Now()
	return p, o
}

// observeHead reads the entry's head: its checks (under
// PRLOOP_REQUIRE_CHECKS), its approval, and, last, so that a merge follows
// it closely, how it stands to its base's tip.
func (s *Service) observeHead(ctx context.Context, st stored, p *gh.PullRequest, o *Observation, log *slog.Logger) error {
	if s.cfg.RequireChecks {
		required, err := s.readRequiredChecks(ctx, st.PR.RepoRef(), st.Base)
		if err != nil {
			return err
		}
		in, err := s.readChecks(ctx, st.PR.RepoRef(), st.Head)
		if err != nil {
			return err
		}
		in.Required = required
		o.Checks = &in
	}
	var err error
	if o.Approval, err = s.verify(ctx, st.PR, st.approvalOf(p), log); err != nil {
		return err
	}
	o.Compare, err = s.compareWithBase(ctx, st, st.Head)
	return err
}

// execute carries out a transition: it stores the next entry with the
// transition's events in its outbox, publishes them, removes the entry if
// it leaves, and runs the commands. It returns what a command found out,
// for Step to judge (nil: nothing to judge).
func (s *Service) execute(ctx context.Context, st *stored, p *gh.PullRequest, t Transition, log *slog.Logger) (*Outcome, error) {
	if err := s.store(ctx, st, t, log); err != nil {
		return nil, err
	}
	if err := s.flush(ctx, st); err != nil {
		return nil, err
	}
	for _, c := range t.Commands {
		switch c := c.(type) {
		case cmdUpdate:
			out := s.updateBranch(ctx, st, p, log)
			return &out, nil
		case cmdMerge:
			out := s.merge(ctx, st, p, c, log)
			return &out, nil
		case cmdDeleteBranch:
			s.deleteHead(ctx, *st, p, log)
		}
	}
	if st.Leaving != "" {
		return nil, s.removeEntry(ctx, *st, st.Leaving)
	}
	return nil, nil
}

// finish carries out what a stored entry's outbox and Leaving say was
// decided and not done: the events, and the removal of a leaving entry.
func (s *Service) finish(ctx context.Context, st stored) error {
	if err := s.flush(ctx, &st); err != nil || st.Leaving == "" {
		return unlessReplaced(err)
	}
	if st.Leaving == metrics.MergeMerged && s.cfg.DeleteBranch {
		// The branch deletion the stopped pass may not have made (best
		// effort, as it always is).
		if p, err := s.d.GitHub.GetPull(ctx, st.PR); err == nil {
			s.deleteHead(ctx, st, p, s.log.With("pr", st.PR.String()))
		}
	}
	return s.removeEntry(ctx, st, st.Leaving)
}

// flush publishes the events in the entry's outbox, in order, and then
// empties it; an entry that leaves keeps them until it is removed.
func (s *Service) flush(ctx context.Context, st *stored) error {
	if len(st.Outbox) == 0 {
		return nil
	}
	for _, e := range st.Outbox {
		if _, err := s.emit.Send(ctx, e); err != nil {
			return err
		}
	}
	if st.Leaving != "" {
		return nil
	}
	next := st.Entry
	next.Outbox = nil
	return s.q.saveAs(ctx, st, next)
}

// store writes the transition's next entry, its events built into the
// outbox, when anything changed.
func (s *Service) store(ctx context.Context, st *stored, t Transition, log *slog.Logger) error {
	next := t.Next
	next.Outbox = slices.Clone(st.Outbox)
	for _, ev := range t.Events {
		e, err := s.emit.Build(ev.Data, ev.Parts...)
		if err != nil {
			return err
		}
		next.Outbox = append(next.Outbox, e)
	}
	next.Leaving = t.Leave
	log.Debug("merge step", "why", t.Why, "leave", t.Leave, "events", len(t.Events), "commands", len(t.Commands))
	if t.Leave == "" && reflect.DeepEqual(next, st.Entry) {
		return nil
	}
	return s.q.saveAs(ctx, st, next)
}

// unlessReplaced turns a failed write of the entry into process's result: an entry
// replaced by a newer approval is picked up again by the drain loop.
func unlessReplaced(err error) error {
	if errors.Is(err, errReplaced) {
		return nil
	}
	return err
}

// madeFrom reports whether head is the update of from that prloop makes
// or made: for PRLOOP_UPDATE_METHOD=rebase exactly the rebase prloop
// computed (recorded before its push); for merge, a merge commit whose
// first parent is from, whose second is a commit of the base branch, and
// whose tree is the one prloop computes itself from those two parents, so
// that a merge commit someone else pushed, with any other content, never
// carries the approval.
func (s *Service) madeFrom(ctx context.Context, st *stored, p *gh.PullRequest, head, from string) (bool, error) {
	if s.cfg.UpdateMethod == UpdateRebase {
		return st.Intent != nil && st.Intent.To != "" && head == st.Intent.To, nil
	}
	g, done, err := s.fetch(ctx, st, p)
	if err != nil {
		return false, err
	}
	defer done()
	return isMergeOf(ctx, g, head, from)
}

// readRequiredChecks reads the checks base requires: its branch rules' and
// PRLOOP_REQUIRED_CHECKS.
func (s *Service) readRequiredChecks(ctx context.Context, repo ghref.Repo, base string) ([]string, error) {
	rules, err := s.d.GitHub.ListBranchRules(ctx, repo, base)
	if err != nil {
		return nil, err
	}
	required, err := github.RequiredChecks(rules)
	if err != nil {
		return nil, fmt.Errorf("required checks of %s of %s: %w", base, repo, err)
	}
	extra, err := s.readPolicyChecks(ctx, repo, base)
	if err != nil {
		return nil, err
	}
	return union(required, extra), nil
}

// readChecks reads what EvaluateChecks looks at on sha, but for what is
// expected of it (Required and Seen), which the caller fills in.
func (s *Service) readChecks(ctx context.Context, repo ghref.Repo, sha string) (ChecksInput, error) {
	combined, err := s.d.GitHub.GetCombinedStatus(ctx, repo, sha)
	if err != nil {
		return ChecksInput{}, err
	}
	runs, err := s.d.GitHub.ListCheckRuns(ctx, repo, sha)
	if err != nil {
		return ChecksInput{}, err
	}
	return ChecksInput{Own: s.cfg.statusContext(), Combined: combined, Runs: runs}, nil
}

// updateBranch brings the head up to date with its base (the entry's
// update intent is stored) and says what came of it.
func (s *Service) updateBranch(ctx context.Context, st *stored, p *gh.PullRequest, log *slog.Logger) Outcome {
	from := st.Head
	log.Info("updating the branch with its base", "method", s.cfg.UpdateMethod, "head", ghref.ShortSHA(from))
	head, err := s.update(ctx, st, p)
	switch {
	case err == nil:
		log.Info("branch updated; waiting for the new head's checks", "from", ghref.ShortSHA(from), "to", ghref.ShortSHA(head))
		return Outcome{Kind: updated, Head: head}
	case errors.Is(err, errRebaseConflict):
		return Outcome{Kind: updateConflict, Err: err, BaseSHA: p.GetBase().GetSHA()}
	case errors.Is(err, errStaleHead):
		return Outcome{Kind: updateStale, Err: err}
	case isRefusal(err):
		return Outcome{Kind: refused, Err: fmt.Errorf("branch update: %w", err)}
	}
	return Outcome{Kind: transient, Err: err}
}

// merge carries out a merge command when mayLand still lets it through
// with the base tip read last, right before the merge call (here, unless
// the command's landing holds the tip its caller just read), and says what
// came of it.
func (s *Service) merge(ctx context.Context, st *stored, p *gh.PullRequest, c cmdMerge, log *slog.Logger) Outcome {
	l := c.Landing
	// The base's .github/prloop.yml says how to merge and may hold the
	// merge back (policy.go): an invalid file, or a PR changing the file
	// without a person's approval, leaves the queue as an approval that no
	// longer stands. It is read at the tip the tested commit was built on,
	// before the tip is read for the last time: mayLand lets the merge go
	// only when that is still the tip, and the policy's requests do not
	// stand between the last read of the tip and the merge call (GitHub's
	// merge call does not guard the tip).
	// The speculative queue read them already, before its read of the tip.
	var ms mergeSettings
	if c.Settings != nil {
		ms = *c.Settings
	} else {
		var err error
		if ms, err = s.readMergeSettings(ctx, st.PR, st.Base, cmp.Or(l.BuiltOn, l.Tip), c.Head, l.Approval.Approvers); err != nil {
			return Outcome{Kind: transient, Err: err}
		}
	}
	if ms.Hold != "" {
		return Outcome{Kind: withheld, Verdict: landVerdict{Refusal: refusedApproval, Reason: events.ReasonApprovalWithdrawn, Why: ms.Hold}}
	}
	if l.Tip == "" {
		tip, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), st.Base)
		if err != nil {
			return Outcome{Kind: transient, Err: err}
		}
		l.Tip = tip.GetSHA()
	}
	if v := mayLand(l); !v.ok() {
		return Outcome{Kind: withheld, Verdict: v}
	}
	// A freeze made since the decision holds the merge too.
	fs, err := s.freezesOf(ctx, st.PR.RepoRef())
	if err != nil {
		return Outcome{Kind: transient, Err: err}
	}
	if f, ok := frozen(fs, st.Base, s.d.Now()); ok {
		return Outcome{Kind: held, Freeze: f}
	}
	res, err := s.d.GitHub.Merge(ctx, st.PR, github.MergeOptions{
		Method: ms.Method, SHA: c.Head, Title: commitTitle(p), Message: p.GetBody(),
		// The tip was read right before: a failed call is not sent again
		// on it later; the next pass reads the tip (and the PR) again.
		Once: true,
	})
	if err == nil {
		return s.readMerged(ctx, *st, res.GetSHA()).with(ms)
	}
	if ctx.Err() != nil {
		return Outcome{Kind: transient, Err: ctx.Err()}
	}
	// Before anything else: did it merge after all (a lost answer)?
	if after, gerr := s.d.GitHub.GetPull(ctx, st.PR); gerr == nil && after.GetMerged() {
		log.Info("the merge call failed, but the PR is merged", "err", err)
		return s.readMerged(ctx, *st, after.GetMergeCommitSHA()).with(ms)
	}
	if isRefusal(err) {
		return Outcome{Kind: refused, Err: fmt.Errorf("merge: %w", err)}
	}
	return Outcome{Kind: transient, Err: err}
}

// readMerged reads the outcome of a merge that made mergeSHA: with its tree,
// which Step compares with the tree CI passed. A tree that cannot be read
// is a transient error: the intent stays, and the next pass finds the PR
// merged and reads it again.
func (s *Service) readMerged(ctx context.Context, st stored, mergeSHA string) Outcome {
	tree, err := s.readTree(ctx, st, mergeSHA)
	if err != nil {
		return Outcome{Kind: transient, Err: err}
	}
	return Outcome{Kind: merged, MergeSHA: mergeSHA, MergedTree: tree}
}

// headVsBase is how a head stands to the tip of its base branch.
type headVsBase struct {
	// behind says the tip is not an ancestor of the head.
	behind bool
	// tree is the head's tree: what a merge of it must leave on the base.
	tree string
	// mergeBase is the newest commit of the base the head contains: the
	// tip when the head is up to date, the tip it was built on.
	mergeBase string
}

// compareWithBase compares head with the tip of the entry's base on
// GitHub, in one request: compared as the base of the comparison, the
// head's commit comes with its tree, and ahead_by counts the base's
// commits it lacks. Up-to-dateness is computed here, never read from
// mergeable_state, which says "behind" only under a strict rule.
func (s *Service) compareWithBase(ctx context.Context, st stored, head string) (headVsBase, error) {
	c, err := s.d.GitHub.Compare(ctx, st.PR.RepoRef(), head, st.Base)
	if err != nil {
		return headVsBase{}, err
	}
	if c.BaseSHA != head || c.BaseTree == "" {
		return headVsBase{}, fmt.Errorf("compare %s with %s of %s: GitHub answered for %s", ghref.ShortSHA(head), st.Base, st.PR, ghref.ShortSHA(c.BaseSHA))
	}
	return headVsBase{behind: c.AheadBy > 0, tree: c.BaseTree, mergeBase: c.MergeBaseSHA}, nil
}

// readTree reads the tree of commit sha in the entry's repository.
func (s *Service) readTree(ctx context.Context, st stored, sha string) (string, error) {
	if sha == "" {
		return "", fmt.Errorf("tree of a merge of %s: GitHub did not say which commit", st.PR)
	}
	c, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), sha)
	if err != nil {
		return "", fmt.Errorf("tree of %s of %s: %w", ghref.ShortSHA(sha), st.PR, err)
	}
	tree := c.GetCommit().GetTree().GetSHA()
	if tree == "" {
		return "", fmt.Errorf("tree of %s of %s: GitHub did not say", ghref.ShortSHA(sha), st.PR)
	}
	return tree, nil
}

// applyThenWait carries out t about the PR as p shows it (nil: not read;
// a branch to delete needs it), and waits the poll interval when t says
// so.
func (s *Service) applyThenWait(ctx context.Context, st *stored, p *gh.PullRequest, t Transition, log *slog.Logger) error {
	if err := s.apply(ctx, st, p, t, log); err != nil {
		return unlessReplaced(err)
	}
	if t.Wait {
		log.Info("refused; re-checking the PR", "why", t.Why)
		return ctxtime.Sleep(ctx, s.cfg.PollInterval)
	}
	return nil
}

// apply carries out a transition the core decided outside process (the
// speculative queue's): store, events, removal of a leaving entry.
func (s *Service) apply(ctx context.Context, st *stored, p *gh.PullRequest, t Transition, log *slog.Logger) error {
	_, err := s.execute(ctx, st, p, t, log)
	return err
}

// isRefusal reports GitHub answers that a fresh look may explain: 405
// (not mergeable now), 409 (head or base moved), 422 (update refused).
func isRefusal(err error) bool {
	return errors.Is(err, github.ErrNotMergeable) || errors.Is(err, github.ErrConflict) || errors.Is(err, github.ErrValidation)
}

// commitTitle is the merge commit's title: "<PR title> (#N)", as GitHub's
// own squash merges title them.
func commitTitle(p *gh.PullRequest) string {
	return fmt.Sprintf("%s (#%d)", p.GetTitle(), p.GetNumber())
}

// deleteHead deletes a merged PR's head branch when it lives in the base
// repository (a fork's branch is not prloop's to delete).
func (s *Service) deleteHead(ctx context.Context, st stored, p *gh.PullRequest, log *slog.Logger) {
	headRepo, baseRepo := p.GetHead().GetRepo().GetFullName(), p.GetBase().GetRepo().GetFullName()
	if headRepo == "" || !strings.EqualFold(headRepo, baseRepo) {
		log.Info("head branch is in another repository; not deleting it", "head_repo", headRepo)
		return
	}
	branch := p.GetHead().GetRef()
	err := s.d.GitHub.DeleteBranch(ctx, st.PR.RepoRef(), branch)
	switch {
	case err == nil:
		log.Info("head branch deleted", "branch", branch)
	case errors.Is(err, github.ErrNotFound):
	default:
		log.Warn("cannot delete the head branch", "branch", branch, "err", err)
	}
}

// removeEntry removes the entry from its queue and counts how it left: once per
// entry, since a resumed entry that already left is no longer listed.
func (s *Service) removeEntry(ctx context.Context, st stored, result string) error {
	if err := s.q.remove(ctx, st); err != nil {
		return err
	}
	s.d.Metrics.Result(result)
	return nil
}

// retryLater records a transient error about the entry outside process
// (the speculative queue's) as Step does: backoff, and after maxFailures
// in a row a human.
func (s *Service) retryLater(ctx context.Context, st *stored, cause error, log *slog.Logger) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	t := backOff(st.Entry, cause, s.d.Now(), s.cfg.policy())
	log.Warn("merge step failed; will retry", "err", cause, "failures", t.Next.Failures, "leave", t.Leave)
	return unlessReplaced(s.apply(ctx, st, nil, t, log))
}
