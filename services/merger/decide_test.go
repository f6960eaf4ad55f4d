package merger

import (
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

func TestEvaluateChecks(t *testing.T) {
	t.Parallel()
	status := func(ctx, state string) *gh.RepoStatus {
		return &gh.RepoStatus{Context: gh.String(ctx), State: gh.String(state)}
	}
	run := func(id int64, name, status, conclusion string) *gh.CheckRun {
		r := &gh.CheckRun{ID: gh.Int64(id), Name: gh.String(name), Status: gh.String(status)}
		if conclusion != "" {
			r.Conclusion = gh.String(conclusion)
		}
		return r
	}
	statuses := func(sts ...*gh.RepoStatus) *gh.CombinedStatus { return &gh.CombinedStatus{Statuses: sts} }
	tests := []struct {
		name              string
		required, seen    []string
		combined          *gh.CombinedStatus
		runs              []*gh.CheckRun
		want              ChecksState
		failed, pending   []string
		missing, reported []string
	}{
		{name: "nothing at all, nothing required, nothing ever ran: green though GitHub says pending", combined: &gh.CombinedStatus{State: gh.String("pending")}, want: ChecksGreen},
		{name: "no combined status at all", want: ChecksGreen},
		{name: "nothing yet on a head whose base requires a check", required: []string{"ci/build"},
			combined: &gh.CombinedStatus{State: gh.String("pending")}, want: ChecksPending,
			pending: []string{"ci/build (not reported)"}, missing: []string{"ci/build"}},
		{name: "nothing yet on a head after checks ran on an earlier one", seen: []string{"build", "ci/lint"},
			want: ChecksPending, pending: []string{"build (not reported)", "ci/lint (not reported)"}, missing: []string{"build", "ci/lint"}},
		{name: "required status passed", required: []string{"ci/build"}, combined: statuses(status("ci/build", "success")),
			want: ChecksGreen, reported: []string{"ci/build"}},
		{name: "required check run passed", required: []string{"build"}, runs: []*gh.CheckRun{run(1, "build", "completed", "success")},
			want: ChecksGreen, reported: []string{"build"}},
		{name: "required check still running", required: []string{"build"}, runs: []*gh.CheckRun{run(1, "build", "in_progress", "")},
			want: ChecksPending, pending: []string{"check build"}, reported: []string{"build"}},
		{name: "one of two required checks reported", required: []string{"build", "ci/build"}, combined: statuses(status("ci/build", "success")),
			want: ChecksPending, pending: []string{"build (not reported)"}, missing: []string{"build"}, reported: []string{"ci/build"}},
		{name: "a check seen before reported again and passed", seen: []string{"build"}, required: []string{"build"},
			runs: []*gh.CheckRun{run(1, "build", "completed", "success")}, want: ChecksGreen, reported: []string{"build"}},
		{name: "a failure wins over a missing check", required: []string{"ci/build"}, runs: []*gh.CheckRun{run(1, "lint", "completed", "failure")},
			want: ChecksFailed, failed: []string{"check lint (failure)"}, pending: []string{"ci/build (not reported)"},
			missing: []string{"ci/build"}, reported: []string{"lint"}},
		{name: "prloop's own status is not a check", combined: statuses(status(DefaultStatusContext, "success")), want: ChecksGreen},
		{name: "prloop's own status does not satisfy a requirement", required: []string{"ci/build"}, combined: statuses(status(DefaultStatusContext, "success")),
			want: ChecksPending, pending: []string{"ci/build (not reported)"}, missing: []string{"ci/build"}},
		{name: "prloop's own failing status does not fail", combined: statuses(status(DefaultStatusContext, "failure")), want: ChecksGreen},
		{name: "prloop's own check run in progress is not a check", runs: []*gh.CheckRun{run(1, DefaultStatusContext, "in_progress", "")}, want: ChecksGreen},
		{name: "prloop's own check run needing a human does not fail", runs: []*gh.CheckRun{run(1, DefaultStatusContext, "completed", "action_required")}, want: ChecksGreen},
		{name: "prloop's own check run does not satisfy a requirement", required: []string{"ci/build"}, runs: []*gh.CheckRun{run(1, DefaultStatusContext, "completed", "success")},
			want: ChecksPending, pending: []string{"ci/build (not reported)"}, missing: []string{"ci/build"}},
		{name: "prloop's own status is never expected", required: []string{DefaultStatusContext}, seen: []string{DefaultStatusContext}, want: ChecksGreen},
		{name: "all passed", combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{status("ci", "success")}},
			runs: []*gh.CheckRun{run(1, "build", "completed", "success"), run(2, "lint", "completed", "neutral"), run(3, "docs", "completed", "skipped")}, want: ChecksGreen},
		{name: "pending status", combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{status("ci", "pending")}}, want: ChecksPending, pending: []string{"status ci"}},
		{name: "queued and running check runs", runs: []*gh.CheckRun{run(1, "build", "queued", ""), run(2, "test", "in_progress", "")},
			want: ChecksPending, pending: []string{"check build", "check test"}},
		{name: "failed status", combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{status("ci", "failure")}}, want: ChecksFailed, failed: []string{"status ci"}},
		{name: "errored status", combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{status("ci", "error")}}, want: ChecksFailed, failed: []string{"status ci"}},
		{name: "failure wins over pending", combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{status("ci", "pending")}},
			runs: []*gh.CheckRun{run(1, "build", "completed", "failure")}, want: ChecksFailed, failed: []string{"check build (failure)"}, pending: []string{"status ci"}},
		{name: "cancelled and timed out runs fail", runs: []*gh.CheckRun{run(1, "a", "completed", "cancelled"), run(2, "b", "completed", "timed_out")},
			want: ChecksFailed, failed: []string{"check a (cancelled)", "check b (timed_out)"}},
		{name: "a successful re-run replaces a failed run", runs: []*gh.CheckRun{run(7, "build", "completed", "success"), run(3, "build", "completed", "failure")}, want: ChecksGreen},
		{name: "a re-run in progress replaces a passed run", runs: []*gh.CheckRun{run(3, "build", "completed", "success"), run(9, "build", "in_progress", "")},
			want: ChecksPending, pending: []string{"check build"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := EvaluateChecks(ChecksInput{Required: tt.required, Seen: tt.seen, Own: DefaultStatusContext, Combined: tt.combined, Runs: tt.runs})
			assert.Equal(t, tt.want, got.State, got.Summary())
			assert.Equal(t, tt.failed, got.Failed)
			assert.Equal(t, tt.pending, got.Pending)
			assert.Equal(t, tt.missing, got.Missing)
			if tt.reported != nil {
				assert.Equal(t, tt.reported, got.Reported)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const head, other = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	open := func(state string) PRView {
		return PRView{Open: true, HeadSHA: head, BaseRef: "main", MergeableState: state}
	}
	green, pending := Checks{State: ChecksGreen}, Checks{State: ChecksPending, Pending: []string{"status ci"}}
	failed := Checks{State: ChecksFailed, Failed: []string{"status ci"}}
	tests := []struct {
		name    string
		pr      PRView
		checks  Checks
		require bool
		waited  time.Duration
		// withdrawn says GitHub no longer shows the approval.
		withdrawn bool
		// behind says the head lacks the base tip (GitHub's comparison).
		behind bool
		// refusal is CheckApproval's reason for a withdrawn approval.
		refusal events.Reason
		want    Action
		reason  events.Reason
	}{
		{name: "clean and green merges", pr: open("clean"), checks: green, require: true, want: ActMerge},
		{name: "has_hooks merges", pr: open("has_hooks"), checks: green, require: true, want: ActMerge},
		{name: "blocked is tried: GitHub decides", pr: open("blocked"), checks: green, require: true, want: ActMerge},
		{name: "already merged", pr: PRView{Merged: true, HeadSHA: head, MergeableState: "unknown"}, require: true, want: ActMerged},
		{name: "closed is dropped", pr: PRView{HeadSHA: head, BaseRef: "main"}, require: true, want: ActDrop, reason: events.ReasonClosed},
		{name: "moved head drops the stale approval", pr: PRView{Open: true, HeadSHA: other, BaseRef: "main", MergeableState: "clean"}, checks: green, require: true, want: ActDrop, reason: events.ReasonStaleApproval},
		{name: "retargeted since the approval drops it as stale", pr: PRView{Open: true, HeadSHA: head, BaseRef: "release", MergeableState: "clean"}, checks: green, require: true, withdrawn: true, refusal: events.ReasonStaleApproval, want: ActDrop, reason: events.ReasonStaleApproval},
		{name: "withdrawn approval drops though green", pr: open("clean"), checks: green, require: true, withdrawn: true, want: ActDrop, reason: events.ReasonApprovalWithdrawn},
		{name: "withdrawn approval drops rather than waiting", pr: open("clean"), checks: pending, require: true, withdrawn: true, want: ActDrop, reason: events.ReasonApprovalWithdrawn},
		{name: "withdrawn approval drops rather than escalating", pr: open("dirty"), checks: failed, require: true, withdrawn: true, want: ActDrop, reason: events.ReasonApprovalWithdrawn},
		{name: "withdrawn approval drops rather than updating", pr: open("behind"), checks: green, require: true, withdrawn: true, behind: true, want: ActDrop, reason: events.ReasonApprovalWithdrawn},
		{name: "merged needs no approval", pr: PRView{Merged: true, HeadSHA: head}, withdrawn: true, want: ActMerged},
		{name: "draft fails", pr: PRView{Open: true, Draft: true, HeadSHA: head, BaseRef: "main", MergeableState: "draft"}, require: true, want: ActFail, reason: events.ReasonNotMergeable},
		{name: "conflict fails", pr: open("dirty"), checks: green, require: true, want: ActFail, reason: events.ReasonMergeConflict},
		{name: "failed checks fail", pr: open("unstable"), checks: failed, require: true, want: ActFail, reason: events.ReasonChecksFailed},
		{name: "failed checks ignored when not required", pr: open("unstable"), checks: failed, want: ActMerge},
		{name: "pending checks wait", pr: open("clean"), checks: pending, require: true, waited: time.Minute, want: ActWait},
		{name: "pending checks time out", pr: open("clean"), checks: pending, require: true, waited: 30 * time.Minute, want: ActFail, reason: events.ReasonChecksFailed},
		{name: "pending checks ignored when not required", pr: open("clean"), checks: pending, want: ActMerge},
		{name: "behind updates before waiting for checks", pr: open("behind"), checks: pending, require: true, behind: true, want: ActUpdate},
		{name: "behind with failed checks fails without updating", pr: open("behind"), checks: failed, require: true, behind: true, want: ActFail, reason: events.ReasonChecksFailed},
		{name: "conflict wins over behind", pr: open("dirty"), checks: pending, require: true, behind: true, want: ActFail, reason: events.ReasonMergeConflict},
		// Up-to-dateness is computed; mergeable_state only hints. Without a
		// strict rule GitHub calls a behind head clean, and blocked or
		// unstable hide behind even with one.
		{name: "behind on a loose base (clean) updates, never merges", pr: open("clean"), checks: green, require: true, behind: true, want: ActUpdate},
		{name: "behind while blocked updates", pr: open("blocked"), checks: green, require: true, behind: true, want: ActUpdate},
		{name: "behind while unstable updates", pr: open("unstable"), checks: green, behind: true, want: ActUpdate},
		{name: "behind with checks not required updates", pr: open("clean"), checks: pending, behind: true, want: ActUpdate},
		{name: "a stale behind hint on an up-to-date head merges", pr: open("behind"), checks: green, require: true, want: ActMerge},
		{name: "unknown mergeability of a behind head waits", pr: open("unknown"), checks: green, require: true, behind: true, want: ActWait},
		{name: "null mergeability of a behind head waits", pr: open(""), checks: pending, require: true, behind: true, want: ActWait},
		{name: "unknown mergeability waits", pr: open("unknown"), checks: green, require: true, want: ActWait},
		{name: "missing mergeability waits", pr: open(""), checks: green, require: true, want: ActWait},
		{name: "mergeability never computed fails", pr: open("unknown"), checks: green, require: true, waited: time.Hour, want: ActFail, reason: events.ReasonNotMergeable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Decide(Input{
				PR: tt.pr, Head: head, RequireChecks: tt.require, Checks: tt.checks, Behind: tt.behind,
				Approval: ApprovalCheck{Approved: !tt.withdrawn, Why: "no 👍", Reason: tt.refusal},
				Waited:   tt.waited, ChecksTimeout: 30 * time.Minute,
			})
			assert.Equal(t, tt.want, d.Action, d.Why)
			assert.Equal(t, tt.reason, d.Reason)
			assert.NotEmpty(t, d.Why)
		})
	}
}
