package merger

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

// conflicted takes the entry st out of its queue because its head
// conflicts with its base; baseSHA is the base tip it conflicts with (as
// GitHub or the merger's own rebase showed it; "" when unknown) and why
// says how the conflict showed, for people. Every path of the merger that
// finds a conflict (Decide's merge_conflict, a refused update-branch, a
// local rebase, a speculative candidate) calls it, and nothing else.
//
// With PRLOOP_RESOLVE_CONFLICTS off (or in a dry run) it is fail with
// reason merge_conflict: a human is asked. With it on, it publishes PRMergeFailed
// (merge_conflict, saying the agent was asked) and the command
// PRConflictResolveRequested for the feedback service, and asks no human:
// the feedback service escalates merge_conflict itself when the agent does
// not resolve it. The event ids carry the head, the base tip and the
// entry's approval sequence, so a retry of this call repeats them, and a
// new conflict (a new base tip, a new approval) is news.
func (s *Service) conflicted(ctx context.Context, st stored, baseSHA, why string, log *slog.Logger) error {
	if !s.cfg.ResolveConflicts || s.cfg.DryRun {
		// A dry run pushes nothing, so nothing is handed to the agent
		// (Validate refuses the pair; a Config built in code may not).
		return s.fail(ctx, st, events.ReasonMergeConflict, why, log)
	}
	b := events.Base{PR: st.PR, HeadSHA: st.Head}
	parts := []string{ghref.EventSHA(st.Head), ghref.EventSHA(baseSHA), strconv.FormatUint(st.Seq, 10)}
	// The command first: a crash before PRMergeFailed publishes both again
	// (the command's id drops the repeat), and the PR never leaves the
	// queue without the agent being asked.
	if _, _, err := s.emit.Emit(ctx, &events.ConflictResolveRequested{
		Base: b, BaseBranch: st.Base, BaseSHA: baseSHA, Detail: why, Epoch: st.Epoch, FixCycle: st.FixCycle,
	}, parts...); err != nil {
		return err
	}
	detail := fmt.Sprintf("%s; the coding agent was asked to resolve the conflict (PRLOOP_RESOLVE_CONFLICTS)", why)
	if _, _, err := s.emit.Emit(ctx, &events.MergeFailed{Base: b, Reason: events.ReasonMergeConflict, Detail: detail},
		append([]string{string(events.ReasonMergeConflict)}, parts...)...); err != nil {
		return err
	}
	log.Info("merge conflict handed to the coding agent", "why", why, "base_sha", ghref.ShortSHA(baseSHA))
	return s.left(ctx, st, metrics.MergeFailed)
}
