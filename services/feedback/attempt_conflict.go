// The executor's part of conflict resolution (and of a failed candidate's
// merge of the base): it brings the base into the mirror, merges it in the
// worktree and checks the agent's resolution with checkResolution
// (plan_conflict.go), through conflictGit (git_conflict.go).

package feedback

import (
	"context"
	"fmt"
	"strings"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// conflictGit returns the attempt's git for conflict resolution.
func (a *attempt) conflictGit() (conflictGit, error) {
	g, ok := a.git.(conflictGit)
	if !ok {
		return nil, fmt.Errorf("resolve the conflict of %s: %T cannot merge", a.req.PR, a.git)
	}
	return g, nil
}

// failReason is the reason an attempt escalates with when the agent's
// work fails: merge_conflict for a conflict, feedback_failed otherwise.
func (a *attempt) failReason() events.Reason {
	if a.req.Conflict != nil {
		return events.ReasonMergeConflict
	}
	return events.ReasonFeedbackFailed
}

// conflictBase brings the base branch into the mirror and fixes the base
// tip the attempt merges (a conflict's, or a failed candidate's base): the
// one recorded by an interrupted attempt, or the branch's tip now (it may
// be newer than the merger's: what matters is the base as it is).
func (a *attempt) conflictBase(ctx context.Context) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	branch := a.req.baseBranch()
	if got := a.pull.GetBase().GetRef(); got != branch {
		return fmt.Errorf("%w: %s's base is %q now, not %q", ErrUnusable, a.req.PR, got, branch)
	}
	wt := a.wt
	if u := a.pull.GetBase().GetRepo().GetCloneURL(); u != "" {
		wt.Remote = u // a fork's base is in the base repository
	}
	if err := checkRemote(wt.Remote); err != nil {
		return err
	}
	tip, err := g.SyncBase(ctx, wt, branch)
	if err != nil {
		return err
	}
	if a.rec.ConflictBase == "" || !a.git.HasCommit(ctx, a.wt, a.rec.ConflictBase) {
		a.rec.ConflictBase = tip
	}
	return nil
}

// conflictPrompt renders the conflict task from what the mirror says:
// the files in conflict and the two sides' commit messages, cleaned and
// bounded like every text of strangers the prompt carries.
func (a *attempt) conflictPrompt(ctx context.Context) (string, error) {
	g, err := a.conflictGit()
	if err != nil {
		return "", err
	}
	head, base := a.req.HeadSHA, a.rec.ConflictBase
	files, err := g.Conflicts(ctx, a.wt, head, base)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("%w: %s into %s", errCleanMerge, ghref.ShortSHA(base), ghref.ShortSHA(head))
	}
	ours, oursMore, err := g.Messages(ctx, a.wt, base, head, conflictMaxCommits)
	if err != nil {
		return "", err
	}
	theirs, theirsMore, err := g.Messages(ctx, a.wt, head, base, conflictMaxCommits)
	if err != nil {
		return "", err
	}
	data := conflictPromptData{
		URL: a.pull.GetHTMLURL(), Ref: a.req.PR.String(), Title: SanitizeLine(a.pull.GetTitle()), Branch: SanitizeLine(a.wt.Branch),
		HeadSHA: head, BaseBranch: SanitizeLine(a.req.Conflict.BaseBranch), BaseSHA: base,
		Files: bounded(files[:min(len(files), conflictMaxFiles)]), Ours: ours, OursMore: oursMore, Theirs: theirs, TheirsMore: theirsMore,
	}
	if data.URL == "" {
		data.URL = a.req.PR.URL
	}
	a.log.Info("conflict task prepared", "base_sha", ghref.EventSHA(base), "files", len(files), "ours", len(ours), "theirs", len(theirs))
	var b strings.Builder
	if err := conflictTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render the conflict prompt for %s: %w", a.req.PR, err)
	}
	return b.String(), nil
}

// prepareRun puts the worktree in the state the agent starts from: for a
// conflict, the head with the base tip merged in by prloop's git,
// conflict markers and all (a reset first discards an earlier run's
// work); for a change request, as it is.
func (a *attempt) prepareRun(ctx context.Context) error {
	if a.req.candidate() != nil {
		return a.mergeBase(ctx)
	}
	if a.req.Conflict == nil {
		return nil
	}
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	if err := a.git.Reset(ctx, a.wt, a.req.HeadSHA); err != nil {
		return err
	}
	return g.StartMerge(ctx, a.wt, a.rec.ConflictBase)
}

// mergeBase puts the worktree at prloop's merge of the base tip into the
// head, for a fix of a failed candidate: the agent starts on top of the
// current base, and what it adds is checked from that merge. A base that
// conflicts with the head is not for the agent to fix here.
func (a *attempt) mergeBase(ctx context.Context) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	if err := a.git.Reset(ctx, a.wt, a.req.HeadSHA); err != nil {
		return err
	}
	base := a.rec.ConflictBase
	files, err := g.Conflicts(ctx, a.wt, a.req.HeadSHA, base)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return fmt.Errorf("%w: %s conflicts with %s at %s in %s", ErrUnusable, a.req.PR,
			SanitizeLine(a.req.baseBranch()), ghref.ShortSHA(base), strings.Join(bounded(files), ", "))
	}
	if err := g.StartMerge(ctx, a.wt, base); err != nil {
		return err
	}
	if err := g.CommitAll(ctx, a.wt, fmt.Sprintf("merge %s into #%d", SanitizeLine(a.req.baseBranch()), a.req.PR.Number)); err != nil {
		return err
	}
	if a.rec.BaseMerge, err = g.Head(ctx, a.wt); err != nil {
		return err
	}
	a.log.Info("merged the base into the head before the agent runs", "base_sha", ghref.EventSHA(base), "merge", ghref.EventSHA(a.rec.BaseMerge))
	return nil
}

// checkConflictResult checks, in the mirror, the agent's resolution
// target of the conflict between the head and the base tip.
func (a *attempt) checkConflictResult(ctx context.Context, target string) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	r, err := g.Resolution(ctx, a.wt, a.req.HeadSHA, a.rec.ConflictBase, target)
	if err != nil {
		return err
	}
	r.ForbidWorkflows = a.lim.ForbidWorkflows
	return checkResolution(r)
}
