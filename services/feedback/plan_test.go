package feedback

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

var (
	planPR   = ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	planHead = strings.Repeat("a", 40)
	planNew  = strings.Repeat("b", 40)
	planLim  = limits{MaxFixCycles: 2, Label: "human-review-required", AgentAttempts: 3, AgentBudget: time.Hour, AgentBackoff: time.Second}
)

// TestPlan_Actions covers every branch of plan: what an attempt does about
// a change request, from the request, the service's record and GitHub's
// view of the PR.
func TestPlan_Actions(t *testing.T) {
	t.Parallel()
	req := Request{PR: planPR, HeadSHA: planHead, FixCycle: 1, EventID: "ev-2"}
	open := snapshot{Found: true, Open: true, Head: planHead}
	// inFlight is the record of an attempt on req that ran the agent once.
	inFlight := func(mut func(*Record)) Record {
		r := Record{Key: req.Key(), EventID: req.EventID, Runs: 1, FixCycle: 2, AgentSpent: time.Minute, Phase: PhaseAgentStarted}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	// fresh is the record a new attempt on req starts from.
	fresh := func(spent time.Duration) Record {
		return Record{Key: req.Key(), EventID: req.EventID, AgentSpent: spent, FixCycle: req.FixCycle + 1}
	}
	tests := []struct {
		name string
		req  Request
		rec  Record
		pr   snapshot
		want action
	}{
		{
			name: "no usable head: ignored",
			req:  Request{PR: planPR, HeadSHA: "HEAD", EventID: "ev-2"}, pr: open,
			want: action{kind: actIgnore},
		},
		{
			name: "fix pushed for the head and cycle: a duplicate, whatever the event",
			req:  req, rec: Record{Key: req.Key(), EventID: "ev-1", Outcome: OutcomeAddressed, NewHead: planNew}, pr: open,
			want: action{kind: actDuplicate, rec: Record{Key: req.Key(), EventID: "ev-1", Outcome: OutcomeAddressed, NewHead: planNew}},
		},
		{
			name: "the same event already escalated: a duplicate",
			req:  req, rec: Record{Key: req.Key(), EventID: req.EventID, Outcome: OutcomeEscalated}, pr: open,
			want: action{kind: actDuplicate, rec: Record{Key: req.Key(), EventID: req.EventID, Outcome: OutcomeEscalated}},
		},
		{
			name: "escalated, asked anew after a human's reset: new work",
			req:  req, rec: Record{Key: req.Key(), EventID: "ev-1", Outcome: OutcomeEscalated, AgentSpent: time.Minute}, pr: open,
			want: action{kind: actFix, cycle: 1, rec: fresh(time.Minute)},
		},
		{
			name: "PR not found: skipped",
			req:  req, pr: snapshot{},
			want: action{kind: actSkip, why: "the PR was not found", note: "PR not found", rec: Record{Key: req.Key(), EventID: req.EventID}},
		},
		{
			name: "PR closed: skipped",
			req:  req, pr: snapshot{Found: true, Head: planHead},
			want: action{kind: actSkip, why: "the PR was closed", note: "PR closed or merged meanwhile", rec: Record{Key: req.Key(), EventID: req.EventID}},
		},
		{
			name: "PR closed while an attempt was in flight: skipped, its record kept",
			req:  req, rec: inFlight(nil), pr: snapshot{Found: true, Head: planHead},
			want: action{kind: actSkip, why: "the PR was closed", note: "PR closed or merged meanwhile", rec: inFlight(nil)},
		},
		{
			name: "escalation label: skipped, a human has it",
			req:  req, pr: snapshot{Found: true, Open: true, Labelled: true, Head: planHead},
			want: action{
				kind: actSkip, why: "the PR carries the label human-review-required",
				note: "PR carries the escalation label; a human has it, no agent runs", rec: Record{Key: req.Key(), EventID: req.EventID},
			},
		},
		{
			name: "head moved: stale, skipped",
			req:  req, pr: snapshot{Found: true, Open: true, Head: planNew},
			want: action{
				kind: actSkip, why: "the head moved to " + ghref.EventSHA(planNew),
				note: "PR head moved since the change request; it is stale", rec: Record{Key: req.Key(), EventID: req.EventID},
			},
		},
		{
			name: "head moved while resuming: the resume checks what moved it",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew }),
			pr:   snapshot{Found: true, Open: true, Head: planNew},
			want: action{kind: actResume, resume: resumePublishPushed, cycle: 1, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew })},
		},
		{
			// Found by the chaos suite (seed 32): the publish failed with a
			// NATS node down, the PR was labelled meanwhile, and the push was
			// never announced (fix cycles != pushes).
			name: "a pushed fix is announced though the PR was labelled since",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew }),
			pr:   snapshot{Found: true, Open: true, Labelled: true, Head: planNew},
			want: action{kind: actResume, resume: resumePublishPushed, cycle: 1, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew })},
		},
		{
			name: "a pushed fix is announced though the PR was closed since",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew }),
			pr:   snapshot{Found: true, Open: false, Head: planNew},
			want: action{kind: actResume, resume: resumePublishPushed, cycle: 1, rec: inFlight(func(r *Record) { r.Phase = PhasePushed; r.PushedSHA = planNew })},
		},
		{
			// Killed between the push and its record (seed 33's long
			// chaos run): GitHub's head is the finished run's result.
			name: "a fix pushed before its record said so is announced though the PR was labelled since",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished; r.ResultSHA = planNew }),
			pr:   snapshot{Found: true, Open: true, Labelled: true, Head: planNew},
			want: action{kind: actResume, resume: resumePushResult, cycle: 1, rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished; r.ResultSHA = planNew })},
		},
		{
			name: "a finished run's result not on GitHub is not pushed to a labelled PR",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished; r.ResultSHA = planNew }),
			pr: snapshot{Found: true, Open: true, Labelled: true, Head: planHead},
			want: action{kind: actSkip, why: "the PR carries the label human-review-required", note: "PR carries the escalation label; a human has it, no agent runs",
				rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished; r.ResultSHA = planNew })},
		},
		{
			name: "fresh request: the agent runs, the fix numbered, the budget spent carried over",
			req:  req, rec: Record{Key: "an older request", Outcome: OutcomeAddressed, AgentSpent: 2 * time.Minute, PushedSHA: planHead}, pr: open,
			want: action{kind: actFix, cycle: 1, rec: fresh(2 * time.Minute)},
		},
		{
			name: "in flight before any agent run: not a resume, the record kept",
			req:  req, rec: inFlight(func(r *Record) { r.Runs, r.FixCycle, r.Phase = 0, 0, "" }), pr: open,
			want: action{kind: actFix, cycle: 1, rec: inFlight(func(r *Record) { r.Runs, r.Phase = 0, "" })},
		},
		{
			name: "fix cycles used up: escalated, no agent",
			req:  Request{PR: planPR, HeadSHA: planHead, FixCycle: 2, EventID: "ev-3"}, pr: open,
			want: action{
				kind: actEscalate, reason: events.ReasonMaxFixCycles, note: "fix cycles used up", cycle: 2,
				detail: "prloop pushed 2 fixes to this PR (PRLOOP_MAX_FIX_CYCLES=2); a human must review the latest change request",
				rec:    Record{Key: Request{PR: planPR, HeadSHA: planHead, FixCycle: 2}.Key(), EventID: "ev-3", FixCycle: 3},
			},
		},
		{
			name: "agent run interrupted: resumed, its work discarded",
			req:  req, rec: inFlight(nil), pr: open,
			want: action{kind: actResume, resume: resumeDiscard, cycle: 1, rec: inFlight(nil)},
		},
		{
			name: "agent run finished, not pushed: resumed, its result pushed",
			req:  req, rec: inFlight(func(r *Record) { r.Phase, r.ResultSHA = PhaseAgentFinished, planNew }), pr: open,
			want: action{kind: actResume, resume: resumePushResult, cycle: 1, rec: inFlight(func(r *Record) { r.Phase, r.ResultSHA = PhaseAgentFinished, planNew })},
		},
		{
			name: "agent run finished without a result: resumed as interrupted",
			req:  req, rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished }), pr: open,
			want: action{kind: actResume, resume: resumeDiscard, cycle: 1, rec: inFlight(func(r *Record) { r.Phase = PhaseAgentFinished })},
		},
		{
			name: "pushed, not published: resumed, the push published",
			req:  req, rec: inFlight(func(r *Record) { r.Phase, r.PushedSHA = PhasePushed, planNew }), pr: open,
			want: action{kind: actResume, resume: resumePublishPushed, cycle: 1, rec: inFlight(func(r *Record) { r.Phase, r.PushedSHA = PhasePushed, planNew })},
		},
		{
			name: "resumed past the fix cycle limit: the record's number holds, no escalation",
			req:  Request{PR: planPR, HeadSHA: planHead, FixCycle: 2, EventID: "ev-3"},
			rec:  Record{Key: Request{PR: planPR, HeadSHA: planHead, FixCycle: 2}.Key(), EventID: "ev-3", Runs: 1, FixCycle: 3},
			pr:   open,
			want: action{kind: actResume, resume: resumeDiscard, cycle: 2, rec: Record{Key: Request{PR: planPR, HeadSHA: planHead, FixCycle: 2}.Key(), EventID: "ev-3", Runs: 1, FixCycle: 3}},
		},
		{
			name: "resumed from a record without a fix number: numbered from the request",
			req:  req, rec: inFlight(func(r *Record) { r.FixCycle = 0 }), pr: open,
			want: action{kind: actResume, resume: resumeDiscard, cycle: 1, rec: inFlight(nil)},
		},
		{
			name: "a redelivery with another event id resumes the same request",
			req:  Request{PR: planPR, HeadSHA: planHead, FixCycle: 1, EventID: "ev-9"}, rec: inFlight(nil), pr: open,
			want: action{kind: actResume, resume: resumeDiscard, cycle: 1, rec: inFlight(nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, plan(tt.req, tt.rec, tt.pr, planLim))
		})
	}
}

// TestPlan_Anchor: signals count from prloop's own push on the head it
// pushed, from the poller's anchor otherwise, and from nowhere without one.
func TestPlan_Anchor(t *testing.T) {
	t.Parallel()
	pushed, seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 9, 0, 0, time.UTC)
	tests := []struct {
		name string
		req  Request
		prev Record
		want time.Time
	}{
		{name: "the poller's anchor", req: Request{HeadSHA: planHead, Anchor: seen}, want: seen},
		{name: "prloop's own push", req: Request{HeadSHA: planNew, Anchor: seen}, prev: Record{PushedSHA: planNew, PushedAt: pushed}, want: pushed},
		{name: "prloop's push, the poller's anchor not known yet", req: Request{HeadSHA: planNew}, prev: Record{PushedSHA: planNew, PushedAt: pushed}, want: pushed},
		{name: "another head than prloop's push", req: Request{HeadSHA: planHead, Anchor: seen}, prev: Record{PushedSHA: planNew, PushedAt: pushed}, want: seen},
		{name: "no anchor: nothing counts", req: Request{HeadSHA: planHead}, prev: Record{PushedSHA: planNew, PushedAt: pushed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, anchor(tt.req, tt.prev))
		})
	}
}

// TestPlan_NextAgentStep: the agent loop runs while runs and budget are
// left, backing off after a failed run.
func TestPlan_NextAgentStep(t *testing.T) {
	t.Parallel()
	unbounded := planLim
	unbounded.AgentBudget = 0
	shortRuns := planLim
	shortRuns.AgentTimeout = 5 * time.Minute
	shortUnbounded := shortRuns
	shortUnbounded.AgentBudget = 0
	tests := []struct {
		name string
		rec  Record
		lim  limits
		want step
	}{
		{name: "first run, bounded by the budget", rec: Record{AgentSpent: 20 * time.Minute}, lim: planLim, want: step{kind: stepRun, timeout: 40 * time.Minute}},
		{name: "second run after the backoff", rec: Record{Runs: 1}, lim: planLim, want: step{kind: stepRun, wait: time.Second, timeout: time.Hour}},
		{name: "third run after twice the backoff", rec: Record{Runs: 2}, lim: planLim, want: step{kind: stepRun, wait: 2 * time.Second, timeout: time.Hour}},
		{name: "runs used up", rec: Record{Runs: 3}, lim: planLim, want: step{kind: stepRunsUsedUp}},
		{name: "budget spent, after the backoff", rec: Record{Runs: 1, AgentSpent: time.Hour}, lim: planLim, want: step{kind: stepBudgetSpent, wait: time.Second}},
		{name: "budget spent on earlier requests", rec: Record{AgentSpent: 2 * time.Hour}, lim: planLim, want: step{kind: stepBudgetSpent}},
		{name: "no budget: no bound", rec: Record{AgentSpent: 100 * time.Hour}, lim: unbounded, want: step{kind: stepRun}},
		{name: "the policy's agent timeout, shorter than the budget left", rec: Record{AgentSpent: 20 * time.Minute}, lim: shortRuns, want: step{kind: stepRun, timeout: 5 * time.Minute}},
		{name: "the budget left, shorter than the policy's agent timeout", rec: Record{AgentSpent: 58 * time.Minute}, lim: shortRuns, want: step{kind: stepRun, timeout: 2 * time.Minute}},
		{name: "no budget: the policy's agent timeout", rec: Record{AgentSpent: 100 * time.Hour}, lim: shortUnbounded, want: step{kind: stepRun, timeout: 5 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, next(tt.rec, tt.lim))
		})
	}
}

// TestPlan_Classify is the one table of what errors mean: which escalate
// as feedback_failed, which run the agent again, which retry the change
// request later, and how agent runs are counted.
func TestPlan_Classify(t *testing.T) {
	t.Parallel()
	agentFailed := errors.New("agent failed: exit status 1")
	tests := []struct {
		name          string
		agentErr, err error
		want          verdict
		permanent     bool
		againAfterRun bool
		agentOnResume bool
		metric        string
	}{
		{name: "fixed", want: verdictFixed, metric: metrics.AgentFixed},
		{name: "fixed though the agent failed", agentErr: agentFailed, want: verdictFixed, metric: metrics.AgentFixed},
		{name: "history rewritten", err: fmt.Errorf("x: %w", ErrRewritten), agentErr: agentFailed, want: verdictRewritten, permanent: true, metric: metrics.AgentRewritten},
		{name: "refused", err: fmt.Errorf("x: %w", ErrTooBig), want: verdictRefused, permanent: true, metric: metrics.AgentRefused},
		{name: "PR cannot be checked out", err: fmt.Errorf("x: %w", ErrUnusable), want: verdictUnusable, permanent: true, metric: metrics.AgentError},
		{name: "agent failed, no change", agentErr: agentFailed, err: fmt.Errorf("x: %w", ErrNoChange), want: verdictAgentFailed, againAfterRun: true, metric: metrics.AgentFailed},
		{name: "agent not found or not executable", agentErr: fmt.Errorf("agent failed: exit status 127: %w", ErrAgentNotRunnable), err: fmt.Errorf("x: %w", ErrNoChange), want: verdictNotRunnable, metric: metrics.AgentFailed},
		{name: "agent not runnable, yet a fix", agentErr: fmt.Errorf("agent failed: exit status 127: %w", ErrAgentNotRunnable), want: verdictFixed, metric: metrics.AgentFixed},
		{name: "agent failed, GitHub failed", agentErr: agentFailed, err: errors.New("GitHub: 502"), want: verdictAgentFailed, againAfterRun: true, metric: metrics.AgentFailed},
		{name: "no change", err: fmt.Errorf("x: %w", ErrNoChange), want: verdictNoChange, againAfterRun: true, agentOnResume: true, metric: metrics.AgentNoChange},
		{name: "git failed", err: fmt.Errorf("x: %w", ErrGit), want: verdictGitFailed, againAfterRun: true, metric: metrics.AgentGitError},
		{name: "GitHub or NATS", err: errors.New("nats: timeout"), want: verdictTransient, metric: metrics.AgentError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := classify(tt.agentErr, tt.err)
			assert.Equal(t, tt.want, v)
			assert.Equal(t, tt.permanent, v.permanent(), "permanent")
			assert.Equal(t, tt.againAfterRun, v.runsAgainAfterRun(), "runs again after a run")
			assert.Equal(t, tt.agentOnResume, v.runsAgentOnResume(), "runs the agent on a resume")
			assert.Equal(t, tt.metric, v.metric())
		})
	}
}

// TestOwnHead: a PR head that no push of the current step made is the
// agent's work only when prloop pushed it: recorded, or the mirror's
// result of a finished run that a dead process pushed without recording.
func TestOwnHead(t *testing.T) {
	t.Parallel()
	fix, other := sha40("f"), sha40("o")
	tests := []struct {
		name   string
		head   string
		result string
		rec    Record
		want   bool
	}{
		{name: "recorded push", head: fix, rec: Record{PushedSHA: fix, ResultSHA: fix}, want: true},
		{name: "this run's result, pushed before a crash", head: fix, result: fix, want: true},
		{name: "a finished run's recorded result", head: fix, rec: Record{ResultSHA: fix}, want: true},
		{name: "someone else's push", head: other, result: fix, rec: Record{ResultSHA: fix}},
		{name: "someone else's push, nothing of prloop's", head: other},
		{name: "no head", head: "", result: "", rec: Record{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, ownHead(tt.head, tt.result, tt.rec))
		})
	}
}

func sha40(c string) string { return strings.Repeat(c, 40) }
