package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
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
	pulls, pv, err := s.d.GitHub.ListPullSummariesIfChanged(ctx, rw.repo, "open", rw.pullsVersion)
	if err != nil {
		release()
		s.probed(ctx, metrics.ProbeError)
		return fmt.Errorf("probe pulls of %s: %w", rw.repo, err)
	}
	issues, iv, err := s.d.GitHub.ListIssueSummariesIfChanged(ctx, rw.repo, github.IssueListOptions{State: "open"}, rw.issuesVersion)
	release()
	if err != nil {
		s.probed(ctx, metrics.ProbeError)
		return fmt.Errorf("probe issues of %s: %w", rw.repo, err)
	}
	if pulls == nil && issues == nil {
		s.probed(ctx, metrics.ProbeUnchanged)
	} else {
		s.probed(ctx, metrics.ProbeChanged)
	}
	// Unchanged lists come back without items; the compact snapshots of the
	// last change stand.
	if pulls != nil {
		rw.pulls = make(map[int]pullInfo, len(pulls))
		for _, p := range pulls {
			rw.pulls[p.Number] = pullInfoOfSummary(p)
		}
	}
	rw.pullsVersion = pv
	if issues != nil {
		rw.issues = make(map[int]issueInfo, len(issues))
		for _, is := range issues {
			if is.IsPull() {
				rw.issues[is.Number] = issueInfoOf(is)
			}
		}
	}
	rw.issuesVersion = iv
	open := rw.pulls
	heads := make(map[string][]int, len(open))
	for n, p := range open {
		heads[p.head] = append(heads[p.head], n)
	}

	rw.mu.Lock()
	rw.heads = heads
	if rw.discover {
		for n, p := range open {
			if !rw.prs[n] && s.wanted(p) {
				rw.add(n)
			}
		}
	}
	for n := range rw.closed {
		if _, reopened := open[n]; reopened {
			rw.add(n) // evaluate tells a reopen from a stale list
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
		is, hasIssue := rw.issues[n]
		var isp *issueInfo
		if hasIssue {
			isp = &is
		}
		memo, known := rw.memo[n]
		var err error
		switch {
		case !isOpen:
			if known && memo.Closed {
				s.forget(rw, n, memo.ClosedAt)
			} else {
				err = s.closed(ctx, rw, pr, plog)
			}
		case !known || memo.Closed || memo.Fingerprint != fingerprint(p, isp) || recheckDue(memo, s.d.Now()):
			err = s.evaluate(ctx, rw, pr, p, isp, plog)
			if ctx.Err() == nil {
				s.d.Metrics.Evaluation(metrics.TriggerProbe, err)
			}
		default:
			err = s.checkTimeout(ctx, rw, pr, plog)
		}
		if err != nil && ctx.Err() == nil {
			plog.Warn("evaluation failed; retrying next interval", "err", err)
		}
	}
	return nil
}

// recheckDue reports whether a PR must be evaluated again though its
// summary did not change (state.PR.RecheckAt).
func recheckDue(memo state.PR, now time.Time) bool {
	return !memo.RecheckAt.IsZero() && !now.Before(memo.RecheckAt)
}

// probed counts a probe, unless it was cut short by shutdown.
func (s *Service) probed(ctx context.Context, result string) {
	if ctx.Err() == nil {
		s.d.Metrics.Probe(result)
	}
}

// enrols reports whether a kicked PR is (now) watched, and watches it if
// so. A kick (a webhook, a status naming a head) is a trigger, not an
// opt-in: a PR not watched yet is enrolled only when it passes the same
// filters as auto-discovery, or when it already has a state record (an
// explicit watch request, which may have been handled by another replica,
// or an earlier enrolment).
func (s *Service) enrols(ctx context.Context, rw *repoWatch, pr ghref.PR, p pullInfo) (bool, error) {
	rw.mu.Lock()
	watched := rw.prs[pr.Number]
	rw.mu.Unlock()
	if !watched && !s.wanted(p) {
		_, _, err := s.d.Store.Get(ctx, pr)
		if errors.Is(err, state.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read state of %s: %w", pr, err)
		}
	}
	rw.mu.Lock()
	rw.add(pr.Number)
	rw.mu.Unlock()
	return true, nil
}

// wanted applies the auto-discovery filters.
func (s *Service) wanted(p pullInfo) bool {
	if s.cfg.WatchLabel != "" && !slices.ContainsFunc(p.labels, func(l string) bool { return strings.EqualFold(l, s.cfg.WatchLabel) }) {
		return false
	}
	if len(s.cfg.WatchAuthors) > 0 && !slices.ContainsFunc(s.cfg.WatchAuthors, func(a string) bool { return strings.EqualFold(a, p.author) }) {
		return false
	}
	return true
}

// pullInfo is what the poller keeps of a PR from the open-pulls list.
type pullInfo struct {
	head, base, author, url, title string
	created, updated               time.Time
	labels                         []string
}

func pullInfoOf(p *gh.PullRequest) pullInfo {
	pi := pullInfo{
		head: p.GetHead().GetSHA(), base: p.GetBase().GetRef(), author: p.GetUser().GetLogin(), url: p.GetHTMLURL(), title: p.GetTitle(),
		created: p.GetCreatedAt().Time, updated: p.GetUpdatedAt().Time,
	}
	for _, l := range p.Labels {
		pi.labels = append(pi.labels, l.GetName())
	}
	return pi
}

func pullInfoOfSummary(p github.PullSummary) pullInfo {
	pi := pullInfo{head: p.Head.SHA, base: p.Base.Ref, author: p.User.Login, url: p.HTMLURL, title: p.Title, created: p.CreatedAt, updated: p.UpdatedAt}
	for _, l := range p.Labels {
		pi.labels = append(pi.labels, l.Name)
	}
	return pi
}

// issueInfo is what the poller keeps of a PR from the open-issues list.
type issueInfo struct {
	updated   time.Time
	comments  int
	reactions int
	rollup    string
}

func issueInfoOf(is github.IssueSummary) issueInfo {
	r := &is.Reactions
	return issueInfo{
		updated: is.UpdatedAt, comments: is.Comments, reactions: r.GetTotalCount(),
		rollup: fmt.Sprintf("%d:%d:%d:%d:%d:%d:%d:%d:%d", r.GetTotalCount(), r.GetPlusOne(), r.GetMinusOne(), r.GetLaugh(),
			r.GetConfused(), r.GetHeart(), r.GetHooray(), r.GetRocket(), r.GetEyes()),
	}
}

// fingerprint summarises what the probe lists show of a PR. It changes with
// a push, a comment, a review, a label, an edit (updated_at) and with
// reactions (the rollup; GitHub does not move updated_at for them).
func fingerprint(p pullInfo, is *issueInfo) string {
	fp := p.head + "|" + p.base + "|" + p.updated.UTC().Format(time.RFC3339) + "|" + strings.Join(p.labels, ",")
	if is != nil {
		fp += "|" + activityKey(p, is) + "|" + is.rollup
	}
	return fp
}

// seenSignals is what one evaluation read of a PR.
type seenSignals struct {
	head    string
	updated string
	sig     review.Signals
	// listedAt is when the lists in sig (comments, reviews) were read.
	listedAt time.Time
}

// ListSettle is how long after a PR's last activity (GitHub's updated_at,
// in whole seconds) its lists must have been read for a later change to be
// sure to show in updated_at: a second of resolution plus clock skew
// between GitHub and prloop. A PR evaluated sooner is evaluated once more
// after it (state.PR.RecheckAt).
const ListSettle = 5 * time.Second

// activityKey is the part of a PR's probe summary that everything but a
// reaction changes.
func activityKey(p pullInfo, is *issueInfo) string {
	return p.updated.UTC().Format(time.RFC3339) + "|" + is.updated.UTC().Format(time.RFC3339) + "|" + strconv.Itoa(is.comments)
}

// untouched reports whether a PR shows no activity since it was opened: no
// reactions, no comments, and updated_at still equal to created_at (pushes,
// reviews, review comments, labels and edits all move updated_at).
func untouched(p pullInfo, is *issueInfo) bool {
	if is == nil || is.comments != 0 || is.reactions != 0 {
		return false
	}
	return !p.created.IsZero() && p.created.Equal(p.updated) && is.updated.Equal(p.updated)
}

// evaluateFetched evaluates a kicked PR, reading it from GitHub first.
func (s *Service) evaluateFetched(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	p, err := s.getPull(ctx, pr)
	if errors.Is(err, github.ErrNotFound) {
		log.Warn("PR not found; not watching it", "err", err)
		s.forget(rw, pr.Number, time.Time{})
		return nil
	}
	if err != nil {
		return err
	}
	if ok, err := s.enrols(ctx, rw, pr, pullInfoOf(p)); err != nil || !ok {
		if err == nil {
			log.Debug("not watching: outside PRLOOP_WATCH_LABEL / PRLOOP_WATCH_AUTHORS")
		}
		return err
	}
	if p.GetState() != "open" {
		return s.closed(ctx, rw, pr, log)
	}
	return s.evaluate(ctx, rw, pr, pullInfoOf(p), nil, log)
}

// evaluate gathers pr's signals, decides, publishes and stores.
func (s *Service) evaluate(ctx context.Context, rw *repoWatch, pr ghref.PR, p pullInfo, is *issueInfo, log *slog.Logger) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	release = sync.OnceFunc(release)
	defer release()

	cur, _, err := s.d.Store.Get(ctx, pr)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	head := p.head
	l := listing{pull: p, issue: is}
	rw.mu.Lock()
	if last, ok := rw.seen[pr.Number]; ok {
		l.last = &last
	}
	rw.mu.Unlock()
	listedAt := s.d.Now() // when the lists below are read (or known empty)
	plan := planEvaluation(cur, l, listedAt)
	switch plan.Kind {
	case evalSkip:
		if plan.Why != "" {
			log.Debug(plan.Why, "head", ghref.EventSHA(head), "addressing", ghref.EventSHA(cur.HeadSHA))
		}
		return nil
	case evalFetchFresh:
		release()
		return s.evaluateFetched(ctx, rw, pr, log)
	}
	anchor := plan.Anchor
	sig, listedAt, err := s.gather(ctx, pr, plan, l, listedAt)
	if err != nil {
		return err
	}
	rw.mu.Lock()
	if is != nil {
		rw.seen[pr.Number] = seenSignals{head: head, updated: activityKey(p, is), sig: sig, listedAt: listedAt}
	} else {
		delete(rw.seen, pr.Number)
	}
	rw.mu.Unlock()
	author := p.author
	j, err := s.judge(ctx, pr, p.base, head, log)
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", pr, err)
	}
	perms := j.perms
	now := s.d.Now()
	since := baseSince(cur, p.base, now)
	rhead := review.Head{SHA: head, Anchor: anchor, BaseSince: since, Author: author, Addressed: cur.Addressed()}
	verdict := review.Evaluate(sig, rhead, j.review, perms.Authorized)
	cmds := commandsOf(sig.Comments, rhead, j.review, perms.Authorized)
	facts := commandFacts{Head: head, Now: now}
	if len(cmds) > 0 {
		facts.FixItems = review.FixItems(verdict, sig, rhead, j.review, perms.Authorized)
	}
	if err := perms.Err(); err != nil {
		// Deciding without a reviewer's permission would flip the verdict
		// (an approver not counted drops an approval): evaluate again on
		// the next probe instead.
		return fmt.Errorf("evaluate %s: %w", pr, err)
	}
	obs := Observation{
		HeadSHA: head, Anchor: anchor, Base: p.base, BaseSince: since, Author: author, URL: p.url, Title: events.CleanTitle(p.title),
		Verdict: verdict, Fingerprint: "", Labels: p.labels, Updated: p.updated, Now: now,
		Hold: j.policyHold(verdict, s.policy.Self), PolicyWarning: j.eff.CeilingNote(), MaxFixCycles: j.maxFixCycles(),
	}
	obs.Checks = s.readChecks(ctx, cur, pr, head, p.base, verdict.Status, j.eff.FixChecks.V, log)
	if obs.Checks != nil && obs.Checks.Pending {
		// Checks complete without touching the PR's summary: look again,
		// every few intervals, since CI takes minutes and every PR with
		// pending checks costs a full evaluation (a check_suite or status
		// webhook comes sooner).
		obs.RecheckAt = now.Add(checksRecheck * s.cfg.PollInterval)
	}
	if is != nil {
		obs.Fingerprint = fingerprint(p, is)
		if settled := latest(p.updated, is.updated).Add(ListSettle); listedAt.Before(settled) && (obs.RecheckAt.IsZero() || settled.Before(obs.RecheckAt)) {
			// updated_at has whole seconds: a review in the same second as
			// the activity before it, after the lists above were read,
			// leaves the summary as it was. The probe evaluates the PR
			// once more when that can no longer happen.
			obs.RecheckAt = settled
		}
	}
	j.recheck(&obs, s.cfg.PollInterval)
	flaky := cur.Checks.FlakyPasses
	defer func() {
		rw.mu.Lock()
		now := rw.memo[pr.Number].Checks.FlakyPasses
		rw.mu.Unlock()
		if now > flaky {
			s.d.Metrics.FlakyPass()
			log.Info("failing checks passed on the same head: a flaky failure", "head", ghref.EventSHA(head))
		}
	}()
	var cmdPlan commandPlan // the commands of the decision that was stored
	err = s.apply(ctx, rw, pr, log, func(cur state.PR) Decision {
		var d Decision
		d, cmdPlan = decideEvaluation(cur, obs, is != nil, j.timing, cmds, facts)
		return d
	})
	if err == nil {
		s.answerRefusals(ctx, pr, cmdPlan, log)
	}
	return err
}

// gather reads the review signals of pr as plan says, and returns them
// with when their lists were read.
func (s *Service) gather(ctx context.Context, pr ghref.PR, plan evaluationPlan, l listing, now time.Time) (review.Signals, time.Time, error) {
	switch plan.Kind {
	case evalReactionsOnly:
		sig := l.last.sig
		var err error
		sig.Reactions, err = review.GatherReactions(ctx, s.d.GitHub, pr)
		return sig, l.last.listedAt, err
	case evalGather:
		sig, err := review.Gather(ctx, s.d.GitHub, pr, plan.Anchor)
		return sig, now, err
	}
	return review.Signals{}, now, nil
}

// apply decides with compare-and-set and stores the decision together with
// the events it decided, in the record's outbox; then it publishes them (see
// "Side effects" in package state). decideFn may run more than once, on
// fresher state each time, and publishes nothing itself. rw, when set, gets
// the stored record as its memo.
func (s *Service) apply(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger, decideFn func(state.PR) Decision) error {
	stored, err := s.d.Store.Update(ctx, pr, func(p *state.PR) error {
		dec := decideFn(*p)
		if dec.Hold {
			return state.ErrNoChange
		}
		next := dec.Next
		next.Outbox = slices.Clone(p.Outbox)
		for _, e := range dec.Emits {
			ev, err := s.emit.Build(e.Data, e.Parts...)
			if err != nil {
				return err
			}
			next.Outbox = append(next.Outbox, ev)
			next.LastEventID, next.LastEventType, next.LastEventAt = ev.ID(), events.Type(ev.Type()), ev.Time()
		}
		*p = next
		return nil
	})
	if err != nil {
		return err
	}
	stored, err = s.flush(ctx, pr, stored, log)
	if rw == nil {
		return err
	}
	rw.mu.Lock()
	rw.memo[pr.Number] = stored // with what is left in its outbox: checkTimeout sends it
	rw.mu.Unlock()
	if err == nil && stored.Closed {
		s.forget(rw, pr.Number, stored.ClosedAt)
	}
	if err == nil && stored.Stopped {
		s.forget(rw, pr.Number, time.Time{}) // "/prloop stop": its memo must not time out
	}
	return err
}

// flush publishes the events in rec's outbox, oldest first, and then takes
// them out of the stored record. It stops at the first event it cannot
// publish: the rest wait behind it, so a PR's events keep their order, and
// whoever touches the PR next tries again.
func (s *Service) flush(ctx context.Context, pr ghref.PR, rec state.PR, log *slog.Logger) (state.PR, error) {
	if len(rec.Outbox) == 0 {
		return rec, nil
	}
	sent := make(map[string]bool, len(rec.Outbox))
	for _, ev := range rec.Outbox {
		dup, err := s.emit.Send(ctx, ev)
		if err != nil {
			return rec, err
		}
		sent[ev.ID()] = true
		if !dup {
			s.d.Metrics.Transition(events.Type(ev.Type()))
			log.Info("published", "type", ev.Type(), "id", ev.ID(), "head", ghref.EventSHA(rec.HeadSHA))
		}
	}
	return s.d.Store.Update(ctx, pr, func(p *state.PR) error {
		kept := slices.DeleteFunc(slices.Clone(p.Outbox), func(ev cloudevents.Event) bool { return sent[ev.ID()] })
		if len(kept) == len(p.Outbox) {
			return state.ErrNoChange
		}
		p.Outbox = kept
		return nil
	})
}

// flushAll publishes what the outboxes of recs still hold: events decided
// before a crash, and not yet known to be published.
func (s *Service) flushAll(ctx context.Context, recs []state.PR) error {
	for _, r := range recs {
		if len(r.Outbox) == 0 {
			continue
		}
		if _, err := s.flush(ctx, r.PR, r, s.d.Log.With("pr", r.PR.String())); err != nil {
			return err
		}
	}
	return nil
}

// checkTimeout publishes a due ReviewTimeout for an unchanged PR, and what
// its outbox still holds (a publish that failed).
func (s *Service) checkTimeout(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	rw.mu.Lock()
	memo := rw.memo[pr.Number]
	rw.mu.Unlock()
	tm := s.timingOf(pr.RepoRef(), memo.BaseRef)
	if len(memo.Outbox) == 0 && len(timeout(&memo, s.d.Now(), tm)) == 0 {
		return nil
	}
	return s.apply(ctx, rw, pr, log, func(cur state.PR) Decision {
		emits := timeout(&cur, s.d.Now(), tm)
		return Decision{Emits: emits, Next: cur, Hold: len(emits) == 0}
	})
}

// closed records that pr was closed or merged and stops evaluating it;
// PRClosed is published unless prloop merged it.
func (s *Service) closed(ctx context.Context, rw *repoWatch, pr ghref.PR, log *slog.Logger) error {
	p, err := s.getPull(ctx, pr)
	if errors.Is(err, github.ErrNotFound) {
		s.forget(rw, pr.Number, time.Time{})
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
			Parts: []string{ghref.EventSHA(next.HeadSHA), strconv.Itoa(next.Transitions)},
		}}}
	})
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
