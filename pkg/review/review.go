// Package review decides a pull request's review status from the signals
// reviewers leave on it. It is pure: the poller and the feedback service
// gather the signals from GitHub and call it, so both apply the same rules.
//
// Three protocols can be enabled together, and they are one conversation:
// each reviewer's latest signal across them is their verdict, by the time
// GitHub recorded it (a "Request changes" review after a 👍 withdraws the
// 👍), and any current change request from an authorized reviewer or the
// quorum blocks every approval (see Evaluate):
//
//   - emoji: reactions on the PR itself. 👀 (eyes) means in review (it holds
//     change requests back until the review is done), 👍 (+1) approved; a
//     reviewer's comments ask for changes.
//   - reviews: GitHub's native reviews; an APPROVED review approves its
//     commit, a CHANGES_REQUESTED review on the current head asks for
//     changes, a dismissed one withdraws what its reviewer said before.
//   - quorum: a set of bot reviewers that must all respond on the current
//     head; an actionable finding (an inline comment, or a review that
//     requests changes, that Classify finds actionable) means changes
//     requested, none means approved. Findings Classify sets aside are
//     listed in Verdict.Ignored and ask for nothing.
//
// Rules naive review bots get wrong and this package gets right:
//
//   - An approval is for a head on a base: once the PR is retargeted
//     (Head.BaseSince), only approvals given since count.
//   - Signals are anchored to the head: only those newer than the head's
//     anchor count (for reviews, also commit_id equal to the head SHA), so a
//     comment already answered by a pushed fix does not ask for it again and
//     a 👍 given before the latest push does not approve it.
//   - Only authorized reviewers count; the PR's author and prloop's own
//     account never do; bots only when named in the quorum.
//   - prloop's own comments (those carrying OwnMarker) never count, whoever
//     posted them: another prloop on the same repository, under another
//     login, must not take this one's "fix ready" note for a change request.
package review

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
)

// Protocol names a review protocol.
type Protocol string

// The review protocols (PRLOOP_REVIEW_PROTOCOLS).
const (
	ProtocolEmoji   Protocol = "emoji"
	ProtocolReviews Protocol = "reviews"
	ProtocolQuorum  Protocol = "quorum"
)

// User is the author of a signal.
type User struct {
	Login string
	// Bot is set for GitHub App and bot accounts (type "Bot" or a login
	// ending in "[bot]").
	Bot bool
}

// IsBot reports whether u is a bot, by account type or by login.
func (u User) IsBot() bool { return u.Bot || strings.HasSuffix(u.Login, "[bot]") }

// Reaction is an emoji reaction on the PR.
type Reaction struct {
	ID        int64
	Content   string // "+1", "eyes", …
	User      User
	CreatedAt time.Time
}

// Comment is a PR conversation comment (an issue comment).
type Comment struct {
	ID        int64
	User      User
	Body      string
	CreatedAt time.Time
	URL       string
	// Association is GitHub's author_association of the comment (OWNER,
	// MEMBER, COLLABORATOR, CONTRIBUTOR, NONE …): whether its author is a
	// collaborator, for answering a command (Collaborator).
	Association string
}

// Collaborator reports whether the comment's author belongs to the
// repository (owner, organisation member or collaborator) by GitHub's
// author_association: whom prloop answers when it refuses a command.
func (c Comment) Collaborator() bool {
	switch c.Association {
	case "OWNER", "MEMBER", "COLLABORATOR":
		return true
	}
	return false
}

// Review is a native GitHub review.
type Review struct {
	ID          int64
	User        User
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
	Body        string
	CommitID    string
	SubmittedAt time.Time
	URL         string
}

// ReviewComment is an inline comment on the diff.
type ReviewComment struct {
	ID        int64
	ReviewID  int64
	User      User
	Path      string
	Line      int
	Body      string
	DiffHunk  string
	CommitID  string
	CreatedAt time.Time
	InReplyTo int64
	URL       string
}

// Signals is everything reviewers left on one PR.
type Signals struct {
	Reactions      []Reaction
	Comments       []Comment
	Reviews        []Review
	ReviewComments []ReviewComment
}

// OwnMarker starts the hidden marker every comment prloop posts carries
// (the escalation comment, the note that a fix is ready, the replies in
// review threads): "<!-- prloop:<kind> … -->".
const OwnMarker = "<!-- prloop:"

// IsOwn reports whether body carries prloop's marker: a comment by prloop,
// under whatever login, which never asks for changes.
func IsOwn(body string) bool { return strings.Contains(body, OwnMarker) }

// Reviewer is a required quorum reviewer: a login, and optionally a marker
// text its comments carry (several bots may post as github-actions[bot]).
type Reviewer struct {
	Login  string
	Marker string
}

// String renders "login" or "login/marker", as PRLOOP_REQUIRED_REVIEWERS does.
func (r Reviewer) String() string {
	if r.Marker == "" {
		return r.Login
	}
	return r.Login + "/" + r.Marker
}

// ParseReviewers parses PRLOOP_REQUIRED_REVIEWERS: comma-separated entries
// of "login" or "login/marker text".
func ParseReviewers(s string) []Reviewer {
	var out []Reviewer
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		login, marker, _ := strings.Cut(part, "/")
		out = append(out, Reviewer{Login: strings.TrimSpace(login), Marker: strings.TrimSpace(marker)})
	}
	return out
}

// Policy is what the evaluation needs to know besides the signals.
type Policy struct {
	Protocols []Protocol
	// Quorum lists the required bot reviewers for the quorum protocol.
	Quorum []Reviewer
	// FailurePatterns mark a quorum reviewer's comment as a failed review
	// workflow (case-insensitive substrings).
	FailurePatterns []string
	// ApprovalSurvivesPush lets a 👍 or an APPROVED review given on an
	// earlier head approve the current one.
	ApprovalSurvivesPush bool
	// Self is prloop's own login; its signals never count.
	Self string
	// FindingIgnore are the compiled PRLOOP_FINDING_IGNORE patterns Classify
	// applies to quorum bots' findings; none leaves only its built-in rules.
	FindingIgnore []*regexp.Regexp
}

// DefaultFailurePatterns are the texts that mark a review bot's failure.
var DefaultFailurePatterns = []string{"API Error", "Timeout", "503", "workflow failed"}

// Head is the state of the PR that signals are judged against.
type Head struct {
	SHA string
	// Anchor is when SHA became the head; older signals do not count.
	Anchor time.Time
	// Author is the PR's author, whose signals never count.
	Author string
	// BaseSince is when prloop saw the PR move to its current base (zero:
	// it never moved while watched). An approval is for a head on a base:
	// no approval older than this counts, native reviews and
	// ApprovalSurvivesPush included, and quorum bots must respond again.
	// Change requests still count: they are about the head's code.
	BaseSince time.Time
	// Addressed holds the keys (ItemKey) of feedback a fix already
	// addressed: it never asks for changes again, whatever its timestamp.
	// Identity decides where it is known, not clocks with one-second
	// resolution.
	Addressed map[string]bool
}

// ItemKey identifies a piece of feedback across evaluations: its kind and
// GitHub's id (ids of different kinds may coincide).
func ItemKey(kind string, id int64) string { return kind + ":" + strconv.FormatInt(id, 10) }

// Key is the item's ItemKey.
func (it Item) Key() string { return ItemKey(it.Kind, it.ID) }

// Authorizer decides whether a human's signals count. Evaluate calls it only
// for non-bot users other than the PR's author and prloop itself; the
// caller decides on PRLOOP_REVIEWERS or repository permission.
type Authorizer func(login string) bool

// Item is one piece of feedback: a comment, an inline comment or a review
// body that asks for changes.
type Item struct {
	Kind      string // "comment", "review_comment", "review"
	ID        int64
	Author    string
	Path      string
	Line      int
	Body      string
	DiffHunk  string
	CreatedAt time.Time
	URL       string
	// InReplyTo is, for an inline comment that answers another, the
	// comment it answers: the thread a reply to it goes to.
	InReplyTo int64
	// Why is Classify's reason for a quorum bot's finding; empty for
	// humans' feedback, which is never classified.
	Why string
}

// Item kinds.
const (
	KindComment       = "comment"
	KindReviewComment = "review_comment"
	KindReview        = "review"
)

// Location is "path:line" for inline items, "" otherwise.
func (it Item) Location() string {
	if it.Path == "" {
		return ""
	}
	if it.Line <= 0 {
		return it.Path
	}
	return it.Path + ":" + strconv.Itoa(it.Line)
}

// QuorumResult says how the quorum stands.
type QuorumResult struct {
	Responded []string
	Missing   []string
	// Failed lists reviewers whose comment matched a failure pattern, with
	// the matching text.
	Failed map[string]string
}

// Verdict is the evaluation's outcome.
type Verdict struct {
	Status events.Status
	// Actor is who caused the status (the approver, the 👀 reviewer …).
	Actor string
	// Approvers lists everyone whose approval counts.
	Approvers []string
	// Feedback holds the change requests, deduplicated, oldest first.
	Feedback []Item
	// Ignored holds the quorum bots' findings Classify found not actionable
	// (each with its Why), deduplicated, oldest first: they request no
	// changes, and are listed so that people see what was set aside.
	Ignored []Item
	// Quorum is set when the quorum protocol is enabled.
	Quorum *QuorumResult
}

// CommentIDs returns the ids of comment and inline-comment feedback items.
func (v Verdict) CommentIDs() []int64 {
	var ids []int64
	for _, it := range v.Feedback {
		if it.Kind != KindReview {
			ids = append(ids, it.ID)
		}
	}
	return ids
}

// ReviewIDs returns the ids of review feedback items.
func (v Verdict) ReviewIDs() []int64 {
	var ids []int64
	for _, it := range v.Feedback {
		if it.Kind == KindReview {
			ids = append(ids, it.ID)
		}
	}
	return ids
}
