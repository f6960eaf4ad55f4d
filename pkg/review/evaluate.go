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
//
// Each authorized human's verdict is their latest signal across the
// enabled protocols (latestVerdicts): a 👍 or an APPROVED review approves, a
// comment or a CHANGES_REQUESTED review on the head asks for changes, and
// whichever GitHub recorded last is what the reviewer says now. The quorum
// answers as one reviewer. Then any current change request blocks (the
// status is changes requested, or in review while a 👀 or an incomplete
// quorum holds the change requests back until the review is done); without
// one, any approval approves; else a 👀 or a partial quorum means in review.
func Evaluate(sig Signals, head Head, pol Policy, authorized Authorizer) Verdict {
	e := evaluator{sig: sig, head: head, pol: pol, authorized: authorized, cache: map[string]bool{}}
	var signals []signal
	var eyes string
	var q Verdict
	for _, p := range pol.Protocols {
		switch p {
		case ProtocolEmoji:
			signals = append(signals, e.emoji()...)
			eyes = e.eyes()
		case ProtocolReviews:
			signals = append(signals, e.reviews()...)
		case ProtocolQuorum:
			q = e.quorum()
		}
	}
	var approvers []string
	var requests []Item
	for _, v := range latestVerdicts(signals) {
		switch v.stance {
		case stanceApprove:
			approvers = appendUnique(approvers, v.login)
		case stanceRequest:
			requests = append(requests, v.items...)
		}
	}
	quorumApproves := q.Status == events.StatusApproved
	if q.Status == events.StatusChangesRequested {
		requests = append(requests, q.Feedback...)
	}
	held := eyes != "" || q.Status == events.StatusInProgress
	out := Verdict{Status: events.StatusPending, Quorum: q.Quorum, Feedback: Dedupe(requests)}
	if len(q.Ignored) > 0 {
		out.Ignored = Dedupe(q.Ignored)
	}
	if len(out.Feedback) == 0 {
		out.Feedback = nil
	}
	holder := eyes
	if holder == "" {
		holder = q.Actor
	}
	switch {
	case len(out.Feedback) > 0 && held:
		out.Status, out.Actor = events.StatusInProgress, holder
	case len(out.Feedback) > 0:
		out.Status, out.Actor = events.StatusChangesRequested, out.Feedback[0].Author
	case len(approvers) > 0:
		out.Status, out.Actor, out.Approvers = events.StatusApproved, approvers[0], approvers
		if quorumApproves {
			out.Approvers = append(out.Approvers, q.Approvers...)
		}
	case quorumApproves:
		out.Status, out.Actor, out.Approvers = events.StatusApproved, q.Actor, q.Approvers
	case held:
		out.Status, out.Actor = events.StatusInProgress, holder
	}
	return out
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
	if !eligible(u, e.head, e.pol) {
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

// onBase reports whether an approval made at t was made for the PR's
// current base: no earlier than the moment prloop saw the PR retargeted.
func (e *evaluator) onBase(t time.Time) bool {
	return !t.Before(e.head.BaseSince.Truncate(time.Second))
}

// approval is the signal an approving act at t gives: it approves when it
// was made on the head (or survives the push) and for the current base;
// otherwise it approves nothing now but still replaces what its reviewer
// said before (they withdrew that, and must approve again).
func (e *evaluator) approval(login string, at time.Time, onHead bool) signal {
	st := stanceNone
	if (onHead || e.pol.ApprovalSurvivesPush) && e.onBase(at) {
		st = stanceApprove
	}
	return signal{login: login, at: at, stance: st}
}

// emoji returns the emoji protocol's signals: each 👍 approves, each fresh
// comment or inline comment asks for changes (unless prloop posted it, a fix
// addressed it, or it belongs to the same reviewer's APPROVED review, whose
// notes are part of the approval).
func (e *evaluator) emoji() []signal {
	var out []signal
	for _, r := range e.sig.Reactions {
		if r.Content == "+1" && e.human(r.User) {
			out = append(out, e.approval(r.User.Login, r.CreatedAt, e.fresh(r.CreatedAt)))
		}
	}
	for _, c := range e.sig.Comments {
		// A "/prloop" command talks to prloop: it never asks for changes.
		if e.human(c.User) && !IsOwn(c.Body) && !IsCommand(c.Body) && e.fresh(c.CreatedAt) && !e.addressed(KindComment, c.ID) {
			it := Item{Kind: KindComment, ID: c.ID, Author: c.User.Login, Body: c.Body, CreatedAt: c.CreatedAt, URL: c.URL}
			out = append(out, signal{login: c.User.Login, at: c.CreatedAt, stance: stanceRequest, items: []Item{it}})
		}
	}
	approving := map[int64]string{}
	for _, r := range e.sig.Reviews {
		if r.State == "APPROVED" {
			approving[r.ID] = strings.ToLower(r.User.Login)
		}
	}
	for _, c := range e.sig.ReviewComments {
		if owner, ok := approving[c.ReviewID]; ok && owner == strings.ToLower(c.User.Login) {
			continue
		}
		if e.human(c.User) && !IsOwn(c.Body) && e.fresh(c.CreatedAt) && !e.addressed(KindReviewComment, c.ID) {
			out = append(out, signal{login: c.User.Login, at: c.CreatedAt, stance: stanceRequest, items: []Item{inlineItem(c)}})
		}
	}
	return out
}

// eyes returns the first authorized human whose fresh 👀 says a review is
// under way, or "".
func (e *evaluator) eyes() string {
	for _, r := range e.sig.Reactions {
		if r.Content == "eyes" && e.human(r.User) && e.fresh(r.CreatedAt) {
			return r.User.Login
		}
	}
	return ""
}

// reviews returns the native reviews' signals: an APPROVED review
// approves its commit, a CHANGES_REQUESTED review on the head asks for
// changes until a fix addresses it, and a DISMISSED one withdraws what its
// reviewer said before it. COMMENTED and PENDING reviews say nothing, and a
// change request on an earlier head was answered by the push that replaced
// it.
func (e *evaluator) reviews() []signal {
	var out []signal
	for _, r := range e.sig.Reviews {
		if !e.human(r.User) || IsOwn(r.Body) {
			continue
		}
		onHead := r.CommitID == e.head.SHA
		switch r.State {
		case "APPROVED":
			out = append(out, e.approval(r.User.Login, r.SubmittedAt, onHead))
		case "CHANGES_REQUESTED":
			if onHead && !e.addressed(KindReview, r.ID) {
				out = append(out, signal{login: r.User.Login, at: r.SubmittedAt, stance: stanceRequest, items: e.reviewItems(r)})
			}
		case "DISMISSED":
			out = append(out, signal{login: r.User.Login, at: r.SubmittedAt, stance: stanceNone})
		}
	}
	return out
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
		if !slices.ContainsFunc(resp, func(r response) bool { return e.onBase(r.CreatedAt) }) {
			// No response, or none since the PR was retargeted: a review
			// of the head on another base approves nothing here.
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
