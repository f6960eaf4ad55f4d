package feedback

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
)

// Telling the reviewers that a fix is ready (PRLOOP_NOTIFY_REVIEWERS):
// after PRFeedbackAddressed, the reviewers whose change-requesting review
// the fix addresses are asked to review again, people who asked by comment
// are mentioned, every inline thread the fix addressed gets a reply, and
// one comment says what the agent changed. Who is told is decided from the
// feedback when it is gathered (audienceOf) and kept in the record, since a
// resume after the push gathers nothing; what is still to do is decided
// from what GitHub shows (decideNotice). Both are pure; notify carries
// them out.

// summaryMaxBytes bounds the agent's summary in the comment: its tail,
// where an agent says what it did, is kept.
const summaryMaxBytes = 4000

// Audience is whom a fix's note is for.
type Audience struct {
	// Rerequest are the humans whose review (a change request, or inline
	// comments, which GitHub files as a review) the fix addresses: GitHub
	// is asked for their review again.
	Rerequest []string `json:"rerequest,omitempty"`
	// Mention are the humans who asked by conversation comment only: the
	// comment mentions them.
	Mention []string `json:"mention,omitempty"`
	// Threads are the first comments of the inline threads the fix
	// addressed, humans' and quorum bots' alike: each gets a reply.
	Threads []int64 `json:"threads,omitempty"`
}

// audienceOf decides whom the note about a fix of items is for. Bots (by
// login, or named in the quorum) are never re-requested nor mentioned: a
// mention is how one bot starts another, and the quorum bots review a new
// head by themselves.
func audienceOf(items []review.Item, quorum []review.Reviewer) Audience {
	bot := func(login string) bool {
		return review.User{Login: login}.IsBot() || slices.ContainsFunc(quorum, func(r review.Reviewer) bool { return strings.EqualFold(r.Login, login) })
	}
	var a Audience
	reviewed, commented := map[string]bool{}, []string{}
	for _, it := range items {
		if it.Kind == review.KindReviewComment {
			root := it.ID
			if it.InReplyTo != 0 {
				root = it.InReplyTo
			}
			if !slices.Contains(a.Threads, root) {
				a.Threads = append(a.Threads, root)
			}
		}
		if it.Author == "" || bot(it.Author) {
			continue
		}
		switch key := strings.ToLower(it.Author); it.Kind {
		case review.KindReview, review.KindReviewComment:
			if !reviewed[key] {
				reviewed[key] = true
				a.Rerequest = append(a.Rerequest, it.Author)
			}
		default:
			if !slices.ContainsFunc(commented, func(s string) bool { return strings.EqualFold(s, it.Author) }) {
				commented = append(commented, it.Author)
			}
		}
	}
	for _, c := range commented {
		if !reviewed[strings.ToLower(c)] {
			a.Mention = append(a.Mention, c)
		}
	}
	slices.Sort(a.Threads)
	return a
}

// mentionInstead moves the logins GitHub would not ask for a review from
// Rerequest to Mention.
func (a Audience) mentionInstead(logins []string) Audience {
	out := Audience{Threads: a.Threads, Mention: slices.Clone(a.Mention)}
	for _, r := range a.Rerequest {
		if slices.Contains(logins, r) {
			out.Mention = append(out.Mention, r)
		} else {
			out.Rerequest = append(out.Rerequest, r)
		}
	}
	return out
}

// noticeFacts are what decideNotice weighs.
type noticeFacts struct {
	Audience Audience
	// Head is the fix's head, Cycle its number (1 for the first fix).
	Head  string
	Cycle int
	// Conflict is the base branch when the fix resolved a conflict with
	// it (plan_conflict.go) rather than review feedback.
	Conflict string
	// Summary is what the agent printed, unsanitised.
	Summary string
	// Requested are the reviewers GitHub shows as requested now.
	Requested []string
	// Posted says the comment with Head's marker is on the PR; Replied
	// holds the threads that have a reply with Head's marker.
	Posted  bool
	Replied map[int64]bool
}

// reply is one answer in an inline thread.
type reply struct {
	Thread int64
	Body   string
}

// notice is what is left to do to tell the reviewers.
type notice struct {
	Rerequest []string
	Replies   []reply
	// Comment is the note to post; "" when it is there.
	Comment string
}

// empty reports whether nothing is left to do.
func (n notice) empty() bool {
	return len(n.Rerequest) == 0 && len(n.Replies) == 0 && n.Comment == ""
}

// decideNotice decides what is left to do. The comment goes last and
// marks the whole note done: once it is on the PR, a redelivery or a resume
// does nothing, and before, each part is done unless GitHub shows it done.
func decideNotice(f noticeFacts) notice {
	if f.Posted {
		return notice{}
	}
	var n notice
	for _, login := range f.Audience.Rerequest {
		if !slices.ContainsFunc(f.Requested, func(r string) bool { return strings.EqualFold(r, login) }) {
			n.Rerequest = append(n.Rerequest, login)
		}
	}
	for _, th := range f.Audience.Threads {
		if !f.Replied[th] {
			n.Replies = append(n.Replies, reply{Thread: th, Body: replyMarker(f.Head) + "\naddressed in " + ghref.ShortSHA(f.Head)})
		}
	}
	n.Comment = renderNote(f)
	return n
}

// noteMarker is the hidden first line of the note about head; replyMarker
// that of a reply in a thread. Both carry review.OwnMarker, so that no
// prloop takes them for a change request.
func noteMarker(head string) string  { return review.OwnMarker + "notify head=" + head + " -->" }
func replyMarker(head string) string { return review.OwnMarker + "notify-reply head=" + head + " -->" }

// renderNote is the comment: the new head, the fix cycle, whom it is for,
// and the agent's own account, sanitised, bounded and fenced so that it
// can neither hide text, mention anyone nor break out of its block.
func renderNote(f noticeFacts) string {
	var b strings.Builder
	b.WriteString(noteMarker(f.Head) + "\n")
	if f.Conflict != "" {
		fmt.Fprintf(&b, "**prloop resolved a conflict** with %s: %s (fix cycle %d). The coding agent wrote the resolution; it needs review again.\n",
			SanitizeLine(f.Conflict), ghref.ShortSHA(f.Head), f.Cycle)
	} else {
		fmt.Fprintf(&b, "**prloop pushed a fix** for the review feedback: %s (fix cycle %d).\n", ghref.ShortSHA(f.Head), f.Cycle)
	}
	if len(f.Audience.Mention) > 0 {
		b.WriteString("\n")
		for _, m := range f.Audience.Mention {
			b.WriteString("@" + m + " ")
		}
		b.WriteString("your comments were addressed; please have another look.\n")
	}
	if len(f.Audience.Rerequest) > 0 {
		fmt.Fprintf(&b, "\nReview requested again from %s.\n", strings.Join(f.Audience.Rerequest, ", "))
	}
	summary := tail(Sanitize(f.Summary), summaryMaxBytes)
	if summary == "" {
		b.WriteString("\nThe agent left no summary of its change.\n")
	} else {
		b.WriteString("\nWhat the agent says it changed:\n\n" + Fence(summary) + "\n")
	}
	return b.String()
}

// tail keeps the last n bytes of s, on a rune boundary, saying so.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = "[… earlier output left out]\n"
	cut := len(s) - max(0, n-len(note))
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return note + s[cut:]
}
