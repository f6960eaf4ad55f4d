// The executor's part of telling the reviewers that a fix is ready: it
// reads what is already posted and posts what decideNotice
// (plan_notify.go) says is left.

package feedback

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// agentSummary reads what the agent printed in the run that made the fix:
// its log without prloop's own lines. A missing log (swept, or a fix
// pushed by another replica) leaves it empty.
func agentSummary(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "[prloop:") {
			continue
		}
		b.WriteString(sc.Text() + "\n")
	}
	return strings.TrimSpace(b.String())
}

// notify tells the reviewers that head fixes their feedback, unless it is
// off. Only an interruption fails it: the fix is published, and a note
// that GitHub refuses must not hold the change request open (it would be
// retried against a head the poller has moved on from); each failure is
// logged instead.
func (a *attempt) notify(ctx context.Context, head string) error {
	if !a.cfg.NotifyReviewers {
		return nil
	}
	var aud Audience
	if a.rec.Audience != nil {
		aud = *a.rec.Audience
	}
	f := noticeFacts{Audience: aud, Head: head, Cycle: a.cycle + 1, Summary: agentSummary(a.logFile(a.rec.Runs)), Replied: map[int64]bool{}}
	if a.req.Conflict != nil {
		f.Conflict = a.req.Conflict.BaseBranch
	}
	if err := a.noticeState(ctx, &f); err != nil {
		return a.notifyFailed(ctx, "read what was posted", err)
	}
	n := decideNotice(f)
	log := a.log.With("new_head", ghref.EventSHA(head))
	if n.empty() {
		log.Info("reviewers already told of the fix")
		return nil
	}
	if a.cfg.DryRun {
		log.Info("dry run: would tell the reviewers of the fix", "rerequest", n.Rerequest, "replies", len(n.Replies), "comment", n.Comment)
		return nil
	}
	pr := a.req.PR
	var refused []string
	for _, login := range n.Rerequest {
		if err := a.fence(ctx); err != nil {
			return err
		}
		err := withTimeout(ctx, func(ctx context.Context) error { return a.gh.RequestReviewers(ctx, pr, login) })
		if errors.Is(err, github.ErrValidation) {
			// GitHub asks only collaborators to review; the others
			// are mentioned in the comment instead.
			log.Info("GitHub refused to request a review; not a collaborator?", "reviewer", login, "err", err)
			refused = append(refused, login)
		} else if err != nil {
			return a.notifyFailed(ctx, "request a review from "+login, err)
		}
	}
	if len(refused) > 0 {
		f.Audience = f.Audience.mentionInstead(refused)
		n.Comment = renderNote(f)
	}
	for _, r := range n.Replies {
		if err := a.fence(ctx); err != nil {
			return err
		}
		if err := withTimeout(ctx, func(ctx context.Context) error {
			_, err := a.gh.ReplyToReviewComment(ctx, pr, r.Thread, r.Body)
			return err
		}); err != nil {
			if err := a.notifyFailed(ctx, "reply in thread "+strconv.FormatInt(r.Thread, 10), err); err != nil {
				return err
			}
		}
	}
	if err := a.fence(ctx); err != nil {
		return err
	}
	if err := withTimeout(ctx, func(ctx context.Context) error {
		_, err := a.gh.CreateIssueComment(ctx, pr, n.Comment)
		return err
	}); err != nil {
		return a.notifyFailed(ctx, "post the note", err)
	}
	log.Info("told the reviewers of the fix", "rerequested", n.Rerequest, "replies", len(n.Replies))
	return nil
}

// notifyFailed logs a failure to tell the reviewers and returns an error
// only when the attempt was interrupted.
func (a *attempt) notifyFailed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	a.log.Warn("could not tell the reviewers of the fix: "+what, "err", err)
	return nil
}

// noticeState reads what GitHub shows of a note about f.Head: the comment,
// the replies, the reviewers requested now.
func (a *attempt) noticeState(ctx context.Context, f *noticeFacts) error {
	gh, pr := timeoutSource{a.gh}, a.req.PR
	marker := noteMarker(f.Head)
	// All comments, not those since the push: GitHub's clock filters them,
	// and a note missed by a skewed clock would be posted twice.
	comments, err := gh.ListIssueComments(ctx, pr, time.Time{})
	if err != nil {
		return err
	}
	for _, c := range comments {
		if strings.HasPrefix(strings.TrimSpace(c.GetBody()), marker) {
			f.Posted = true
			return nil
		}
	}
	if len(f.Audience.Threads) > 0 {
		rcs, err := gh.ListReviewComments(ctx, pr)
		if err != nil {
			return err
		}
		rm := replyMarker(f.Head)
		for _, c := range rcs {
			if strings.HasPrefix(strings.TrimSpace(c.GetBody()), rm) {
				f.Replied[c.GetInReplyTo()] = true
			}
		}
	}
	if len(f.Audience.Rerequest) > 0 {
		p, err := a.getPull(ctx)
		if err != nil {
			return err
		}
		for _, u := range p.RequestedReviewers {
			f.Requested = append(f.Requested, u.GetLogin())
		}
	}
	return nil
}

// withTimeout gives one GitHub write its own deadline.
func withTimeout(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return call(ctx)
}
