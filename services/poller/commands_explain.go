package poller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/review"
)

// explainMarker marks prloop's answer to "/prloop explain": one comment
// per PR, edited in place on later asks.
const explainMarker = review.OwnMarker + "explain -->"

// explainGitHub is the part of the GitHub client "/prloop explain" needs
// besides CommandGitHub.
type explainGitHub interface {
	ListIssueComments(ctx context.Context, pr ghref.PR, since time.Time) ([]*gh.IssueComment, error)
	EditIssueComment(ctx context.Context, pr ghref.PR, commentID int64, body string) (*gh.IssueComment, error)
}

var _ explainGitHub = (*github.Client)(nil)

// explainBody renders what "/prloop explain" answers: the PR as every
// view shows it (prstatus.Row, the row `prloop status` and `prloop
// explain` print), in Markdown, and nothing of prloop's host (no paths,
// no worktrees). It is pure.
func explainBody(r prstatus.Row, ok bool, asker string, commentID int64, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n**prloop explain %s** (asked by @%s in comment %d, %s)\n\n", explainMarker, r.PR, asker, commentID, now.UTC().Format(time.RFC3339))
	if !ok {
		b.WriteString("prloop has no events about this PR yet.\n")
		return b.String()
	}
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", k, cell(v))
		}
	}
	b.WriteString("| | |\n|---|---|\n")
	row("where it stands", r.Line.Text)
	row("state", string(r.Line.State))
	row("head", ghref.ShortSHA(r.Head))
	if r.FixCycle > 0 {
		row("fix cycle", fmt.Sprint(r.FixCycle))
	}
	if r.Position > 0 {
		row("merge queue", fmt.Sprintf("position %d in %s", r.Position, r.Base))
	}
	row("needs a human", string(r.Escalation))
	if r.Last != "" {
		row("last event", fmt.Sprintf("%s, %s ago", r.Last, prstatus.Age(now, r.LastAt)))
	}
	switch {
	case r.Merged:
		row("merged", "yes")
	case r.Closed:
		row("closed", "yes")
	}
	b.WriteString("\nCommands: " + strings.Join(commandList(), ", ") + " (docs/commands.md).\n")
	return b.String()
}

// cell keeps a value inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ").Replace(s)
}

func commandList() []string {
	out := make([]string, len(review.Commands))
	for i, c := range review.Commands {
		out[i] = "`/prloop " + c + "`"
	}
	return out
}

// boards is the board "/prloop explain" reads: the status writer's when
// it runs, or one started on the first ask (an ordered consumer from the
// stream's start), so that a poller that never explains follows nothing.
type boards struct {
	once sync.Once
	f    *prstatus.Follower
	err  error
}

// explainBoardWait bounds how long an explanation waits for a board that
// is catching up with the stream; the delivery is retried after it.
const explainBoardWait = time.Minute

// board returns a caught-up board to explain from.
func (s *Service) board(ctx context.Context) (*prstatus.Follower, error) {
	var f *prstatus.Follower
	if s.d.Status != nil {
		f = s.d.Status.Follower()
	} else {
		s.explain.once.Do(func() {
			js, ok := s.d.JS.(prstatus.Stream)
			if !ok || s.runCtx == nil {
				s.explain.err = errors.New("no event stream to explain from")
				return
			}
			s.explain.f = prstatus.NewFollower(s.d.Log.With("part", "explain"))
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if err := s.explain.f.Run(s.runCtx, js); err != nil && s.runCtx.Err() == nil {
					s.d.Log.Warn("following the stream for /prloop explain stopped", "err", err)
				}
			}()
		})
		if s.explain.err != nil {
			return nil, s.explain.err
		}
		f = s.explain.f
	}
	wait, cancel := context.WithTimeout(ctx, explainBoardWait)
	defer cancel()
	select {
	case <-f.CaughtUp():
		return f, nil
	case <-wait.Done():
		return nil, fmt.Errorf("the board is not caught up with the stream: %w", wait.Err())
	}
}

// explainPR answers "/prloop explain": prloop's comment with the PR's row,
// created the first time and edited in place on later asks (found by its
// marker among prloop's own comments, so a redelivery edits what a crash
// left rather than posting twice).
func (s *Service) explainPR(ctx context.Context, cg CommandGitHub, d *events.CommandReceived) error {
	eg, ok := cg.(explainGitHub)
	if !ok {
		return nil
	}
	f, err := s.board(ctx)
	if err != nil {
		return fmt.Errorf("explain %s: %w", d.PR, err)
	}
	var body string
	f.View(func(b *prstatus.Board) {
		r, ok := b.Row(d.PR, s.cfg.StatusOptions().Line)
		body = explainBody(r, ok, d.Author, d.CommentID, s.d.Now())
	})
	comments, err := eg.ListIssueComments(ctx, d.PR, time.Time{})
	if err != nil {
		return fmt.Errorf("explain %s: %w", d.PR, err)
	}
	for _, c := range comments {
		if strings.HasPrefix(c.GetBody(), explainMarker) && (s.d.Self == "" || strings.EqualFold(c.GetUser().GetLogin(), s.d.Self)) {
			if _, err := eg.EditIssueComment(ctx, d.PR, c.GetID(), body); err != nil {
				return fmt.Errorf("explain %s: %w", d.PR, err)
			}
			return nil
		}
	}
	if _, err := cg.CreateIssueComment(ctx, d.PR, body); err != nil {
		return fmt.Errorf("explain %s: %w", d.PR, err)
	}
	return nil
}
