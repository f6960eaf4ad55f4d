package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// commandSeen is a "/prloop" comment as one evaluation read it.
type commandSeen struct {
	ID     int64
	Author string
	Cmd    review.Command
	// May says the author may give commands (review.MayCommand, the
	// reviewers' rule); Collaborator that GitHub calls them one.
	May          bool
	Collaborator bool
}

// commandsOf picks the command lines out of the conversation comments,
// with whether each author may give commands: the same rule, and the same
// permission lookups, as whose review counts.
func commandsOf(comments []review.Comment, head review.Head, pol review.Policy, authorized review.Authorizer) []commandSeen {
	var out []commandSeen
	for _, c := range comments {
		cmd, ok := review.ParseCommand(c.Body)
		if !ok || review.IsOwn(c.Body) {
			continue
		}
		out = append(out, commandSeen{
			ID: c.ID, Author: c.User.Login, Cmd: cmd,
			May: review.MayCommand(c.User, head, pol, authorized), Collaborator: c.Collaborator(),
		})
	}
	return out
}

// commandFacts is what deciding a command needs besides the record.
type commandFacts struct {
	Head string
	// FixItems is what "/prloop fix" would hand the agent: the change
	// requests, the findings set aside, and the fresh comments of whoever
	// may review that the protocols did not count.
	FixItems []review.Item
	Now      time.Time
}

// commandReply is a refusal to answer on the PR: 😕 on the comment and a
// one-line reply.
type commandReply struct {
	CommentID int64
	Author    string
	Text      string
}

// commandPlan is what planCommands decided.
type commandPlan struct {
	Next  state.PR
	Emits []Emit
	// Fix, when set, is the change request "/prloop fix" asks for now,
	// with Fixer who asked.
	Fix        []review.Item
	Fixer      string
	FixComment int64
	// Replies are the refusals to post; Ignored the strangers' lines,
	// only logged.
	Replies []commandReply
	Ignored []commandSeen
	Taken   []commandSeen
}

// planCommands decides what to do with the command comments seen on a PR,
// each once (state.PR.Commands): a command from someone who may approve is
// taken (PRCommandReceived, and what the poller itself owns of it: the
// watch for stop, the change request for fix, the escalation epoch for a
// retry without the label), or refused with a reason when it is unknown
// or not applicable now; an authorized-looking line from a collaborator
// who may not approve is refused; a stranger's is ignored. It is pure.
func planCommands(cur state.PR, seen []commandSeen, f commandFacts) commandPlan {
	p := commandPlan{Next: cur}
	for _, c := range seen {
		if p.Next.Commands.Has(c.ID) {
			continue
		}
		p.Next.Commands.Add(c.ID)
		if !c.May {
			if c.Collaborator {
				p.refuse(c, "you may not give prloop commands on this PR (only those who may approve it can)")
			} else {
				p.Ignored = append(p.Ignored, c)
			}
			continue
		}
		if why := p.take(c, f); why != "" {
			p.refuse(c, why)
		}
	}
	return p
}

func (p *commandPlan) refuse(c commandSeen, why string) {
	p.Replies = append(p.Replies, commandReply{CommentID: c.ID, Author: c.Author, Text: why})
}

// take carries out c on the plan, or says why it is refused.
func (p *commandPlan) take(c commandSeen, f commandFacts) string {
	next := &p.Next
	switch {
	case c.Cmd.Malformed != "":
		return c.Cmd.Malformed
	case !c.Cmd.Known():
		name := c.Cmd.Name
		if name == "" {
			return "no command given; prloop knows " + strings.Join(review.Commands, ", ")
		}
		return fmt.Sprintf("unknown command %q; prloop knows %s", clipWord(name), strings.Join(review.Commands, ", "))
	}
	epoch := next.Epoch
	switch c.Cmd.Name {
	case review.CmdRetry:
		if !next.Escalated() && !next.EscalationLabelSeen {
			return "nothing to retry: the PR is not escalated"
		}
		if !next.EscalationLabelSeen {
			// No label to remove (none configured, or not on yet): the
			// poller, which owns the epoch, resumes the loop at once.
			before := *next
			resumeEscalation(next, f.Now)
			p.Emits = append(p.Emits, resumed(before, *next)...)
		}
		// With the label on, the escalator removes it and the removal
		// resumes the loop as a human's would (resumeAfterEscalation).
	case review.CmdQueue:
		if next.Status != events.StatusApproved {
			return "not approved: the PR enters the merge queue once it is approved"
		}
		// The approval is announced anew: the merger lets the PR in again
		// once it has verified it on GitHub.
		next.Status = ""
	case review.CmdFix:
		switch {
		case next.FeedbackHeadSHA != "" && next.FeedbackHeadSHA == f.Head:
			return "the agent is already working on this PR"
		case next.Escalated() || next.EscalationLabelSeen:
			return "the PR is escalated: /prloop retry first"
		case len(f.FixItems) == 0:
			return "nothing to fix: no comments on the current head"
		}
		p.Fix, p.Fixer, p.FixComment = f.FixItems, c.Author, c.ID
		next.FixCommandHead = f.Head
		next.Status = "" // the change request is published, whatever was before
	case review.CmdStop:
		next.Stopped = true
	}
	p.Taken = append(p.Taken, c)
	p.Emits = append(p.Emits, Emit{
		Data: &events.CommandReceived{
			Base: events.Base{PR: next.PR, HeadSHA: next.HeadSHA}, Command: c.Cmd.Name, Args: c.Cmd.Args,
			CommentID: c.ID, Author: c.Author, Epoch: epoch,
		},
		Parts: []string{strconv.FormatInt(c.ID, 10)},
	})
	return ""
}

// clipWord keeps an unknown command's name short in a reply.
func clipWord(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// withFix is the verdict "/prloop fix" makes: a change request of items,
// asked by who.
func withFix(v review.Verdict, items []review.Item, who string) review.Verdict {
	v.Status, v.Actor, v.Feedback = events.StatusChangesRequested, who, items
	return v
}

// CommandGitHub is the part of the GitHub client the poller answers
// commands with; a client without it takes commands without answering.
type CommandGitHub interface {
	CreateCommentReaction(ctx context.Context, pr ghref.PR, commentID int64, content string) error
	CreateIssueComment(ctx context.Context, pr ghref.PR, body string) (*gh.IssueComment, error)
	AddLabels(ctx context.Context, pr ghref.PR, labels ...string) ([]*gh.Label, error)
}

var _ CommandGitHub = (*github.Client)(nil)

// answerRefusals reacts 😕 to each refused command and replies in one line.
// It runs after the refusal is stored: at most once, so a crash in between
// leaves a refusal unanswered rather than answered twice.
func (s *Service) answerRefusals(ctx context.Context, pr ghref.PR, p commandPlan, log *slog.Logger) {
	for _, c := range p.Ignored {
		log.Info("ignored a /prloop command from someone who is not a collaborator", "comment", c.ID, "author", c.Author)
	}
	cg, ok := s.d.GitHub.(CommandGitHub)
	for _, r := range p.Replies {
		log.Info("refused a /prloop command", "comment", r.CommentID, "author", r.Author, "why", r.Text)
		if !ok {
			continue
		}
		if err := cg.CreateCommentReaction(ctx, pr, r.CommentID, "confused"); err != nil {
			log.Warn("reacting to a refused command failed", "comment", r.CommentID, "err", err)
		}
		body := fmt.Sprintf("%scommand %d -->\n@%s: %s.", review.OwnMarker, r.CommentID, r.Author, r.Text)
		if _, err := cg.CreateIssueComment(ctx, pr, body); err != nil {
			log.Warn("replying to a refused command failed", "comment", r.CommentID, "err", err)
		}
	}
}

// commandTaken answers a PRCommandReceived the poller published: 👀 on the
// comment (GitHub keeps one reaction per user and content, so a
// redelivery adds nothing), and the poller's own part of the command: the
// priority label, whose failure is returned so that the delivery is retried.
func (s *Service) commandTaken(ctx context.Context, d *events.CommandReceived, log *slog.Logger) error {
	cg, ok := s.d.GitHub.(CommandGitHub)
	if !ok {
		return nil
	}
	err := s.answerTaken(ctx, cg, d, log)
	if errors.Is(err, github.ErrNotFound) {
		// The PR or the comment is gone: nothing left to answer.
		log.Warn("cannot answer a /prloop command: not found on GitHub", "command", d.Command, "comment", d.CommentID, "err", err)
		return nil
	}
	return err
}

// answerTaken is commandTaken's GitHub part.
func (s *Service) answerTaken(ctx context.Context, cg CommandGitHub, d *events.CommandReceived, log *slog.Logger) error {
	if d.Command == events.CommandPriority {
		label, err := s.priorityLabel(ctx, d.PR)
		if err != nil {
			return fmt.Errorf("add the priority label to %s for comment %d: %w", d.PR, d.CommentID, err)
		}
		if label != "" {
			if _, err := cg.AddLabels(ctx, d.PR, label); err != nil {
				return fmt.Errorf("add the priority label to %s for comment %d: %w", d.PR, d.CommentID, err)
			}
		}
	}
	if d.Command == events.CommandExplain {
		if err := s.explainPR(ctx, cg, d); err != nil {
			return err
		}
	}
	if err := cg.CreateCommentReaction(ctx, d.PR, d.CommentID, "eyes"); err != nil {
		// The command is taken either way; only the acknowledgement is lost.
		log.Warn("reacting to a taken command failed", "comment", d.CommentID, "err", err)
	}
	log.Info("took a /prloop command", "command", d.Command, "comment", d.CommentID, "author", d.Author)
	return nil
}

// priorityLabel is the label that puts pr ahead in its merge queue: the
// one the merger reads, PRLOOP_PRIORITY_LABEL or its base's
// merge.priority_label (pkg/policy).
func (s *Service) priorityLabel(ctx context.Context, pr ghref.PR) (string, error) {
	cur, _, err := s.d.Store.Get(ctx, pr)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return "", err
	}
	if cur.BaseRef == "" {
		return s.cfg.PriorityLabel, nil
	}
	eff, _, err := s.pol.At(ctx, pr.RepoRef(), cur.BaseRef, "")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(eff.PriorityLabel.V), nil
}
