package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// probe lists rw's open PRs and issues (two conditional requests, free when
// nothing changed), discovers new PRs, and evaluates only the watched PRs
// whose summary changed; it also publishes due review timeouts.
func (s *Service) probe(ctx context.Context, rw *repoWatch, log *slog.Logger) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	pulls, err := s.d.GitHub.ListPulls(ctx, rw.repo, "open")
	if err != nil {
		release()
		return fmt.Errorf("probe pulls of %s: %w", rw.repo, err)
	}
	issues, err := s.d.GitHub.ListIssues(ctx, rw.repo, github.IssueListOptions{State: "open"})
	release()
	if err != nil {
		return fmt.Errorf("probe issues of %s: %w", rw.repo, err)
	}

	open := make(map[int]*gh.PullRequest, len(pulls))
	heads := make(map[string][]int, len(pulls))
	for _, p := range pulls {
		open[p.GetNumber()] = p
		heads[p.GetHead().GetSHA()] = append(heads[p.GetHead().GetSHA()], p.GetNumber())
	}
	byNumber := make(map[int]*github.Issue, len(issues))
	for _, is := range issues {
		if is.IsPull() {
			byNumber[is.GetNumber()] = is
		}
	}

	rw.mu.Lock()
	rw.heads = heads
	if rw.discover {
		for n, p := range open {
			if !rw.prs[n] && s.wanted(p) {
				rw.prs[n] = true
			}
		}
	}
	watched := make([]int, 0, len(rw.prs))
	for n := range rw.prs {
		watched = append(watched, n)
	}
	rw.mu.Unlock()
	slices.Sort(watched)

	for _, n := range watched {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pr := rw.repo.PR(n)
		plog := log.With("pr", pr.String())
		p, isOpen := open[n]
		memo, known := rw.memo[n]
		var err error
		switch {
		case !isOpen:
			if !known || !memo.Closed {
				err = s.closed(ctx, rw, pr, plog)
			}
		case !known || memo.Closed || memo.Fingerprint != fingerprint(p, byNumber[n]):
			err = s.evaluate(ctx, rw, pr, p, byNumber[n], plog)
		default:
			err = s.checkTimeout(ctx, rw, pr, plog)
		}
		if err != nil && ctx.Err() == nil {
			plog.Warn("evaluation failed; retrying next interval", "err", err)
		}
	}
	return nil
}

// wanted applies the auto-discovery filters.
func (s *Service) wanted(p *gh.PullRequest) bool {
	if s.cfg.WatchLabel != "" && !slices.ContainsFunc(p.Labels, func(l *gh.Label) bool { return strings.EqualFold(l.GetName(), s.cfg.WatchLabel) }) {
		return false
	}
	if len(s.cfg.WatchAuthors) > 0 && !slices.ContainsFunc(s.cfg.WatchAuthors, func(a string) bool { return strings.EqualFold(a, p.GetUser().GetLogin()) }) {
		return false
	}
	return true
}

// fingerprint summarises what the probe lists show of a PR. It changes with
// a push, a comment, a review, a label, an edit (updated_at) and with
// reactions (the rollup; GitHub does not move updated_at for them).
func fingerprint(p *gh.PullRequest, is *github.Issue) string {
	var b strings.Builder
	b.WriteString(p.GetHead().GetSHA())
	b.WriteByte('|')
	b.WriteString(p.GetUpdatedAt().UTC().Format("2006-01-02T15:04:05"))
	if is != nil {
		r := is.ReactionCounts()
		fmt.Fprintf(&b, "|%s|%d|%d:%d:%d:%d:%d:%d:%d:%d:%d", is.GetUpdatedAt().UTC().Format("2006-01-02T15:04:05"), is.GetComments(),
			r.GetTotalCount(), r.GetPlusOne(), r.GetMinusOne(), r.GetLaugh(), r.GetConfused(), r.GetHeart(), r.GetHooray(), r.GetRocket(), r.GetEyes())
	}
	return b.String()
}

// evaluateFetched evaluates a kicked PR, reading it from GitHub first.
func (s *Service) evaluateFetched(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	p, err := s.d.GitHub.GetPull(ctx, pr)
	release()
	if errors.Is(err, github.ErrNotFound) {
		log.Warn("PR not found; not watching it", "err", err)
		rw.mu.Lock()
		delete(rw.prs, pr.Number)
		rw.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	rw.mu.Lock()
	rw.prs[pr.Number] = true
	rw.mu.Unlock()
	if p.GetState() != "open" {
		return s.closed(ctx, rw, pr, log)
	}
	return s.evaluate(ctx, rw, pr, p, nil, log)
}

// evaluate gathers pr's signals, decides, publishes and stores.
func (s *Service) evaluate(ctx context.Context, rw *repoWatch, pr ghref.PR, p *gh.PullRequest, is *github.Issue, log *slog.Logger) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()

	cur, _, err := s.d.Store.Get(ctx, pr)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	head := p.GetHead().GetSHA()
	anchor := cur.HeadAnchor
	if head != cur.HeadSHA {
		switch {
		case head == cur.PushedHeadSHA && !cur.PushedAt.IsZero():
			anchor = cur.PushedAt
		case cur.HeadSHA == "":
			anchor, err = s.d.GitHub.GetCommitDate(ctx, pr.RepoRef(), head)
			if err != nil {
				return fmt.Errorf("read head commit of %s: %w", pr, err)
			}
		default:
			anchor = s.d.Now()
		}
	}
	sig, err := review.Gather(ctx, s.d.GitHub, pr, anchor)
	if err != nil {
		return err
	}
	author := p.GetUser().GetLogin()
	authz := s.auth.For(ctx, pr.RepoRef(), func(login string, err error) {
		log.Warn("permission lookup failed; not counting the user this time", "user", login, "err", err)
	})
	verdict := review.Evaluate(sig, review.Head{SHA: head, Anchor: anchor, Author: author}, s.policy, authz)
	obs := Observation{
		HeadSHA: head, Anchor: anchor, Author: author, URL: p.GetHTMLURL(),
		Verdict: verdict, Fingerprint: "", Now: s.d.Now(),
	}
	if is != nil {
		obs.Fingerprint = fingerprint(p, is)
	}
	return s.apply(ctx, rw, pr, log, func(cur state.PR) Decision {
		if cur.Closed { // reopened: resume as if watching began now
			cur.Closed, cur.ClosedAt, cur.Merged = false, time.Time{}, false
			cur.Status, cur.ReviewTimeoutSent, cur.WatchedSince = "", false, obs.Now
		}
		return decide(cur, obs, s.timing)
	})
}

// apply stores a decision with compare-and-set, publishing its events first.
// Publishing happens inside the update function, which may run again when
// another service changed the PR's state meanwhile: the decision is then
// remade on the fresh state, and an event decided twice carries the same id
// twice, so JetStream drops the repeat.
func (s *Service) apply(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger, decideFn func(state.PR) Decision) error {
	stored, err := s.d.Store.Update(ctx, pr, func(p *state.PR) error {
		dec := decideFn(*p)
		for _, e := range dec.Emits {
			ev, dup, err := s.emit.Emit(ctx, e.Data, e.Parts...)
			if err != nil {
				return err
			}
			dec.Next.LastEventID, dec.Next.LastEventType, dec.Next.LastEventAt = ev.ID(), events.Type(ev.Type()), ev.Time()
			if !dup {
				log.Info("published", "type", ev.Type(), "id", ev.ID(), "head", short(dec.Next.HeadSHA))
			}
		}
		*p = dec.Next
		return nil
	})
	if err != nil {
		return err
	}
	rw.memo[pr.Number] = stored
	return nil
}

// checkTimeout publishes a due ReviewTimeout for an unchanged PR.
func (s *Service) checkTimeout(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	memo := rw.memo[pr.Number]
	if len(timeout(&memo, s.d.Now(), s.timing)) == 0 {
		return nil
	}
	return s.apply(ctx, rw, pr, log, func(cur state.PR) Decision {
		return Decision{Emits: timeout(&cur, s.d.Now(), s.timing), Next: cur}
	})
}

// closed records that pr was closed or merged and stops evaluating it;
// PRClosed is published unless prloop merged it.
func (s *Service) closed(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	p, err := s.d.GitHub.GetPull(ctx, pr)
	release()
	if errors.Is(err, github.ErrNotFound) {
		rw.mu.Lock()
		delete(rw.prs, pr.Number)
		rw.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	if p.GetState() == "open" {
		return nil // the list was older than this read; the next probe sees it
	}
	merged := p.GetMerged()
	byPrloop := rw.memo[pr.Number].Merged
	if merged && !byPrloop && s.d.Merged != nil {
		if byPrloop, err = s.d.Merged(ctx, pr); err != nil {
			return fmt.Errorf("check whether prloop merged %s: %w", pr, err)
		}
	}
	actor := p.GetMergedBy().GetLogin()
	return s.apply(ctx, rw, pr, log, func(cur state.PR) Decision {
		if cur.Closed {
			return Decision{Next: cur}
		}
		next := cur
		next.Closed, next.ClosedAt, next.Merged = true, s.d.Now(), merged
		if next.HeadSHA == "" {
			next.HeadSHA = p.GetHead().GetSHA()
		}
		if byPrloop || cur.Merged {
			next.Merged = true
			return Decision{Next: next}
		}
		return Decision{Next: next, Emits: []Emit{{
			Data:  &events.Closed{Base: events.Base{PR: next.PR, HeadSHA: next.HeadSHA}, Merged: merged, Actor: actor},
			Parts: []string{short(next.HeadSHA), strconv.Itoa(next.Transitions)},
		}}}
	})
}
