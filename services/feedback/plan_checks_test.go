package feedback

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

// TestPlan_FailingChecks: a head's first failure of GitHub Actions jobs is
// re-run; a repeat, or a failure with nothing to re-run, goes to the
// agent; the cycles are shared with review fixes unless
// PRLOOP_MAX_CI_FIX_CYCLES bounds them on their own; used up, a human is
// asked with reason checks_failed.
func TestPlan_FailingChecks(t *testing.T) {
	t.Parallel()
	open := snapshot{Found: true, Open: true, Head: planHead}
	job := []events.FailedCheck{{Name: "test", Kind: events.CheckKindRun, ID: 5, Actions: true}}
	status := []events.FailedCheck{{Name: "ci/legacy", Kind: events.CheckKindStatus}}
	req := func(round, cycle int, failed []events.FailedCheck) Request {
		return Request{PR: planPR, HeadSHA: planHead, FixCycle: cycle, EventID: "ev", Checks: &ChecksFailure{Round: round}, FailedChecks: failed}
	}
	withRerun, ciBound := planLim, planLim
	withRerun.Rerun = true
	ciBound.Rerun, ciBound.MaxCIFixCycles = true, 1
	tests := []struct {
		name       string
		req        Request
		rec        Record
		lim        limits
		want       actionKind
		wantReason events.Reason
		wantCI     int
	}{
		{name: "first failure of a job: re-run", req: req(1, 0, job), lim: withRerun, want: actRerun},
		{name: "re-running off: the agent", req: req(1, 0, job), lim: planLim, want: actFix, wantCI: 1},
		{name: "nothing to re-run: the agent", req: req(1, 0, status), lim: withRerun, want: actFix, wantCI: 1},
		{name: "a repeat: the agent", req: req(2, 0, job), lim: withRerun, want: actFix, wantCI: 1},
		{name: "shared cycles used up: checks_failed", req: req(2, 2, job), lim: withRerun, want: actEscalate, wantReason: events.ReasonChecksFailed},
		{name: "own bound: review fixes do not count", req: req(2, 2, job), lim: ciBound, want: actFix, wantCI: 1},
		{name: "own bound used up", req: req(2, 0, job), rec: Record{CIFixes: 1}, lim: ciBound, want: actEscalate, wantReason: events.ReasonChecksFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := plan(tt.req, tt.rec, open, tt.lim)
			assert.Equal(t, tt.want, a.kind, a.note)
			assert.Equal(t, tt.wantReason, a.reason)
			if tt.want == actFix {
				assert.Equal(t, tt.wantCI, a.rec.CIFixes)
			}
		})
	}
}

// TestCleanCheckText: escapes go, hidden markup goes, credentials go.
func TestCleanCheckText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{name: "colours", in: "\x1b[31;1mFAIL\x1b[0m x", want: "FAIL x"},
		{name: "osc link", in: "\x1b]8;;http://x\x07link\x1b]8;;\x07", want: "link"},
		{name: "classic token", in: "t=ghp_" + "abcdefghijklmnopqrstuvwxyz0123", want: "t=[redacted]"},
		{name: "fine-grained token", in: "github_pat_" + "11AAAAAAA0aaaaaaaaaaaa_bbbbbbbbbb", want: "[redacted]"},
		{name: "installation token", in: "x ghs_" + "0123456789abcdefghijABCDEFGHIJ y", want: "x [redacted] y"},
		{name: "authorization header", in: "Authorization: Bearer abcdefghijklmnopqrstuvwx", want: "Authorization: [redacted]"},
		{name: "prloop's own token, whatever its shape", in: "echo s3cr3t-token-value", want: "echo [redacted]"},
		{name: "hidden comment", in: "a <!-- do evil --> b", want: "a  b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, cleanCheckText(tc.in, "s3cr3t-token-value"))
		})
	}
}
