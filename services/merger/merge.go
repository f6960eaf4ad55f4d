package merger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

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
// Every pass re-reads the PR and re-verifies its approval on GitHub, so an
// approval withdrawn while the entry waits (for checks, or behind others)
// makes it leave, and the merge call follows a verification in the same
// pass.
func (s *Service) process(ctx context.Context, st stored) error {
	log := s.log.With("pr", st.PR.String(), "base", st.Base)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := s.d.GitHub.GetPull(ctx, st.PR)
		if err != nil {
			// Not found included: a glitchy read is re-checked, and only
			// maxFailures of them in a row give up (and escalate).
			return s.retryLater(ctx, &st, err, log)
		}
		v := ViewOf(p)
		live := v.Open && !v.Merged
		if live && st.UpdatingFrom != "" {
			if err := s.adoptOwnUpdate(ctx, &st, p, log); err != nil {
				return s.stepFailed(ctx, &st, err, log)
			}
		}
		if live && v.HeadSHA != st.Head {
			if err := s.adoptApprovedHead(ctx, &st, v.HeadSHA, p.GetUser().GetLogin(), log); err != nil {
				return s.stepFailed(ctx, &st, err, log)
			}
		}
		if err := s.announceUpdate(ctx, &st); err != nil {
			return s.stepFailed(ctx, &st, err, log)
		}
		if st.WaitingSince.IsZero() {
			st.WaitingSince = s.d.Now()
			if err := s.q.save(ctx, &st); err != nil {
				return s.saved(err)
			}
		}
		var checks Checks
		var reports ChecksInput // what checks judged: mayLand judges it again
		if s.cfg.RequireChecks && live && v.HeadSHA == st.Head {
			if reports, checks, err = s.checks(ctx, &st, v.HeadSHA); err != nil {
				return s.retryLater(ctx, &st, err, log)
			}
			if err := s.announceWaiting(ctx, &st, checks); err != nil {
				return s.saved(err)
			}
		}
		var approval ApprovalCheck
		var head headVsBase
		if live && v.HeadSHA == st.Head {
			approval, err = s.verify(ctx, st.PR, st.approvalOf(p), log)
			if err != nil {
				return s.retryLater(ctx, &st, err, log)
			}
			// Last before deciding, so that a merge follows it closely.
			if head, err = s.compareWithBase(ctx, st, v.HeadSHA); err != nil {
				return s.retryLater(ctx, &st, err, log)
			}
		}
		d := Decide(Input{
			PR: v, Head: st.Head, Approval: approval, Behind: head.behind, RequireChecks: s.cfg.RequireChecks, Checks: checks,
			Waited: s.d.Now().Sub(st.WaitingSince), ChecksTimeout: s.cfg.ChecksTimeout,
		})
		log.Debug("merge decision", "action", d.Action, "why", d.Why, "head", ghref.ShortSHA(v.HeadSHA))
		switch d.Action {
		case ActWait:
			// The pass went through: earlier errors are not in a row.
			if err := s.recovered(ctx, &st); err != nil {
				return s.saved(err)
			}
			if err := ctxtime.Sleep(ctx, s.cfg.PollInterval); err != nil {
				return err
			}
		case ActMerged:
			if st.MergingHead != "" && st.MergingHead == v.HeadSHA {
				return s.landed(ctx, st, p, p.GetMergeCommitSHA(), "", log)
			}
			log.Info("merged outside prloop; leaving the merge queue")
			return s.left(ctx, st, metrics.MergeMergedElsewhere)
		case ActDrop:
			return s.drop(ctx, st, d.Reason, d.Why, log)
		case ActFail:
			if d.Reason == events.ReasonMergeConflict {
				return s.conflicted(ctx, st, p.GetBase().GetSHA(), d.Why, log)
			}
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
			l := landing{
				Head: v.HeadSHA, Approved: st.Head, Base: v.BaseRef, ApprovedBase: st.Base, Approval: approval,
				Tested: v.HeadSHA, TestedHead: v.HeadSHA, BuiltOn: head.mergeBase,
				RequireChecks: s.cfg.RequireChecks, Required: reports.Required, Seen: reports.Seen, Reports: reports,
			}
			done, err := s.merge(ctx, &st, p, l, head.tree, log)
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

// stepFailed turns the error of a step that reads GitHub or git and writes
// the entry into process's result: a replaced entry is picked up again,
// anything else is retried later.
func (s *Service) stepFailed(ctx context.Context, st *stored, err error, log *slog.Logger) error {
	if errors.Is(err, errReplaced) {
		return nil
	}
	return s.retryLater(ctx, st, err, log)
}

// adoptOwnUpdate settles a branch update prloop started but did not see
// through (the replica stopped in between): the new head carries the
// approval only when madeFrom proves it is prloop's own update of the
// approved head. Whatever the outcome, the record of the pending update
// is cleared, so that it cannot vouch for a later push.
func (s *Service) adoptOwnUpdate(ctx context.Context, st *stored, p *gh.PullRequest, log *slog.Logger) error {
	head := p.GetHead().GetSHA()
	if st.UpdatingFrom == st.Head && head != st.Head {
		own, err := s.madeFrom(ctx, st, p, head, st.UpdatingFrom)
		if err != nil {
			return err
		}
		if own {
			log.Info("resuming after prloop's own branch update", "from", ghref.ShortSHA(st.Head), "to", ghref.ShortSHA(head))
			return s.recordUpdate(ctx, st, head)
		}
		log.Warn("the head moved during prloop's branch update, but not to the head prloop would have made; the approval does not carry over",
			"from", ghref.ShortSHA(st.Head), "to", ghref.ShortSHA(head))
	}
	st.UpdatingFrom, st.UpdatingTo = "", ""
	return s.q.save(ctx, st)
}

// adoptApprovedHead handles a head that moved to one prloop did not make:
// when GitHub shows that head approved in its own right, the entry goes on
// with it rather than leaving and waiting for the poller to say so again;
// otherwise Decide drops the stale approval. Nothing says when that head
// was first seen, so only a native review of it can show that (no
// reaction or comment counts); a head approved otherwise comes back with
// the poller's PRReviewApproved and its anchor.
func (s *Service) adoptApprovedHead(ctx context.Context, st *stored, head, author string, log *slog.Logger) error {
	check, err := s.verify(ctx, st.PR, ApprovalInput{ApprovedHead: head, Head: head, Author: author, BaseSince: st.BaseSince}, log)
	if err != nil || !check.Approved {
		return err
	}
	log.Info("the head moved to one approved in its own right; going on with it", "from", ghref.ShortSHA(st.Head), "to", ghref.ShortSHA(head), "approvers", check.Approvers)
	st.ApprovedHead, st.Head, st.Anchor, st.Approvers = head, head, time.Time{}, check.Approvers
	st.WaitingSince, st.MergingHead, st.Refusals = s.d.Now(), "", 0
	return s.q.save(ctx, st)
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
		return st.UpdatingTo != "" && head == st.UpdatingTo, nil
	}
	g, done, err := s.fetch(ctx, st, p)
	if err != nil {
		return false, err
	}
	defer done()
	return g.isMergeOf(ctx, head, from)
}

// recordUpdate makes head, which prloop made from the approved head, the
// head the approval applies to, and tells the poller with PRBranchUpdated.
func (s *Service) recordUpdate(ctx context.Context, st *stored, head string) error {
	st.Head, st.UpdatingFrom, st.UpdatingTo, st.WaitingSince = head, "", "", s.d.Now()
	if err := s.q.save(ctx, st); err != nil {
		return err
	}
	return s.announceUpdate(ctx, st)
}

// announceUpdate publishes PRBranchUpdated for the entry's head when
// prloop made it and has not said so yet, and records that it has. The
// entry holds the head before the event says so (recordUpdate), so a
// publish lost to an error or a crash is made on the next pass, with the
// same id (the head and the entry's approval), which JetStream drops if
// the first one got through after all.
func (s *Service) announceUpdate(ctx context.Context, st *stored) error {
	if st.Head == st.ApprovedHead || st.UpdateAnnounced == st.Head {
		return nil
	}
	method := "update-branch"
	if s.cfg.UpdateMethod == UpdateRebase {
		method = "rebase"
	}
	if _, _, err := s.emit.Emit(ctx, &events.BranchUpdated{
		Base: events.Base{PR: st.PR, HeadSHA: st.Head}, PreviousHeadSHA: st.ApprovedHead, Method: method,
	}, ghref.EventSHA(st.Head), strconv.FormatUint(st.Seq, 10)); err != nil {
		return err
	}
	st.UpdateAnnounced = st.Head
	return s.q.save(ctx, st)
}

// checks evaluates head's checks against those the base requires and those
// seen on the PR's earlier heads, and remembers in the entry what reported
// on this one. It returns what it judged, with what was expected of the
// head (Required, Seen), and the verdict.
func (s *Service) checks(ctx context.Context, st *stored, head string) (ChecksInput, Checks, error) {
	repo := st.PR.RepoRef()
	required, err := s.requiredChecks(ctx, repo, st.Base)
	if err != nil {
		return ChecksInput{}, Checks{}, err
	}
	in, err := s.readChecks(ctx, repo, head)
	if err != nil {
		return ChecksInput{}, Checks{}, err
	}
	in.Required, in.Seen = required, st.SeenChecks
	c := EvaluateChecks(in)
	if seen := union(st.SeenChecks, c.Reported); len(seen) > len(st.SeenChecks) {
		st.SeenChecks = seen
		if err := s.q.save(ctx, st); err != nil {
			return ChecksInput{}, Checks{}, err
		}
	}
	return in, c, nil
}

// requiredChecks returns the checks base requires: its branch rules' and
// PRLOOP_REQUIRED_CHECKS.
func (s *Service) requiredChecks(ctx context.Context, repo ghref.Repo, base string) ([]string, error) {
	rules, err := s.d.GitHub.ListBranchRules(ctx, repo, base)
	if err != nil {
		return nil, err
	}
	required, err := github.RequiredChecks(rules)
	if err != nil {
		return nil, fmt.Errorf("required checks of %s of %s: %w", base, repo, err)
	}
	extra, err := s.policyChecks(ctx, repo, base)
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

// announceWaiting publishes PRMergeWaiting with the checks the head waits
// for whenever that set changed since the entry last said so for this head,
// and an empty list once none is left (nothing when there never was one).
// The event id is the head, the entry's count of announcements and the
// names: a publish retried after a crash before the entry was saved is the
// same event, dropped as a duplicate, while a set that comes back (a check
// re-run) is a new one.
func (s *Service) announceWaiting(ctx context.Context, st *stored, c Checks) error {
	said := st.WaitingHead == st.Head
	if (!said && len(c.Waiting) == 0) || (said && slices.Equal(c.Waiting, st.WaitingFor)) {
		return nil
	}
	n := strconv.Itoa(st.Announced + 1)
	sum := sha256.Sum256([]byte(strings.Join(c.Waiting, "\n")))
	if _, _, err := s.emit.Emit(ctx, &events.MergeWaiting{
		Base: events.Base{PR: st.PR, HeadSHA: st.Head}, BaseBranch: st.Base, Checks: slices.Clone(c.Waiting),
	}, st.Head, n, hex.EncodeToString(sum[:8])); err != nil {
		return err
	}
	st.Announced++
	st.WaitingHead, st.WaitingFor = st.Head, slices.Clone(c.Waiting)
	return s.q.save(ctx, st)
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
	log.Info("updating the branch with its base", "method", s.cfg.UpdateMethod, "head", ghref.ShortSHA(from))
	head, err := s.update(ctx, st, p)
	if err != nil {
		// Whatever went wrong, the pending update must not vouch for a
		// head that shows up later: only a head verified now carries over.
		st.UpdatingFrom, st.UpdatingTo = "", ""
	}
	switch {
	case errors.Is(err, errRebaseConflict):
		return true, s.conflicted(ctx, *st, p.GetBase().GetSHA(), fmt.Sprintf("rebasing onto %s conflicts: %v", st.Base, err), log)
	case errors.Is(err, errStaleHead):
		// The next look finds the head moved and drops the approval.
		if err := s.q.save(ctx, st); err != nil {
			return true, s.saved(err)
		}
		return false, nil
	case isRefusal(err):
		return s.refused(ctx, st, "branch update", err, log)
	case err != nil:
		return true, s.retryLater(ctx, st, err, log)
	}
	log.Info("branch updated; waiting for the new head's checks", "from", ghref.ShortSHA(from), "to", ghref.ShortSHA(head))
	if err := s.recordUpdate(ctx, st, head); err != nil {
		return true, s.saved(err)
	}
	return false, nil
}

// merge merges the head Decide found ready, whose tree is tree, when
// mayLand lets it: l is the landing as the pass read it, and merge reads
// the base tip last, right before the merge call. It reports done when the
// entry left the queue.
func (s *Service) merge(ctx context.Context, st *stored, p *gh.PullRequest, l landing, tree string, log *slog.Logger) (bool, error) {
	head := p.GetHead().GetSHA()
	tip, err := s.d.GitHub.GetCommit(ctx, st.PR.RepoRef(), st.Base)
	if err != nil {
		return true, s.retryLater(ctx, st, err, log)
	}
	l.Tip = tip.GetSHA()
	if v := mayLand(l); !v.ok() {
		return s.withheld(ctx, st, v, log)
	}
	ms, err := s.mergeSettingsOf(ctx, st.PR, st.Base, l.Tip, head, l.Approval.Approvers)
	if err != nil {
		return true, s.retryLater(ctx, st, err, log)
	}
	if ms.Hold != "" {
		return s.policyHeld(ctx, st, ms.Hold, log)
	}
	s.pol.used.Store(st.PR.String(), ms)
	st.MergingHead = head
	if err := s.q.save(ctx, st); err != nil {
		return true, s.saved(err)
	}
	res, err := s.d.GitHub.Merge(ctx, st.PR, github.MergeOptions{
		Method: ms.Method, SHA: head, Title: commitTitle(p), Message: p.GetBody(),
	})
	if err == nil {
		return true, s.landed(ctx, *st, p, res.GetSHA(), tree, log)
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	// Before anything else: did it merge after all (a lost answer)?
	if after, gerr := s.d.GitHub.GetPull(ctx, st.PR); gerr == nil && after.GetMerged() {
		log.Info("the merge call failed, but the PR is merged", "err", err)
		return true, s.landed(ctx, *st, after, after.GetMergeCommitSHA(), tree, log)
	}
	if isRefusal(err) {
		st.MergingHead = "" // refused and not merged: nothing of ours to recognise later
		return s.refused(ctx, st, "merge", err, log)
	}
	return true, s.retryLater(ctx, st, err, log)
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

// landed finishes a merge prloop made of the entry's MergingHead: main's
// tree after it must be that head's (tested; "" reads it), the tree its
// checks ran on (the head held the base tip when the merge was decided).
// When it is not, the base moved between the decision and the merge: the
// change landed, but not as tested, and a human is called
// (untested_merge). Either way the PR merged (PRMerged) and leaves the
// queue.
func (s *Service) landed(ctx context.Context, st stored, p *gh.PullRequest, mergeSHA, tested string, log *slog.Logger) error {
	head := st.MergingHead
	merged, err := s.treeOf(ctx, st, mergeSHA)
	if err != nil {
		return s.retryLater(ctx, &st, err, log)
	}
	if tested == "" {
		if tested, err = s.treeOf(ctx, st, head); err != nil {
			return s.retryLater(ctx, &st, err, log)
		}
	}
	if merged != tested {
		why := fmt.Sprintf("merged %s as %s, whose tree %s is not the tree %s its checks ran on: the base branch %s moved before the merge, and main may hold an untested combination",
			ghref.ShortSHA(head), ghref.ShortSHA(mergeSHA), ghref.ShortSHA(merged), ghref.ShortSHA(tested), st.Base)
		log.Error("merged tree differs from the tested head's", "merge_sha", mergeSHA, "tree", merged, "want_tree", tested)
		if _, _, err := s.emit.Emit(ctx, &events.EscalationRequested{
			Base: events.Base{PR: st.PR, HeadSHA: head}, Reason: events.ReasonUntestedMerge, Severity: events.SeverityBlocking,
			Detail: why, Actor: Name, Epoch: st.Epoch,
		}, string(events.ReasonUntestedMerge), mergeSHA); err != nil {
			return err
		}
	}
	return s.merged(ctx, st, p, mergeSHA, log)
}

// treeOf returns the tree of commit sha in the entry's repository.
func (s *Service) treeOf(ctx context.Context, st stored, sha string) (string, error) {
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

// refused counts a merge or update GitHub refused; the caller looks again
// after the poll interval, until PRLOOP_MERGE_RETRIES runs out. It reports
// done when the entry left the queue or changed.
func (s *Service) refused(ctx context.Context, st *stored, what string, err error, log *slog.Logger) (bool, error) {
	return s.refusedBy(ctx, st, "GitHub", what, err, log)
}

// withheld handles a merge mayLand refused right before the merge call. A
// withdrawn approval, or one for another base, makes the entry leave, as
// Decide would have; anything
// else (the base tip moved since it was compared, the PR changed since it
// was read) is counted like a merge GitHub refused and looked at again
// after the poll interval, when the next pass decides what to do next
// (update, wait, rebuild). It reports done when the entry left the queue
// or changed.
func (s *Service) withheld(ctx context.Context, st *stored, v landVerdict, log *slog.Logger) (bool, error) {
	if v.Refusal == refusedApproval || v.Refusal == refusedBase {
		return true, s.drop(ctx, *st, v.Reason, v.Why, log)
	}
	return s.refusedBy(ctx, st, "prloop's merge rule", "merge", fmt.Errorf("%s: %s", v.Refusal, v.Why), log)
}

// refusedBy is refused by who (GitHub, or prloop's own rule).
func (s *Service) refusedBy(ctx context.Context, st *stored, who, what string, err error, log *slog.Logger) (bool, error) {
	st.Refusals++
	st.LastError = err.Error()
	if st.Refusals > s.cfg.MergeRetries {
		return true, s.fail(ctx, *st, events.ReasonNotMergeable, fmt.Sprintf("%s refused the %s %d times: %v", who, what, st.Refusals, err), log)
	}
	log.Info(who+" refused; re-checking the PR", "what", what, "err", err, "attempt", st.Refusals, "of", s.cfg.MergeRetries+1)
	if err := s.q.save(ctx, st); err != nil {
		return true, s.saved(err)
	}
	return false, ctxtime.Sleep(ctx, s.cfg.PollInterval)
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
	ms := s.usedSettings(st.PR)
	if _, _, err := s.emit.Emit(ctx, &events.Merged{
		Base: events.Base{PR: st.PR, HeadSHA: head}, MergeSHA: mergeSHA, MergeMethod: ms.Method, Actor: Name,
	}, head); err != nil {
		return err
	}
	log.Info("merged", "head", ghref.ShortSHA(head), "merge_sha", mergeSHA, "method", ms.Method)
	if ms.DeleteBranch {
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
// publishes PRMergeFailed. A dry run only publishes PRMergeFailed. Both ids
// carry the entry's approval sequence: a retry of this entry repeats them,
// while the same failure of the same head after a human removed the label
// (which publishes the approval anew and so queues a new entry) is news.
func (s *Service) fail(ctx context.Context, st stored, reason events.Reason, why string, log *slog.Logger) error {
	b := events.Base{PR: st.PR, HeadSHA: st.Head}
	seq := strconv.FormatUint(st.Seq, 10)
	if !s.cfg.DryRun {
		if _, _, err := s.emit.Emit(ctx, &events.EscalationRequested{
			Base: b, Reason: reason, Severity: events.SeverityBlocking, Detail: why, LastError: st.LastError, Actor: Name,
			Epoch: st.Epoch,
		}, string(reason), st.Head, seq); err != nil {
			return err
		}
	}
	if _, _, err := s.emit.Emit(ctx, &events.MergeFailed{Base: b, Reason: reason, Detail: why, DryRun: s.cfg.DryRun},
		string(reason), st.Head, seq); err != nil {
		return err
	}
	log.Warn("merge failed; a human is needed", "reason", reason, "why", why, "dry_run", s.cfg.DryRun)
	return s.left(ctx, st, metrics.MergeFailed)
}

// drop takes the entry out of its queue without merging and without
// asking for a human, and says so with PRMergeFailed: no exit from a queue
// is silent. On a withdrawn approval (reason approval_withdrawn) the
// poller announces the PR's status again, so that an approval given back
// queues it again.
func (s *Service) drop(ctx context.Context, st stored, reason events.Reason, why string, log *slog.Logger) error {
	if _, _, err := s.emit.Emit(ctx, &events.MergeFailed{
		Base: events.Base{PR: st.PR, HeadSHA: st.Head}, Reason: reason, Detail: why, DryRun: s.cfg.DryRun,
	}, string(reason), st.Head, strconv.FormatUint(st.Seq, 10)); err != nil {
		return err
	}
	log.Info("left the merge queue without merging", "reason", reason, "why", why)
	return s.left(ctx, st, metrics.MergeDropped)
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

// retryLater records a transient error about the entry and delays it (and
// with it its queue, first come first served) with exponential backoff;
// after maxFailures in a row the merger gives up (backoff).
func (s *Service) retryLater(ctx context.Context, st *stored, cause error, log *slog.Logger) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st.LastError = cause.Error()
	var delay time.Duration
	var giveUp bool
	st.Failures, delay, giveUp = backoff(st.Failures, s.cfg.PollInterval)
	if giveUp {
		return s.fail(ctx, *st, events.ReasonNotMergeable, fmt.Sprintf("gave up after %d errors in a row: %v", st.Failures, cause), log)
	}
	st.NotBefore = s.d.Now().Add(delay)
	log.Warn("merge step failed; will retry", "err", cause, "failures", st.Failures, "retry_in", delay)
	return s.saved(s.q.save(ctx, st))
}

// backoff is what one more transient error does to an entry that had
// failures in a row before it: the new count, and the wait before the
// next attempt (the poll interval, doubling with each error, at most five
// minutes), or that the merger gives up, at maxFailures. A pass that goes
// through resets the count (recovered), so that errors far apart, each
// followed by an answer, never add up. It is pure.
func backoff(failures int, poll time.Duration) (int, time.Duration, bool) {
	n := failures + 1
	if n >= maxFailures {
		return n, 0, true
	}
	return n, min(poll<<(n-1), 5*time.Minute), false
}

// recovered resets the entry's count of errors in a row once a pass over
// it went through (it read GitHub and could wait or act); it writes the
// entry only when there was a count.
func (s *Service) recovered(ctx context.Context, st *stored) error {
	if st.Failures == 0 {
		return nil
	}
	st.Failures = 0
	return s.q.save(ctx, st)
}
