package review

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
)

// Evaluate computes the PR's review status from its signals. It is pure and
// cheap; authorized is called at most once per distinct human login.
func Evaluate(sig Signals, head Head, pol Policy, authorized Authorizer) Verdict {
	e := evaluator{sig: sig, head: head, pol: pol, authorized: authorized, cache: map[string]bool{}}
	best := Verdict{Status: events.StatusPending}
	var feedback, ignored []Item
	for _, p := range pol.Protocols {
		var v Verdict
		switch p {
		case ProtocolEmoji:
			v = e.emoji()
		case ProtocolReviews:
			v = e.reviews()
		case ProtocolQuorum:
			v = e.quorum()
			best.Quorum = v.Quorum
		default:
			continue
		}
		feedback = append(feedback, v.Feedback...)
		ignored = append(ignored, v.Ignored...)
		if v.Status.Rank() > best.Status.Rank() {
			best.Status, best.Actor, best.Approvers = v.Status, v.Actor, v.Approvers
		}
	}
	best.Feedback = Dedupe(feedback)
	if len(ignored) > 0 {
		best.Ignored = Dedupe(ignored)
	}
	return best
}

type evaluator struct {
	sig        Signals
	head       Head
	pol        Policy
	authorized Authorizer
	cache      map[string]bool
}

// human reports whether u is an authorized human reviewer.
func (e *evaluator) human(u User) bool {
	if u.Login == "" || u.IsBot() || strings.EqualFold(u.Login, e.head.Author) || strings.EqualFold(u.Login, e.pol.Self) {
		return false
	}
	key := strings.ToLower(u.Login)
	ok, seen := e.cache[key]
	if !seen {
		ok = e.authorized != nil && e.authorized(u.Login)
		e.cache[key] = ok
	}
	return ok
}

// addressed reports whether a fix already addressed the item.
func (e *evaluator) addressed(kind string, id int64) bool {
	return e.head.Addressed[ItemKey(kind, id)]
}

// fresh reports whether a signal made at t is on the current head. GitHub
// timestamps have whole seconds, so the anchor is compared at that
// precision: a comment in the same second as the push counts.
func (e *evaluator) fresh(t time.Time) bool {
	return !t.Before(e.head.Anchor.Truncate(time.Second))
}

func (e *evaluator) emoji() Verdict {
	var approvers []string
	eyes := ""
	for _, r := range e.sig.Reactions {
		if !e.human(r.User) {
			continue
		}
		switch r.Content {
		case "+1":
			if e.fresh(r.CreatedAt) || e.pol.ApprovalSurvivesPush {
				approvers = appendUnique(approvers, r.User.Login)
			}
		case "eyes":
			if e.fresh(r.CreatedAt) && eyes == "" {
				eyes = r.User.Login
			}
		}
	}
	var items []Item
	for _, c := range e.sig.Comments {
		if e.human(c.User) && !IsOwn(c.Body) && e.fresh(c.CreatedAt) && !e.addressed(KindComment, c.ID) {
			items = append(items, Item{Kind: KindComment, ID: c.ID, Author: c.User.Login, Body: c.Body, CreatedAt: c.CreatedAt, URL: c.URL})
		}
	}
	for _, c := range e.sig.ReviewComments {
		if e.human(c.User) && !IsOwn(c.Body) && e.fresh(c.CreatedAt) && !e.addressed(KindReviewComment, c.ID) {
			items = append(items, inlineItem(c))
		}
	}
	switch {
	case len(approvers) > 0:
		return Verdict{Status: events.StatusApproved, Actor: approvers[0], Approvers: approvers}
	case eyes != "":
		return Verdict{Status: events.StatusInProgress, Actor: eyes}
	case len(items) > 0:
		return Verdict{Status: events.StatusChangesRequested, Actor: items[0].Author, Feedback: items}
	}
	return Verdict{Status: events.StatusPending}
}

func (e *evaluator) reviews() Verdict {
	latest := map[string]Review{}
	for _, r := range e.sig.Reviews {
		switch r.State {
		case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
		default:
			continue // COMMENTED and PENDING do not change a reviewer's verdict
		}
		if !e.human(r.User) || IsOwn(r.Body) {
			continue
		}
		key := strings.ToLower(r.User.Login)
		if cur, ok := latest[key]; !ok || later(r, cur) {
			latest[key] = r
		}
	}
	logins := make([]string, 0, len(latest))
	for k := range latest {
		logins = append(logins, k)
	}
	sort.Strings(logins)

	var approvers []string
	var items []Item
	for _, k := range logins {
		r := latest[k]
		onHead := r.CommitID == e.head.SHA
		switch {
		case r.State == "APPROVED" && (onHead || e.pol.ApprovalSurvivesPush):
			approvers = append(approvers, r.User.Login)
		case r.State == "CHANGES_REQUESTED" && onHead && !e.addressed(KindReview, r.ID):
			items = append(items, e.reviewItems(r)...)
		}
	}
	switch {
	case len(approvers) > 0:
		return Verdict{Status: events.StatusApproved, Actor: approvers[0], Approvers: approvers}
	case len(items) > 0:
		return Verdict{Status: events.StatusChangesRequested, Actor: items[0].Author, Feedback: items}
	}
	return Verdict{Status: events.StatusPending}
}

// reviewItems returns a change-requesting review's body and inline comments.
func (e *evaluator) reviewItems(r Review) []Item {
	items := []Item{{Kind: KindReview, ID: r.ID, Author: r.User.Login, Body: r.Body, CreatedAt: r.SubmittedAt, URL: r.URL}}
	for _, c := range e.sig.ReviewComments {
		if c.ReviewID == r.ID && !IsOwn(c.Body) {
			items = append(items, inlineItem(c))
		}
	}
	return items
}

func (e *evaluator) quorum() Verdict {
	q := &QuorumResult{Failed: map[string]string{}}
	var items, ignored []Item
	for _, req := range e.pol.Quorum {
		resp := e.responses(req)
		if len(resp) == 0 {
			q.Missing = append(q.Missing, req.String())
			continue
		}
		q.Responded = append(q.Responded, req.String())
		for _, it := range resp {
			if m := matchFailure(it.Body, e.pol.FailurePatterns); m != "" {
				q.Failed[req.String()] = m
			}
			if !it.finding || e.addressed(it.Kind, it.ID) {
				continue
			}
			c := Classify(it.Item, e.pol.FindingIgnore)
			it.Why = c.Reason
			if c.Actionable {
				items = append(items, it.Item)
			} else {
				ignored = append(ignored, it.Item)
			}
		}
	}
	v := Verdict{Quorum: q, Ignored: ignored}
	switch {
	case len(q.Missing) == 0 && len(e.pol.Quorum) > 0 && len(q.Failed) == 0:
		if len(items) > 0 {
			v.Status, v.Actor, v.Feedback = events.StatusChangesRequested, items[0].Author, items
		} else {
			v.Status, v.Approvers = events.StatusApproved, q.Responded
			v.Actor = strings.Join(q.Responded, ",")
		}
	case len(q.Responded) > 0:
		v.Status, v.Actor = events.StatusInProgress, q.Responded[0]
	default:
		v.Status = events.StatusPending
	}
	return v
}

type response struct {
	Item
	finding bool
}

// responses collects a quorum reviewer's signals on the current head.
// Inline comments are findings; so is the body of a review that requests
// changes. Summaries (issue comments, other review bodies) are responses but
// not findings.
func (e *evaluator) responses(req Reviewer) []response {
	mine := func(u User, body string) bool {
		return strings.EqualFold(u.Login, req.Login) && !IsOwn(body) && (req.Marker == "" || strings.Contains(body, req.Marker))
	}
	var out []response
	reviewIDs := map[int64]bool{}
	for _, r := range e.sig.Reviews {
		if r.CommitID != e.head.SHA || !mine(r.User, r.Body) {
			continue
		}
		reviewIDs[r.ID] = true
		out = append(out, response{
			Item:    Item{Kind: KindReview, ID: r.ID, Author: r.User.Login, Body: r.Body, CreatedAt: r.SubmittedAt, URL: r.URL},
			finding: r.State == "CHANGES_REQUESTED",
		})
	}
	for _, c := range e.sig.ReviewComments {
		if !strings.EqualFold(c.User.Login, req.Login) || IsOwn(c.Body) || !e.fresh(c.CreatedAt) {
			continue
		}
		// With a marker, an inline comment belongs to the reviewer when its
		// review carried the marker, or it carries the marker itself.
		if req.Marker != "" && !reviewIDs[c.ReviewID] && !strings.Contains(c.Body, req.Marker) {
			continue
		}
		out = append(out, response{Item: inlineItem(c), finding: true})
	}
	for _, c := range e.sig.Comments {
		if mine(c.User, c.Body) && e.fresh(c.CreatedAt) {
			out = append(out, response{Item: Item{Kind: KindComment, ID: c.ID, Author: c.User.Login, Body: c.Body, CreatedAt: c.CreatedAt, URL: c.URL}})
		}
	}
	return out
}

func matchFailure(body string, patterns []string) string {
	lower := strings.ToLower(body)
	for _, p := range patterns {
		if p != "" && strings.Contains(lower, strings.ToLower(p)) {
			return p
		}
	}
	return ""
}

func inlineItem(c ReviewComment) Item {
	return Item{Kind: KindReviewComment, ID: c.ID, Author: c.User.Login, Path: c.Path, Line: c.Line, Body: c.Body, DiffHunk: c.DiffHunk, CreatedAt: c.CreatedAt, URL: c.URL, InReplyTo: c.InReplyTo}
}

func later(a, b Review) bool {
	if !a.SubmittedAt.Equal(b.SubmittedAt) {
		return a.SubmittedAt.After(b.SubmittedAt)
	}
	return a.ID > b.ID
}

func appendUnique(list []string, s string) []string {
	if slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) }) {
		return list
	}
	return append(list, s)
}

// messageKeyLen is how much of a message's start identifies it when
// deduplicating: reviewers quoting the same finding rarely agree beyond it.
const messageKeyLen = 64

// Dedupe drops items that repeat an earlier one: the same file:line (or
// none) and the same start of the message, compared case- and
// space-insensitively. The result is ordered oldest first.
func Dedupe(items []Item) []Item {
	sorted := slices.Clone(items)
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].CreatedAt.Equal(sorted[j].CreatedAt) {
			return sorted[i].CreatedAt.Before(sorted[j].CreatedAt)
		}
		return sorted[i].ID < sorted[j].ID
	})
	seen := map[string]bool{}
	out := sorted[:0]
	for _, it := range sorted {
		key := it.Location() + "\x00" + messageKey(it.Body)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, it)
	}
	return out
}

func messageKey(body string) string {
	s := strings.Join(strings.Fields(strings.ToLower(body)), " ")
	if len(s) > messageKeyLen {
		s = s[:messageKeyLen]
	}
	return s
}
