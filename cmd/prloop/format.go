package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// describe renders what an event says, in a few words, for one line.
func describe(d events.Data) string {
	short := ghref.ShortSHA
	switch d := d.(type) {
	case *events.CreateRequested:
		return "open requested: " + d.Branch + " → " + d.BaseBranch + when(d.BaseBranch == "", "the default branch") + when(d.Actor != "", " by "+d.Actor)
	case *events.Created:
		verb := "opened"
		if d.Existing {
			verb = "found open"
		}
		return fmt.Sprintf("%s by prloop: %s → %s at %s", verb, d.Branch, d.BaseBranch, short(d.HeadSHA))
	case *events.WatchRequested:
		return "watch requested" + when(d.Actor != "", " by "+d.Actor)
	case *events.ReviewPending:
		return "waiting for review on " + short(d.HeadSHA) + when(len(d.MissingReviewers) > 0, "; "+prstatus.QuorumProgress(nil, d.MissingReviewers))
	case *events.ReviewInProgress:
		if len(d.MissingReviewers) > 0 {
			return prstatus.QuorumProgress(d.QuorumResponded, d.MissingReviewers) + " (on " + short(d.HeadSHA) + ")" + prstatus.SetAside(len(d.IgnoredFindings))
		}
		return "👀 " + d.Actor + " is reviewing " + short(d.HeadSHA)
	case *events.FeedbackReceived:
		return fmt.Sprintf("changes requested on %s: %d comment(s), %d review(s) by %s%s",
			short(d.HeadSHA), len(d.CommentIDs), len(d.ReviewIDs), strings.Join(d.Reviewers, ", "), prstatus.SetAside(len(d.IgnoredFindings)))
	case *events.FeedbackAddressed:
		return fmt.Sprintf("fix pushed: %s → %s (fix cycle %d)", short(d.PreviousHeadSHA), short(d.HeadSHA), d.FixCycle) + agentText(d.Agent)
	case *events.ChecksFailed:
		return fmt.Sprintf("checks failed on %s (round %d): %s", short(d.HeadSHA), d.Round, strings.Join(prstatus.CheckNames(d.Checks), ", "))
	case *events.FeedbackSkipped:
		return "no fix needed on " + short(d.HeadSHA) + when(d.Detail != "", ": "+d.Detail)
	case *events.AgentWaiting:
		if d.State == events.AgentWaitStarted {
			return d.Text() + " (" + d.ResumeAt.UTC().Format("2006-01-02 15:04") + " UTC)"
		}
		return d.Text()
	case *events.ReviewApproved:
		return "👍 approved " + short(d.HeadSHA) + when(len(d.Approvers) > 0, " by "+strings.Join(d.Approvers, ", ")) + prstatus.SetAside(len(d.IgnoredFindings))
	case *events.ReviewTimeout:
		return "no approval in time" + when(len(d.MissingReviewers) > 0, "; missing "+strings.Join(d.MissingReviewers, ", "))
	case *events.MergeQueued:
		text := fmt.Sprintf("queued for merge into %s at position %d", d.BaseBranch, d.Position) + when(d.Priority, " (priority)")
		if d.Mode == prstatus.Speculative {
			text += when(len(d.Ahead) > 0, ", tested together with "+prstatus.Numbers(d.Ahead)) + " (speculative)"
		}
		if e := d.ETA; e != nil && e.Known {
			// An unknown estimate is left out here: the status line says it.
			text += "; merges in " + eta.Approx(time.Duration(e.Seconds*float64(time.Second)))
		}
		return text
	case *events.MergeWaiting:
		if len(d.Checks) == 0 {
			return "no check left to wait for"
		}
		return "waiting for checks: " + strings.Join(d.Checks, ", ")
	case *events.MergeCandidate:
		// Branch and detail are cleaned as the status line cleans them:
		// this goes to a terminal.
		if d.State != events.CandidateBuilt {
			return fmt.Sprintf("candidate %d %s: %s", d.Position, events.CleanTitle(d.State), short(d.Candidate)) + when(d.Detail != "", " ("+events.CleanTitle(d.Detail)+")")
		}
		return fmt.Sprintf("candidate %d built: %s on %s, from %s at %s", d.Position, short(d.Candidate), events.CleanTitle(d.Branch), d.BaseBranch, short(d.BaseSHA)) +
			when(len(d.Ahead) > 0, " with "+prstatus.Numbers(d.Ahead)+" ahead")
	case *events.ConflictResolveRequested:
		return fmt.Sprintf("conflicts with %s at %s: the agent is asked to resolve it", events.CleanTitle(d.BaseBranch), short(d.BaseSHA)) + when(d.Detail != "", " ("+events.CleanTitle(d.Detail)+")")
	case *events.Merged:
		if d.DryRun {
			return "would merge " + short(d.HeadSHA) + " (dry run)"
		}
		return fmt.Sprintf("merged as %s (%s)", short(d.MergeSHA), d.MergeMethod)
	case *events.MergeFailed:
		return fmt.Sprintf("merge failed: %s %s", d.Reason, d.Detail)
	case *events.Closed:
		return "closed" + when(d.Merged, " (merged outside prloop)")
	case *events.CommandReceived:
		return fmt.Sprintf("/prloop %s by %s (comment %d)", events.CleanTitle(d.Command), events.CleanTitle(d.Author), d.CommentID)
	case *events.EscalationRequested:
		return fmt.Sprintf("escalation requested: %s (%s)", d.Reason, d.Severity) + agentText(d.Agent)
	case *events.Escalated:
		return fmt.Sprintf("human called: %s — %s", d.Reason, strings.Join(d.Actions, ", "))
	case *events.EscalationResolved:
		return fmt.Sprintf("escalation label removed: the loop resumes (epoch %d)", d.Epoch)
	case *events.BranchUpdated:
		return fmt.Sprintf("brought up to date with its base by prloop (%s): %s → %s", d.Method, short(d.PreviousHeadSHA), short(d.HeadSHA))
	case *events.QueueFreezeRequested:
		if d.Unfreeze {
			return "unfreeze of " + baseName(events.CleanTitle(d.BaseBranch)) + " requested" + when(d.Actor != "", " by "+d.Actor)
		}
		return "freeze of " + baseName(events.CleanTitle(d.BaseBranch)) + " requested: " + events.CleanTitle(d.Reason) + when(d.Actor != "", " by "+d.Actor)
	case *events.QueueFrozen:
		return "merge queue of " + baseName(events.CleanTitle(d.BaseBranch)) + " frozen: " + events.CleanTitle(d.Reason) +
			when(!d.Until.IsZero(), " until "+d.Until.UTC().Format(time.RFC3339))
	case *events.QueueUnfrozen:
		return "merge queue of " + baseName(events.CleanTitle(d.BaseBranch)) + " unfrozen" + when(d.Detail != "", ": "+events.CleanTitle(d.Detail))
	}
	return ""
}

// agentText is the agent run's summary after an event's line, with the
// start of its final message (docs/agents.md, "Transcripts").
func agentText(a *events.AgentRunSummary) string {
	if a == nil {
		return ""
	}
	final := []rune(events.CleanTitle(a.Final))
	said := ""
	if len(final) > 0 {
		said = "; it said: " + string(final[:min(len(final), 100)]) + when(len(final) > 100, "…")
	}
	return "; agent " + a.Text() + said
}

func when(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// eventLine renders one event as one line: time, PR, type, what it says.
func eventLine(at time.Time, d events.Data, color bool) string {
	typ := string(d.EventType())
	if color {
		typ = colorFor(d.EventType()) + fmt.Sprintf("%-22s", typ) + "\x1b[0m"
	} else {
		typ = fmt.Sprintf("%-22s", typ)
	}
	return fmt.Sprintf("%s  %-18s %s %s", at.Local().Format("15:04:05.000"), d.Ref().String(), typ, describe(d))
}

func colorFor(t events.Type) string {
	switch t {
	case events.TypeReviewApproved, events.TypeMerged:
		return "\x1b[32m" // green
	case events.TypeFeedbackReceived, events.TypeReviewTimeout, events.TypeConflictResolveRequested, events.TypeChecksFailed:
		return "\x1b[33m" // yellow
	case events.TypeEscalationRequested, events.TypeEscalated, events.TypeMergeFailed:
		return "\x1b[31m" // red
	case events.TypeFeedbackAddressed, events.TypeMergeQueued, events.TypeMergeCandidate, events.TypeCreated:
		return "\x1b[36m" // cyan
	}
	return "\x1b[2m" // dim
}

// isTerminal reports whether w is a terminal, for colour and progress.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
