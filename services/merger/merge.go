package merger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/state"
)

// maxFailures bounds transient errors (GitHub or git unreachable) on one
// entry before the merger gives up on it.
const maxFailures = 8

// process works on the first entry of a queue until it leaves the queue
// (merged, dropped, failed) or must wait (NotBefore set after an error). It
// returns an error only when the queue itself cannot be written or ctx is
// done; the drain loop then stops and the lock is released.
func (s *Service) process(ctx context.Context, st stored) error {
	log := s.log.With("pr", st.PR.String(), "base", st.Base)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if errors.Is(err, github.ErrNotFound) {
			log.Warn("queued PR not found on GitHub; dropping it")
			return s.left(ctx, st, metrics.MergeDropped)
		}
		if err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
		v := ViewOf(p)
		if v.Open && v.HeadSHA != st.Head {
			if err := s.adoptOwnUpdate(ctx, &st, v.HeadSHA, log); err != nil {
				return s.saved(err)
			}
		}
		if st.WaitingSince.IsZero() {
			st.WaitingSince = s.d.Now()
			if err := s.q.save(ctx, &st); err != nil {
				return s.saved(err)
			}
		}
		var checks Checks
		if s.cfg.RequireChecks && v.Open && !v.Merged && v.HeadSHA == st.Head {
			if checks, err = s.checks(ctx, &st, v.HeadSHA); err != nil {
				return s.retryLater(ctx, &st, err, log)
			}
		}
		d := Decide(Input{
			PR: v, Head: st.Head, Base: st.Base, RequireChecks: s.cfg.RequireChecks, Checks: checks,
			Waited: s.d.Now().Sub(st.WaitingSince), ChecksTimeout: s.cfg.ChecksTimeout,
		})
		log.Debug("merge decision", "action", d.Action, "why", d.Why, "head", short(v.HeadSHA))
		switch d.Action {
		case ActWait:
			if err := github.DefaultSleep(ctx, s.cfg.PollInterval); err != nil {
				return err
			}
		case ActMerged:
			if st.MergingHead != "" && st.MergingHead == v.HeadSHA {
				return s.merged(ctx, st, p, p.GetMergeCommitSHA(), log)
			}
			log.Info("merged outside prloop; leaving the merge queue")
			return s.left(ctx, st, metrics.MergeMergedElsewhere)
		case ActDrop:
			log.Info("leaving the merge queue without merging", "why", d.Why)
			return s.left(ctx, st, metrics.MergeDropped)
		case ActFail:
			return s.fail(ctx, st, d.Reason, d.Why, log)
		case ActUpdate:
			if s.cfg.DryRun {
				log.Info("dry run: would update the branch, wait for its checks and merge", "why", d.Why, "update_method", s.cfg.UpdateMethod)
				return s.dryRunMerged(ctx, st, log)
			}
			done, err := s.updateBranch(ctx, &st, p, log)
			if done || err != nil {
				return err
			}
		case ActMerge:
			if s.cfg.DryRun {
				log.Info("dry run: would merge", "method", s.cfg.MergeMethod, "sha", v.HeadSHA, "title", commitTitle(p))
				return s.dryRunMerged(ctx, st, log)
			}
			done, err := s.merge(ctx, &st, p, log)
			if done || err != nil {
				return err
			}
		}
	}
}

// saved turns a failed write of the entry into process's result: an entry
// replaced by a newer approval is picked up again by the drain loop.
func (s *Service) saved(err error) error {
	if errors.Is(err, errReplaced) {
		return nil
	}
	return err
}

// adoptOwnUpdate carries the approval over to head when prloop made it from
// the approved head: a branch update whose outcome was not recorded because
// the replica stopped in between. Otherwise the head is someone else's push
// and Decide drops the stale approval.
func (s *Service) adoptOwnUpdate(ctx context.Context, st *stored, head string, log *slog.Logger) error {
	if st.UpdatingFrom == "" || st.UpdatingFrom != st.Head {
		return nil
	}
	own := st.UpdatingTo != "" && head == st.UpdatingTo
	if !own && st.UpdatingTo == "" {
		ok, err := s.madeFrom(ctx, st, head, st.UpdatingFrom)
		if err != nil {
			log.Warn("cannot tell who moved the head; treating the approval as stale", "head", short(head), "err", err)
		}
		own = ok
	}
	if !own {
		return nil
	}
	log.Info("resuming after prloop's own branch update", "from", short(st.Head), "to", short(head))
	return s.recordUpdate(ctx, st, head, log)
}

// madeFrom reports whether head is a merge of the base into from, as
// update-branch makes it: first parent from.
func (s *Service) madeFrom(ctx context.Context, st *stored, head, from string) (bool, error) {
	c, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), head)
	if err != nil {
		return false, err
	}
	ps := c.Parents
	return len(ps) == 2 && ps[0].GetSHA() == from, nil
}

// recordUpdate makes head, which prloop made from the approved head, the
// head the approval applies to, and tells the poller through the PR's state.
func (s *Service) recordUpdate(ctx context.Context, st *stored, head string, log *slog.Logger) error {
	st.Head, st.UpdatingFrom, st.UpdatingTo, st.WaitingSince = head, "", "", s.d.Now()
	if err := s.q.save(ctx, st); err != nil {
		return err
	}
	if _, err := s.d.Store.Update(ctx, st.PR, func(p *state.PR) error {
		if p.MergeUpdatedHeadSHA == head {
			return state.ErrNoChange
		}
		p.MergeUpdatedHeadSHA = head
		return nil
	}); err != nil {
		log.Warn("cannot record prloop's branch update in the PR's state", "head", short(head), "err", err)
	}
	return nil
}

// checks evaluates head's checks against those the base requires and those
// seen on the PR's earlier heads, and remembers in the entry what reported
// on this one.
func (s *Service) checks(ctx context.Context, st *stored, head string) (Checks, error) {
	repo := st.PR.RepoRef()
	rules, err := s.d.GitHub.ListBranchRules(ctx, repo, st.Base)
	if err != nil {
		return Checks{}, err
	}
	required, err := github.RequiredChecks(rules)
	if err != nil {
		return Checks{}, fmt.Errorf("required checks of %s of %s: %w", st.Base, repo, err)
	}
	combined, err := s.d.GitHub.GetCombinedStatus(ctx, repo, head)
	if err != nil {
		return Checks{}, err
	}
	runs, err := s.d.GitHub.ListCheckRuns(ctx, repo, head)
	if err != nil {
		return Checks{}, err
	}
	c := EvaluateChecks(ChecksInput{
		Required: union(required, s.cfg.requiredChecks()), Seen: st.SeenChecks, Own: StatusContext,
		Combined: combined, Runs: runs,
	})
	if seen := union(st.SeenChecks, c.Reported); len(seen) > len(st.SeenChecks) {
		st.SeenChecks = seen
		if err := s.q.save(ctx, st); err != nil {
			return Checks{}, err
		}
	}
	return c, nil
}

// updateBranch brings the head up to date with its base and makes the new
// head the one the approval applies to. A refused update is re-checked
// (the next Decide sees a conflict or a moved head) a bounded number of
// times. It reports done when processing of the entry must stop.
func (s *Service) updateBranch(ctx context.Context, st *stored, p *gh.PullRequest, log *slog.Logger) (bool, error) {
	from := st.Head
	st.UpdatingFrom, st.UpdatingTo = from, ""
	if err := s.q.save(ctx, st); err != nil {
		return true, s.saved(err)
	}
	log.Info("updating the branch with its base", "method", s.cfg.UpdateMethod, "head", short(from))
	head, err := s.update(ctx, st, p)
	switch {
	case errors.Is(err, errRebaseConflict):
		return true, s.fail(ctx, *st, events.ReasonMergeConflict, fmt.Sprintf("rebasing onto %s conflicts: %v", st.Base, err), log)
	case errors.Is(err, errStaleHead):
		return false, nil // the next look finds the head moved and drops the approval
	case isRefusal(err):
		return s.refused(ctx, st, "branch update", err, log)
	case err != nil:
		return true, s.retryLater(ctx, st, err, log)
	}
	log.Info("branch updated; waiting for the new head's checks", "from", short(from), "to", short(head))
	if err := s.recordUpdate(ctx, st, head, log); err != nil {
		return true, s.saved(err)
	}
	return false, nil
}

// merge merges the head Decide found ready. It reports done when the entry
// left the queue.
func (s *Service) merge(ctx context.Context, st *stored, p *gh.PullRequest, log *slog.Logger) (bool, error) {
	head := p.GetHead().GetSHA()
	st.MergingHead = head
	if err := s.q.save(ctx, st); err != nil {
		return true, s.saved(err)
	}
	res, err := s.d.GitHub.Merge(ctx, st.PR, github.MergeOptions{
		Method: s.cfg.MergeMethod, SHA: head, Title: commitTitle(p), Message: p.GetBody(),
	})
	if err == nil {
		return true, s.merged(ctx, *st, p, res.GetSHA(), log)
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	// Before anything else: did it merge after all (a lost answer)?
	if after, gerr := s.d.GitHub.GetPull(ctx, st.PR); gerr == nil && after.GetMerged() {
		log.Info("the merge call failed, but the PR is merged", "err", err)
		return true, s.merged(ctx, *st, after, after.GetMergeCommitSHA(), log)
	}
	if isRefusal(err) {
		st.MergingHead = "" // refused and not merged: nothing of ours to recognise later
		return s.refused(ctx, st, "merge", err, log)
	}
	return true, s.retryLater(ctx, st, err, log)
}

// refused counts a merge or update GitHub refused; the caller looks again
// after the poll interval, until PRLOOP_MERGE_RETRIES runs out. It reports
// done when the entry left the queue or changed.
func (s *Service) refused(ctx context.Context, st *stored, what string, err error, log *slog.Logger) (bool, error) {
	st.Refusals++
	st.LastError = err.Error()
	if st.Refusals > s.cfg.MergeRetries {
		return true, s.fail(ctx, *st, events.ReasonNotMergeable, fmt.Sprintf("GitHub refused the %s %d times: %v", what, st.Refusals, err), log)
	}
	log.Info("GitHub refused; re-checking the PR", "what", what, "err", err, "attempt", st.Refusals, "of", s.cfg.MergeRetries+1)
	if err := s.q.save(ctx, st); err != nil {
		return true, s.saved(err)
	}
	return false, github.DefaultSleep(ctx, s.cfg.PollInterval)
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

// merged publishes PRMerged, deletes the head branch if configured and
// removes the entry. Each step is idempotent, so a replica that resumes
// after a crash repeats them safely.
func (s *Service) merged(ctx context.Context, st stored, p *gh.PullRequest, mergeSHA string, log *slog.Logger) error {
	head := p.GetHead().GetSHA()
	if _, _, err := s.emit.Emit(ctx, &events.Merged{
		Base: events.Base{PR: st.PR, HeadSHA: head}, MergeSHA: mergeSHA, MergeMethod: s.cfg.MergeMethod, Actor: Name,
	}, head); err != nil {
		return err
	}
	log.Info("merged", "head", short(head), "merge_sha", mergeSHA, "method", s.cfg.MergeMethod)
	if s.cfg.DeleteBranch {
		s.deleteHead(ctx, st, p, log)
	}
	return s.left(ctx, st, metrics.MergeMerged)
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

// dryRunMerged publishes what a merge would have been, and leaves the queue.
func (s *Service) dryRunMerged(ctx context.Context, st stored, log *slog.Logger) error {
	if _, _, err := s.emit.Emit(ctx, &events.Merged{
		Base: events.Base{PR: st.PR, HeadSHA: st.Head}, MergeMethod: s.cfg.MergeMethod, Actor: Name, DryRun: true,
	}, "dry-run", st.Head); err != nil {
		return err
	}
	log.Info("dry run: published what the merge would be; nothing changed on GitHub")
	return s.left(ctx, st, metrics.MergeDryRun)
}

// fail gives up on the entry: it asks for a human (reason and why) and
// publishes PRMergeFailed. A dry run only publishes PRMergeFailed.
func (s *Service) fail(ctx context.Context, st stored, reason events.Reason, why string, log *slog.Logger) error {
	b := events.Base{PR: st.PR, HeadSHA: st.Head}
	if !s.cfg.DryRun {
		if _, _, err := s.emit.Emit(ctx, &events.EscalationRequested{
			Base: b, Reason: reason, Severity: events.SeverityBlocking, Detail: why, LastError: st.LastError, Actor: Name,
		}, string(reason), st.Head); err != nil {
			return err
		}
	}
	if _, _, err := s.emit.Emit(ctx, &events.MergeFailed{Base: b, Reason: reason, Detail: why, DryRun: s.cfg.DryRun},
		string(reason), st.Head); err != nil {
		return err
	}
	log.Warn("merge failed; a human is needed", "reason", reason, "why", why, "dry_run", s.cfg.DryRun)
	return s.left(ctx, st, metrics.MergeFailed)
}

// left removes the entry from its queue and counts how it left: once per
// entry, since a resumed entry that already left is no longer listed.
func (s *Service) left(ctx context.Context, st stored, result string) error {
	if err := s.q.remove(ctx, st); err != nil {
		return err
	}
	s.d.Metrics.Result(result)
	return nil
}

// retryLater records a transient error and delays the entry (and with it
// its queue, first come first served) with exponential backoff; after
// maxFailures the merger gives up.
func (s *Service) retryLater(ctx context.Context, st *stored, cause error, log *slog.Logger) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st.Failures++
	st.LastError = cause.Error()
	if st.Failures >= maxFailures {
		return s.fail(ctx, *st, events.ReasonNotMergeable, fmt.Sprintf("gave up after %d errors: %v", st.Failures, cause), log)
	}
	delay := min(s.cfg.PollInterval<<(st.Failures-1), 5*time.Minute)
	st.NotBefore = s.d.Now().Add(delay)
	log.Warn("merge step failed; will retry", "err", cause, "failures", st.Failures, "retry_in", delay)
	return s.saved(s.q.save(ctx, st))
}
