package merger

import (
	"strings"
	"testing"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
)

// TestMayLand_TheRuleRowByRow is the merge rule's table: each row a merge
// about to be made, and whether mayLand lets it. The rows named "finding
// N" are the cases of issue 28 that got through before the rule was one.
func TestMayLand_TheRuleRowByRow(t *testing.T) {
	t.Parallel()
	const (
		head    = "1111111111111111111111111111111111111111"
		other   = "2222222222222222222222222222222222222222"
		tip     = "3333333333333333333333333333333333333333"
		oldTip  = "4444444444444444444444444444444444444444"
		cand    = "5555555555555555555555555555555555555555"
		prevMrg = "6666666666666666666666666666666666666666"
	)
	status := func(ctx, state string) *gh.RepoStatus {
		return &gh.RepoStatus{Context: gh.String(ctx), State: gh.String(state)}
	}
	reports := func(sts ...*gh.RepoStatus) ChecksInput {
		return ChecksInput{Own: DefaultStatusContext, Combined: &gh.CombinedStatus{Statuses: sts}}
	}
	approved := ApprovalCheck{Approved: true, Approvers: []string{"alice"}}
	// serial is a merge the serial queue is about to make: the approved
	// head, containing the tip, green on ci.
	serial := func(edit func(*landing)) landing {
		l := landing{
			Head: head, Approved: head, Base: "main", ApprovedBase: "main", Approval: approved,
			Tested: head, TestedHead: head, BuiltOn: tip, Tip: tip,
			RequireChecks: true, Seen: []string{"ci"}, Reports: reports(status("ci", "success")),
		}
		if edit != nil {
			edit(&l)
		}
		return l
	}
	// speculative is the merge of the second PR of a batch on its own
	// candidate, after the first PR's merge left the base at prevMrg.
	speculative := func(edit func(*landing)) landing {
		l := serial(func(l *landing) {
			l.Tested, l.Candidate, l.BuiltOn, l.Tip = cand, true, prevMrg, prevMrg
		})
		if edit != nil {
			edit(&l)
		}
		return l
	}
	tests := []struct {
		name string
		in   landing
		want landRefusal
		why  string // a part of the refusal's words
	}{
		{name: "serial: the approved head holds the tip and passed CI", in: serial(nil), want: landAllowed},
		{name: "speculative: the PR's own candidate on the tip the previous merge left passed CI", in: speculative(nil), want: landAllowed},
		{name: "finding 1: a head behind a non-strict base (mergeable_state clean) is not the tree main gets",
			in: serial(func(l *landing) { l.BuiltOn = oldTip }), want: refusedTip, why: "built on 4444444"},
		{name: "finding 2: an approval withdrawn by the reviewer's later change request",
			in: serial(func(l *landing) { l.Approval = ApprovalCheck{Why: "alice requested changes"} }), want: refusedApproval, why: "alice requested changes"},
		{name: "finding 3: a prefix whose own candidate is pending, though the next one is green",
			in: speculative(func(l *landing) { l.Reports = reports(status("ci", "pending")) }), want: refusedChecks, why: "pending"},
		{name: "finding 5: a check seen on the PR's head has not reported on its candidate",
			in:   speculative(func(l *landing) { l.Seen = []string{"build", "test"}; l.Reports = reports(status("build", "success")) }),
			want: refusedChecks, why: "test (not reported)"},
		{name: "finding 6: approved for main, the PR now targets release",
			in: serial(func(l *landing) { l.Base = "release" }), want: refusedBase, why: "a new base needs a new approval"},
		{name: "the head moved to one nobody approved", in: serial(func(l *landing) { l.Head, l.TestedHead, l.Tested = other, other, other }), want: refusedHead},
		{name: "no head read", in: serial(func(l *landing) { l.Head = "" }), want: refusedHead},
		{name: "no base read", in: serial(func(l *landing) { l.Base = "" }), want: refusedBase},
		{name: "approval of nothing", in: serial(func(l *landing) { l.Approval = ApprovalCheck{} }), want: refusedApproval},
		{name: "speculative: the base moved since the previous merge of the batch",
			in: speculative(func(l *landing) { l.Tip = tip }), want: refusedTip},
		{name: "the tip could not be read", in: serial(func(l *landing) { l.Tip = "" }), want: refusedTip},
		{name: "speculative: the candidate carries an older head of the PR",
			in: speculative(func(l *landing) { l.TestedHead = other }), want: refusedUntested, why: "carries the head 2222222"},
		{name: "serial: a tested commit other than the head", in: serial(func(l *landing) { l.TestedHead = other }), want: refusedUntested},
		{name: "no tested commit", in: serial(func(l *landing) { l.Tested = "" }), want: refusedUntested},
		{name: "a check failed on the tested commit",
			in: serial(func(l *landing) { l.Reports = reports(status("ci", "failure")) }), want: refusedChecks, why: "failed"},
		{name: "a check the base's rules require has not reported",
			in: serial(func(l *landing) { l.Required = []string{"ci/build"} }), want: refusedChecks, why: "ci/build (not reported)"},
		{name: "a PRLOOP_REQUIRED_CHECKS check failed beside a green one",
			in: serial(func(l *landing) {
				l.Required = []string{"lint"}
				l.Reports = reports(status("ci", "success"), status("lint", "error"))
			}),
			want: refusedChecks, why: "lint"},
		{name: "a check seen on an earlier candidate of the queue has not reported on this one",
			in: speculative(func(l *landing) { l.Seen = []string{"ci", "e2e"} }), want: refusedChecks, why: "e2e (not reported)"},
		{name: "speculative: nothing reported on the candidate, nothing expected: not tested",
			in: speculative(func(l *landing) { l.Seen = nil; l.Reports = reports() }), want: refusedChecks, why: "none reported"},
		{name: "speculative: only prloop's own status on the candidate",
			in: speculative(func(l *landing) { l.Seen = nil; l.Reports = reports(status(DefaultStatusContext, "success")) }), want: refusedChecks},
		{name: "serial: a repository with no CI, nothing required or ever seen",
			in: serial(func(l *landing) { l.Seen = nil; l.Reports = reports() }), want: landAllowed},
		{name: "prloop's own pending status holds nothing up",
			in: serial(func(l *landing) {
				l.Reports = reports(status("ci", "success"), status(DefaultStatusContext, "pending"))
			}), want: landAllowed},
		{name: "PRLOOP_REQUIRE_CHECKS off: CI is not asked",
			in: serial(func(l *landing) { l.RequireChecks = false; l.Reports = reports(status("ci", "pending")) }), want: landAllowed},
		{name: "PRLOOP_REQUIRE_CHECKS off does not waive the tip",
			in: serial(func(l *landing) { l.RequireChecks = false; l.BuiltOn = oldTip }), want: refusedTip},
		{name: "PRLOOP_REQUIRE_CHECKS off does not waive the approval",
			in: serial(func(l *landing) { l.RequireChecks = false; l.Approval = ApprovalCheck{Why: "gone"} }), want: refusedApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mayLand(tt.in)
			assert.Equal(t, tt.want, got.Refusal, "verdict: %s", got.Why)
			assert.Equal(t, tt.want == landAllowed, got.ok())
			if tt.want == landAllowed {
				assert.Empty(t, got.Why)
			} else {
				assert.NotEmpty(t, got.Why)
				assert.True(t, strings.Contains(got.Why, tt.why), "why %q lacks %q", got.Why, tt.why)
			}
		})
	}
}
