package merger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/review"
)

func TestCheckApproval(t *testing.T) {
	t.Parallel()
	const approved, made, other = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"
	anchor := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	after, before := anchor.Add(time.Minute), anchor.Add(-time.Minute)
	alice, mallory := review.User{Login: "alice"}, review.User{Login: "mallory"}
	thumb := func(u review.User, at time.Time) review.Reaction {
		return review.Reaction{ID: 1, Content: "+1", User: u, CreatedAt: at}
	}
	rev := func(state, commit string) review.Review {
		return review.Review{ID: 2, User: alice, State: state, CommitID: commit, SubmittedAt: after}
	}
	tests := []struct {
		name string
		sig  review.Signals
		in   ApprovalInput
		want bool
	}{
		{name: "no signals: a forged event approves nothing", in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a 👍 after the anchor approves", sig: review.Signals{Reactions: []review.Reaction{thumb(alice, after)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}, want: true},
		{name: "a 👍 before the anchor does not", sig: review.Signals{Reactions: []review.Reaction{thumb(alice, before)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a 👍 without a known anchor does not", sig: review.Signals{Reactions: []review.Reaction{thumb(alice, after)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved}},
		{name: "an unauthorized 👍 does not", sig: review.Signals{Reactions: []review.Reaction{thumb(mallory, after)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "the author's 👍 does not", sig: review.Signals{Reactions: []review.Reaction{thumb(alice, after)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor, Author: "alice"}},
		{name: "an APPROVED review on the head approves without an anchor", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", approved)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved}, want: true},
		{name: "an APPROVED review of another commit does not", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", other)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a carried approval stands on prloop's head", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", approved)}},
			in: ApprovalInput{ApprovedHead: approved, Head: made, Anchor: anchor}, want: true},
		{name: "changes requested on prloop's head withdraw a carried approval", sig: review.Signals{Reviews: []review.Review{
			rev("APPROVED", approved), {ID: 3, User: review.User{Login: "bob"}, State: "CHANGES_REQUESTED", CommitID: made, SubmittedAt: after},
		}}, in: ApprovalInput{ApprovedHead: approved, Head: made, Anchor: anchor}},
		{name: "a dismissed review withdraws", sig: review.Signals{Reviews: []review.Review{
			rev("APPROVED", approved), {ID: 4, User: alice, State: "DISMISSED", CommitID: approved, SubmittedAt: after.Add(time.Minute)},
		}}, in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a 👍 then the same reviewer's native request for changes withdraws", sig: review.Signals{
			Reactions: []review.Reaction{thumb(alice, after)},
			Reviews:   []review.Review{{ID: 5, User: alice, State: "CHANGES_REQUESTED", CommitID: approved, SubmittedAt: after.Add(time.Minute)}},
		}, in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a native approval then the same reviewer's comment withdraws", sig: review.Signals{
			Reviews:  []review.Review{rev("APPROVED", approved)},
			Comments: []review.Comment{{ID: 6, User: alice, Body: "wait, this breaks X", CreatedAt: after.Add(time.Minute)}},
		}, in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor}},
		{name: "a PR retargeted since its approval is refused", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", approved)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor, ApprovedBase: "main", Base: "release"}},
		{name: "an approval for the base the PR targets stands", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", approved)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor, ApprovedBase: "release", Base: "release"}, want: true},
		{name: "an approval from before the retarget does not count", sig: review.Signals{Reviews: []review.Review{rev("APPROVED", approved)}},
			in: ApprovalInput{ApprovedHead: approved, Head: approved, Anchor: anchor, ApprovedBase: "release", Base: "release", BaseSince: after.Add(time.Minute)}},
	}
	pol := review.Policy{Protocols: []review.Protocol{review.ProtocolEmoji, review.ProtocolReviews}, Self: "prloop"}
	authz := func(login string) bool { return login == "alice" || login == "bob" }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := CheckApproval(tt.sig, tt.in, pol, authz)
			assert.Equal(t, tt.want, got.Approved, got.Why)
			if !tt.want {
				assert.NotEmpty(t, got.Why)
				assert.NotEmpty(t, got.Reason)
			}
		})
	}
}
