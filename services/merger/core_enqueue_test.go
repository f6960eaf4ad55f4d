package merger

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// TestAdmit_HowAnApprovalEntersTheQueue: what Enqueue read of an approved
// PR, and whether the approval queues it, asks for a second read, or says
// why not.
func TestAdmit_HowAnApprovalEntersTheQueue(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "o", Repo: "r", Number: 7}
	approval := Approval{PR: pr, Head: stepHead, Approvers: []string{"mallory"}, Seq: 42, Base: "main", Epoch: 2, FixCycle: 1}
	open := PRView{Open: true, HeadSHA: stepHead, BaseRef: "main"}
	approved := &ApprovalCheck{Approved: true, Approvers: []string{"alice"}}
	tests := []struct {
		name   string
		a      func(*Approval)
		v      admissionView
		dryRun bool
		// want: "queue", "again", "verify", "read" or "" (not queued)
		want   string
		events []string
		why    string
	}{
		{name: "an approval without a head queues nothing", a: func(a *Approval) { a.Head = "" }, v: admissionView{PR: open}, why: "without a head"},
		{name: "a PR GitHub does not know queues nothing", v: admissionView{Missing: true}, why: "not found"},
		{name: "a closed PR queues nothing", v: admissionView{PR: PRView{HeadSHA: stepHead, BaseRef: "main"}}, why: "no longer open"},
		{name: "a merged PR queues nothing", v: admissionView{PR: PRView{Merged: true, HeadSHA: stepHead, BaseRef: "main"}}, why: "no longer open"},
		{name: "open on the approved head: GitHub's verdict is read first", v: admissionView{PR: open}, want: "verify"},
		{name: "GitHub approves: queued with GitHub's approvers, not the event's", v: admissionView{PR: open, Check: approved}, want: "queue"},
		{
			name:   "GitHub does not show the approval (forged, replayed, withdrawn): PRMergeFailed not_approved, nothing queued",
			v:      admissionView{PR: open, Check: &ApprovalCheck{Why: "GitHub shows no approval"}},
			events: []string{"PRMergeFailed/not_approved"}, why: "GitHub shows no approval",
		},
		{
			name: "not approved in a dry run: said as a dry run", dryRun: true,
			v:      admissionView{PR: open, Check: &ApprovalCheck{Why: "GitHub shows no approval"}},
			events: []string{"PRMergeFailed/not_approved"}, why: "GitHub shows no approval",
		},
		{name: "the head moved: the queued entry is read", v: admissionView{PR: PRView{Open: true, HeadSHA: stepOther, BaseRef: "main"}}, want: "read"},
		{
			name: "the head moved to prloop's update of the queued approval: a redelivery, announced again",
			v:    admissionView{PR: PRView{Open: true, HeadSHA: stepOther, BaseRef: "main"}, QueuedRead: true, Queued: &Entry{PR: pr, ApprovedHead: stepHead, Head: stepOther}},
			want: "again",
		},
		{
			name: "the head moved, queued for another approval: stale",
			v:    admissionView{PR: PRView{Open: true, HeadSHA: stepOther, BaseRef: "main"}, QueuedRead: true, Queued: &Entry{PR: pr, ApprovedHead: stepTip, Head: stepOther}},
			why:  "stale approval",
		},
		{name: "the head moved, nothing queued: stale", v: admissionView{PR: PRView{Open: true, HeadSHA: stepOther, BaseRef: "main"}, QueuedRead: true}, why: "stale approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := approval
			if tt.a != nil {
				tt.a(&a)
			}
			v := tt.v
			v.Now = stepT0
			pol := newStepFixture().pol
			pol.DryRun = tt.dryRun
			got := admit(a, v, pol)
			var what string
			switch {
			case got.Verify:
				what = "verify"
			case got.Read:
				what = "read"
			case got.Queue:
				what = "queue"
			case got.Again:
				what = "again"
			}
			assert.Equal(t, tt.want, what, "why: %s", got.Why)
			assert.Equal(t, tt.events, eventsOf(Transition{Events: got.Events}))
			assert.Contains(t, got.Why, tt.why)
			for _, ev := range got.Events {
				assert.Equal(t, tt.dryRun, ev.Data.(*events.MergeFailed).DryRun)
			}
			switch what {
			case "queue", "verify":
				want := Entry{PR: pr, Base: "main", Seq: 42, ApprovedHead: stepHead, Head: stepHead, Approvers: []string{"mallory"}, QueuedAt: stepT0, Epoch: 2, FixCycle: 1}
				if what == "queue" {
					want.Approvers = approved.Approvers
				}
				assert.Equal(t, want, got.Entry)
			case "again":
				assert.Equal(t, *v.Queued, got.Entry)
			}
		})
	}
}
