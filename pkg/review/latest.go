package review

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// stance is what one signal says of its reviewer's verdict.
type stance int

const (
	// stanceNone: the signal approves nothing now (an approval of another
	// head or base, a dismissed review) but replaces what its reviewer
	// said before it.
	stanceNone stance = iota
	// stanceApprove: the reviewer approves the head.
	stanceApprove
	// stanceRequest: the reviewer asks for changes (its items say which).
	stanceRequest
)

// signal is one act of a reviewer that bears on their verdict, from any
// protocol, with the time GitHub recorded for it.
type signal struct {
	login  string
	at     time.Time
	stance stance
	// items are what a change request asks.
	items []Item
}

// reviewerVerdict is a reviewer's current verdict.
type reviewerVerdict struct {
	login  string
	stance stance
	// at is when the reviewer's latest signal was made.
	at time.Time
	// items are, for a change request, everything the reviewer asked since
	// their last signal that was not a change request.
	items []Item
}

// latestVerdicts is the rule that a reviewer's latest signal wins, across
// protocols: a 👍 after a change request approves, and a change request (a
// native "Request changes" review, or a comment under the emoji protocol)
// after a 👍 or an APPROVED review withdraws the approval. Signals are
// ordered by the time GitHub recorded for them; at the same second a change
// request comes last (the safe side: GitHub's timestamps have whole
// seconds, and a withdrawal must not lose to an approval it may have
// followed). A reviewer's consecutive change requests add up. Logins are
// compared case-insensitively; the result is ordered by the time of each
// reviewer's latest signal, then by login. It is pure.
func latestVerdicts(signals []signal) []reviewerVerdict {
	sorted := slices.Clone(signals)
	slices.SortStableFunc(sorted, func(a, b signal) int {
		if c := a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)); c != 0 {
			return c
		}
		return cmp.Compare(a.stance, b.stance)
	})
	byLogin := map[string]*reviewerVerdict{}
	for _, s := range sorted {
		key := strings.ToLower(s.login)
		v, ok := byLogin[key]
		if !ok {
			v = &reviewerVerdict{login: s.login}
			byLogin[key] = v
		}
		if s.stance == stanceRequest && v.stance == stanceRequest {
			v.items = append(v.items, s.items...)
		} else {
			v.stance, v.items = s.stance, slices.Clone(s.items)
		}
		v.at = s.at
	}
	out := make([]reviewerVerdict, 0, len(byLogin))
	for _, v := range byLogin {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b reviewerVerdict) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(strings.ToLower(a.login), strings.ToLower(b.login))
	})
	return out
}
