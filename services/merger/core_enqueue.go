package merger

import (
	"strconv"
	"time"

	"github.com/prloop/prloop/pkg/events"
)

// How an approval enters the queue, decided by the core: Enqueue reads
// the PR (and then what admit asks for), admit decides, Enqueue writes.

// admissionView is what Enqueue read of an approved PR.
type admissionView struct {
	Now time.Time
	// Missing says GitHub does not know the PR.
	Missing bool
	PR      PRView
	// Check is GitHub's verdict on the approved head for the approval's
	// base, read when the PR is open on that head; nil until read.
	Check *ApprovalCheck
	// QueuedRead says the PR's entry in its base's queue was read (when
	// the head moved); Queued is that entry (nil: none, or unreadable).
	QueuedRead bool
	Queued     *Entry
}

// admission is admit's answer.
type admission struct {
	// Verify asks for GitHub's verdict on Entry's approval (Check); Read
	// for the PR's entry in its base's queue (Queued). Nothing else of
	// the answer counts then.
	Verify, Read bool
	// Queue says to queue Entry; Again that Entry is already queued (a
	// redelivery whose head prloop updated meanwhile), and is announced
	// again.
	Queue, Again bool
	Entry        Entry
	// Events say why an approval is not queued, when someone should hear
	// it (GitHub does not show the approval).
	Events []outEvent
	// Why says what was decided, for logs.
	Why string
}

// admit decides whether approval a of a PR enters its base's queue, from
// what Enqueue read (v). The approval is a trigger, not an authority: the
// PR is queued only when GitHub's review signals approve its head for
// the approval's base; when they do not (a forged or replayed event, or
// one a withdrawal overtook) PRMergeFailed with reason not_approved says
// who tried, and nothing is queued. Approvals of closed PRs or of heads
// that already moved on are dropped: the poller re-evaluates. It is pure.
func admit(a Approval, v admissionView, pol Policy) admission {
	switch {
	case a.Head == "":
		return admission{Why: "approval without a head sha; not queued"}
	case v.Missing:
		return admission{Why: "approved PR not found on GitHub; not queued"}
	case v.PR.Merged || !v.PR.Open:
		return admission{Why: "approved PR is no longer open; not queued"}
	case v.PR.HeadSHA != a.Head:
		// A redelivered approval whose head prloop has updated meanwhile
		// is still queued; any other moved head makes the approval stale.
		if !v.QueuedRead {
			return admission{Read: true}
		}
		if v.Queued == nil || v.Queued.ApprovedHead != a.Head {
			return admission{Why: "stale approval: the head moved since; not queued, the poller re-evaluates"}
		}
		return admission{Again: true, Entry: *v.Queued, Why: "already queued on the head prloop made from the approved one"}
	}
	e := Entry{
		PR: a.PR, Base: v.PR.BaseRef, Seq: a.Seq, ApprovedHead: a.Head, Head: a.Head,
		Approvers: a.Approvers, QueuedAt: v.Now.UTC(), Anchor: a.Anchor, BaseSince: a.BaseSince, Epoch: a.Epoch, FixCycle: a.FixCycle,
	}
	switch {
	case v.Check == nil:
		return admission{Verify: true, Entry: e}
	case !v.Check.Approved:
		return admission{Why: v.Check.Why, Events: []outEvent{{Data: &events.MergeFailed{
			Base: events.Base{PR: a.PR, HeadSHA: a.Head}, Reason: events.ReasonNotApproved, Detail: v.Check.Why, DryRun: pol.DryRun,
		}, Parts: []string{string(events.ReasonNotApproved), a.Head, strconv.FormatUint(a.Seq, 10)}}}}
	}
	e.Approvers = v.Check.Approvers
	return admission{Queue: true, Entry: e, Why: "approved on GitHub; queued"}
}
