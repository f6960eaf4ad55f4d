package poller

import (
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

func run(id int64, name, status, concl string) *gh.CheckRun {
	return &gh.CheckRun{ID: gh.Int64(id), Name: gh.String(name), Status: gh.String(status), Conclusion: gh.String(concl),
		App: &gh.App{Slug: gh.String("github-actions")}}
}

func TestJudgeChecks(t *testing.T) {
	t.Parallel()
	statuses := &gh.CombinedStatus{Statuses: []*gh.RepoStatus{
		{ID: gh.Int64(9), Context: gh.String("prloop"), State: gh.String("failure")},
		{ID: gh.Int64(8), Context: gh.String("ci/legacy"), State: gh.String("error"), Description: gh.String("boom")},
	}}
	tests := []struct {
		name        string
		in          ChecksInput
		wantFailed  []string
		wantPending bool
		wantGreen   bool
	}{
		{name: "none reads nothing", in: ChecksInput{Mode: FixNone, Runs: []*gh.CheckRun{run(1, "test", "completed", "failure")}}},
		{name: "prloop's own status never counts", in: ChecksInput{Mode: FixAll, Own: "prloop", Combined: &gh.CombinedStatus{Statuses: statuses.Statuses[:1]}}},
		{name: "all: every failure", in: ChecksInput{Mode: FixAll, Own: "prloop", Combined: statuses,
			Runs: []*gh.CheckRun{run(1, "test", "completed", "timed_out"), run(2, "lint", "completed", "success")}},
			wantFailed: []string{"ci/legacy", "test"}},
		{name: "required only gates the required", in: ChecksInput{Mode: FixRequired, Own: "prloop", Required: []string{"test"}, Combined: statuses,
			Runs: []*gh.CheckRun{run(1, "test", "completed", "failure")}}, wantFailed: []string{"test"}},
		{name: "required without any known is all", in: ChecksInput{Mode: FixRequired, Own: "prloop",
			Runs: []*gh.CheckRun{run(1, "lint", "completed", "action_required")}}, wantFailed: []string{"lint"}},
		{name: "a re-run's latest run counts", in: ChecksInput{Mode: FixAll,
			Runs: []*gh.CheckRun{run(1, "test", "completed", "failure"), run(5, "test", "completed", "success")}}, wantGreen: true},
		{name: "a re-run in progress is pending", in: ChecksInput{Mode: FixAll,
			Runs: []*gh.CheckRun{run(1, "test", "completed", "failure"), run(5, "test", "in_progress", "")}}, wantPending: true},
		{name: "a required check not reported is pending", in: ChecksInput{Mode: FixRequired, Required: []string{"test", "e2e"},
			Runs: []*gh.CheckRun{run(1, "test", "completed", "success")}}, wantPending: true},
		{name: "cancelled is a failure, neutral is not", in: ChecksInput{Mode: FixAll,
			Runs: []*gh.CheckRun{run(1, "a", "completed", "cancelled"), run(2, "b", "completed", "neutral")}}, wantFailed: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := judgeChecks(tt.in)
			assert.Equal(t, tt.wantFailed, names(c.Failed))
			assert.Equal(t, tt.wantPending, c.Pending, "pending")
			assert.Equal(t, tt.wantGreen, c.Green, "green")
		})
	}
}

func names(f []events.FailedCheck) []string {
	if len(f) == 0 {
		return nil
	}
	return events.CheckNames(f)
}

func TestDecide_ChecksFailed(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pending := state.PR{PR: pr, Status: events.StatusPending, HeadSHA: "h1", WatchedSince: now, Transitions: 1, BaseRef: "main"}
	fail := func(id int64) *CheckFacts {
		return &CheckFacts{Failed: []events.FailedCheck{{Name: "test", Kind: events.CheckKindRun, Conclusion: "failure", ID: id, Actions: true}}}
	}
	obs := func(head string, st events.Status, c *CheckFacts) Observation {
		return Observation{HeadSHA: head, Verdict: review.Verdict{Status: st}, Now: now, Checks: c}
	}
	published := pending
	published.FeedbackHeadSHA = ""
	published.Checks = state.ChecksRecord{HeadSHA: "h1", Round: 1, Key: checksKey(fail(7).Failed), Failing: []string{"test"}}
	tests := []struct {
		name      string
		cur       state.PR
		obs       Observation
		wantTypes []events.Type
		check     func(t *testing.T, d Decision)
	}{
		{name: "a failure is published and holds the head", cur: pending, obs: obs("h1", events.StatusPending, fail(7)),
			wantTypes: []events.Type{events.TypeChecksFailed},
			check: func(t *testing.T, d Decision) {
				cf := d.Emits[0].Data.(*events.ChecksFailed)
				assert.Equal(t, 1, cf.Round)
				assert.Equal(t, "main", cf.BaseBranch)
				assert.Equal(t, "h1", d.Next.FeedbackHeadSHA, "held like a change request")
			}},
		{name: "the same failure is handled once", cur: published, obs: obs("h1", events.StatusPending, fail(7))},
		{name: "a failure after a re-run is round 2", cur: published, obs: obs("h1", events.StatusPending, fail(9)),
			wantTypes: []events.Type{events.TypeChecksFailed},
			check:     func(t *testing.T, d Decision) { assert.Equal(t, 2, d.Emits[0].Data.(*events.ChecksFailed).Round) }},
		{name: "a pass after the failure is a flaky pass, counted once", cur: published, obs: obs("h1", events.StatusPending, &CheckFacts{Green: true}),
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, 1, d.Next.Checks.FlakyPasses)
				again := decide(d.Next, obs("h1", events.StatusPending, &CheckFacts{Green: true}), Timing{})
				assert.Equal(t, 1, again.Next.Checks.FlakyPasses)
			}},
		{name: "a new head starts fresh", cur: published, obs: obs("h2", events.StatusPending, fail(7)),
			wantTypes: []events.Type{events.TypeReviewPending, events.TypeChecksFailed},
			check:     func(t *testing.T, d Decision) { assert.Equal(t, 1, d.Emits[1].Data.(*events.ChecksFailed).Round) }},
		{name: "an approved PR is the merger's", cur: pending, obs: obs("h1", events.StatusApproved, fail(7)),
			wantTypes: []events.Type{events.TypeReviewApproved}},
		{name: "a change request and a failure go together", cur: pending, obs: obs("h1", events.StatusChangesRequested, fail(7)),
			wantTypes: []events.Type{events.TypeFeedbackReceived},
			check: func(t *testing.T, d Decision) {
				assert.Equal(t, []string{"test"}, names(d.Emits[0].Data.(*events.FeedbackReceived).FailedChecks))
				assert.Equal(t, 1, d.Next.Checks.Round)
			}},
		{name: "a head being fixed is left alone", cur: func() state.PR { p := pending; p.FeedbackHeadSHA = "h1"; return p }(),
			obs: obs("h1", events.StatusPending, fail(7))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decide(tt.cur, tt.obs, Timing{})
			var types []events.Type
			for _, e := range d.Emits {
				types = append(types, e.Data.EventType())
			}
			require.Equal(t, tt.wantTypes, types)
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}
