package feedback

import (
	"errors"
	"fmt"
	"time"

	"github.com/prloop/prloop/pkg/backoff"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
)

// The feedback service's policy: what an attempt does about a change
// request, decided from the request, the service's own record of the PR and
// what GitHub says of the PR, without any I/O. The executor (attempt.go)
// gathers those facts, carries the action out and asks again at the points
// where the agent loop decides.

// limits are the settings the policy follows.
type limits struct {
	// MaxFixCycles bounds the fixes pushed to a PR (PRLOOP_MAX_FIX_CYCLES).
	MaxFixCycles int
	// Label is the escalation label: a PR carrying it is a human's.
	Label string
	// AgentAttempts bounds the agent runs per change request, AgentBudget
	// the agent's wall time per PR (0: unbounded), AgentBackoff the wait
	// before a second run, doubling after.
	AgentAttempts int
	AgentBudget   time.Duration
	AgentBackoff  time.Duration
	// AgentTimeout bounds one agent run (the base policy's agent.timeout,
	// at most PRLOOP_AGENT_TIMEOUT; 0: the agent's own bound).
	AgentTimeout time.Duration
	// BudgetSetting names where AgentBudget was set, and ForbidWorkflows
	// the setting that forbids the agent's changes under .github/workflows
	// ("" allows them): the escalation and refusal messages name them, so
	// that a person knows which setting to change.
	BudgetSetting   string
	ForbidWorkflows string
	// Rerun is PRLOOP_RERUN_FAILED_CHECKS; MaxCIFixCycles
	// PRLOOP_MAX_CI_FIX_CYCLES (0: checks fixes count against
	// MaxFixCycles).
	Rerun          bool
	MaxCIFixCycles int
}

// snapshot is what GitHub says of the PR when the attempt starts.
type snapshot struct {
	// Found is false when GitHub answered that the PR does not exist.
	Found bool
	// Open is false for a closed or merged PR.
	Open bool
	// Labelled says the PR carries the escalation label.
	Labelled bool
	// Head is the PR's head commit.
	Head string
}

// actionKind is what an attempt does about a change request.
type actionKind int

const (
	// actIgnore: the request names no usable head; nothing is published
	// or recorded.
	actIgnore actionKind = iota
	// actDuplicate: the record says the request was handled.
	actDuplicate
	// actSkip: the request needs no fix (PR gone, closed or labelled, head
	// moved); PRFeedbackSkipped says so.
	actSkip
	// actEscalate: a human must look; PREscalationRequested asks.
	actEscalate
	// actFix: run the agent on the head, from scratch.
	actFix
	// actResume: go on with an attempt that was interrupted after an agent
	// run started (see resumeMode).
	actResume
	// actRerun: re-run the failed GitHub Actions jobs of a head's first
	// failure instead of asking the agent (PRLOOP_RERUN_FAILED_CHECKS).
	actRerun
)

// resumeMode is how an interrupted attempt goes on. Every mode discards
// what the worktree holds; each then checks GitHub, and runs the agent
// again only when no fix is found there or in the mirror.
type resumeMode int

const (
	// resumeDiscard: the interrupted agent run did not end normally; its
	// work is half-finished and never pushed.
	resumeDiscard resumeMode = iota
	// resumePushResult: a run ended normally and its work is in the
	// mirror (Record.ResultSHA): check and push that, if the mirror still
	// has it.
	resumePushResult
	// resumePublishPushed: prloop pushed the fix (Record.PushedSHA):
	// confirm it on GitHub and publish PRFeedbackAddressed.
	resumePublishPushed
)

// action is the policy's answer.
type action struct {
	kind actionKind
	// why says why a request is skipped (actSkip), for the event; note
	// says what was found, for the log.
	why, note string
	// reason and detail are the escalation's (actEscalate).
	reason events.Reason
	detail string
	// resume is how an interrupted attempt goes on (actResume).
	resume resumeMode
	// cycle is the number of fixes pushed before this request's.
	cycle int
	// rec is the record to work on: the request's own when resuming, a
	// fresh one (keeping the PR's agent budget spent) otherwise, with
	// FixCycle numbering this request's fix.
	rec Record
}

// settled answers a request whose head is unusable or that the record
// says was handled, before anything else is looked at.
func settled(req Request, rec Record) (action, bool) {
	switch {
	case !shaRE.MatchString(req.HeadSHA):
		return action{kind: actIgnore}, true
	case rec.Handled(req):
		return action{kind: actDuplicate, rec: rec}, true
	}
	return action{}, false
}

// plan decides what an attempt does about req, given the service's record
// of the PR and GitHub's view of it.
func plan(req Request, rec Record, pr snapshot, lim limits) action {
	if a, ok := settled(req, rec); ok {
		return a
	}
	resuming := rec.InFlight(req) && rec.Runs > 0
	if !rec.InFlight(req) {
		rec = Record{Key: req.Key(), EventID: req.EventID, AgentSpent: rec.AgentSpent, CIFixes: rec.CIFixes, AgentCostUSD: rec.AgentCostUSD}
	}
	skip := func(why, note string) action { return action{kind: actSkip, why: why, note: note, rec: rec} }
	// The fix is on GitHub when the record says prloop pushed it, or when
	// GitHub's head is a finished run's result: a process that died
	// between the push and its record of it left the phase at
	// agent-finished.
	pushed := resuming && (rec.Phase == PhasePushed ||
		rec.Phase == PhaseAgentFinished && rec.ResultSHA != "" && rec.ResultSHA != req.HeadSHA && pr.Head == rec.ResultSHA)
	switch {
	case !pr.Found:
		return skip("the PR was not found", "PR not found")
	case pushed:
		// The fix is on GitHub: it is announced whatever happened since (a
		// label, a close). A push nobody announced is a fix cycle nobody
		// counts, and the poller holds its head back for good.
	case !pr.Open:
		return skip("the PR was closed", "PR closed or merged meanwhile")
	case pr.Labelled:
		return skip("the PR carries the label "+lim.Label, "PR carries the escalation label; a human has it, no agent runs")
	case pr.Head != req.HeadSHA && !resuming:
		// A resume finds the head moved by its own push, or by the
		// agent's: it checks what moved it.
		return skip("the head moved to "+ghref.EventSHA(pr.Head), "PR head moved since the change request; it is stale")
	}
	if req.Checks != nil && !resuming && req.Checks.Round == 1 && lim.Rerun && github.Rerunnable(req.FailedChecks) {
		return action{kind: actRerun, note: "re-running the failed jobs before asking the agent", rec: rec}
	}
	var cycle int
	if resuming && rec.FixCycle > 0 {
		// The poller may count this request's push already (a failure
		// after PRFeedbackAddressed): the record numbered the fix before
		// anything was pushed.
		cycle = rec.FixCycle - 1
	} else {
		cycle = req.FixCycle
		rec.FixCycle = cycle + 1
	}
	if resuming {
		mode := resumeDiscard
		switch {
		case rec.Phase == PhasePushed:
			mode = resumePublishPushed
		case rec.Phase == PhaseAgentFinished && rec.ResultSHA != "":
			mode = resumePushResult
		}
		return action{kind: actResume, resume: mode, cycle: cycle, rec: rec}
	}
	if req.Checks != nil {
		return planChecksFix(rec, cycle, lim)
	}
	if cycle >= lim.MaxFixCycles {
		return action{kind: actEscalate, reason: events.ReasonMaxFixCycles, note: "fix cycles used up", cycle: cycle, rec: rec,
			detail: fmt.Sprintf("prloop pushed %d fixes to this PR (PRLOOP_MAX_FIX_CYCLES=%d); a human must review the latest change request", cycle, lim.MaxFixCycles)}
	}
	return action{kind: actFix, cycle: cycle, rec: rec}
}

// anchor is the moment from which review signals on req's head count: the
// service's own push when req's head is the fix prev recorded pushing (the
// poller may not have seen it yet), the poller's anchor otherwise. Zero
// means unknown, and then nothing is addressed: a commit's dates are its
// author's to set and never decide which signals count.
func anchor(req Request, prev Record) time.Time {
	if prev.PushedSHA != "" && prev.PushedSHA == req.HeadSHA && !prev.PushedAt.IsZero() {
		return prev.PushedAt
	}
	return req.Anchor
}

// stepKind is the agent loop's next step.
type stepKind int

const (
	// stepRun: run the agent (again), after wait.
	stepRun stepKind = iota
	// stepBudgetSpent: the PR's agent budget is spent; escalate.
	stepBudgetSpent
	// stepRunsUsedUp: the request's agent runs are used up; escalate.
	stepRunsUsedUp
)

// step is the agent loop's next step, decided from the record.
type step struct {
	kind stepKind
	// wait comes before the step: the backoff after a failed run.
	wait time.Duration
	// timeout bounds the run: what is left of the budget, or the policy's
	// agent timeout if shorter (0: no bound but the agent's own).
	timeout time.Duration
}

// agentBackoff is the wait between agent runs (pkg/backoff): the
// configured backoff, doubling after each failed run, at most 10 times.
func agentBackoff(base time.Duration) backoff.Policy {
	return backoff.Policy{Base: base, MaxDoublings: 10}
}

// next decides the agent loop's next step for rec.
func next(rec Record, lim limits) step {
	if rec.Runs >= lim.AgentAttempts {
		return step{kind: stepRunsUsedUp}
	}
	var s step
	if rec.Runs > 0 {
		s.wait = agentBackoff(lim.AgentBackoff).Delay(rec.Runs)
	}
	left := lim.AgentBudget - rec.AgentSpent
	if lim.AgentBudget > 0 && left <= 0 {
		s.kind = stepBudgetSpent
		return s
	}
	s.timeout = max(0, left)
	if lim.AgentTimeout > 0 && (s.timeout == 0 || lim.AgentTimeout < s.timeout) {
		s.timeout = lim.AgentTimeout
	}
	return s
}

// verdict is what the outcome of an agent run, or of a resume's check of
// GitHub and the mirror, means for the change request. Written once: the
// agent loop, the resume, the setup and the metrics all read it.
type verdict int

const (
	// verdictFixed: the fix is verified on GitHub.
	verdictFixed verdict = iota
	// verdictRewritten, verdictRefused, verdictUnusable: retrying cannot
	// help (history rewritten, work prloop does not push, a PR prloop
	// cannot check out): escalate as feedback_failed.
	verdictRewritten
	verdictRefused
	verdictUnusable
	// verdictNotRunnable: the agent's command could not be run at all (it
	// is not found in the sandbox, or not executable there): escalate at
	// once as feedback_failed, since another run would fail the same way.
	verdictNotRunnable
	// verdictAgentFailed, verdictNoChange, verdictGitFailed: the agent
	// failed, changed nothing, or its work did not survive git: the agent
	// loop runs it again while runs are left.
	verdictAgentFailed
	verdictNoChange
	verdictGitFailed
	// verdictTransient: GitHub, NATS or an interruption: retry the change
	// request later (redelivery).
	verdictTransient
	// verdictForeign: someone else moved the head: the change request is
	// stale, and is skipped (the poller asks again about the new head).
	verdictForeign
)

// ownHead reports whether head, a PR head on GitHub that no push of the
// current step made, is prloop's own push for this attempt: the fix it
// recorded pushing (PushedSHA), or the agent's work as the mirror took it
// in (result, or the record's ResultSHA), which a process that died
// between its push and the record of it left on GitHub. Only prloop holds
// the credential that pushes the agent's work, so any other head is
// someone else's, whatever checks it would pass.
func ownHead(head, result string, rec Record) bool {
	if head == "" {
		return false
	}
	return head == rec.PushedSHA || head == result || head == rec.ResultSHA
}

// classify weighs an agent run's own error and the error of taking in and
// verifying its work (agentErr is nil outside a run), in that order: a
// verified fix counts whatever the agent said, a permanent refusal
// whatever caused it.
func classify(agentErr, err error) verdict {
	switch {
	case err == nil:
		return verdictFixed
	case errors.Is(err, ErrForeignHead):
		return verdictForeign
	case errors.Is(err, ErrRewritten):
		return verdictRewritten
	case errors.Is(err, ErrRefused):
		return verdictRefused
	case errors.Is(err, ErrUnusable):
		return verdictUnusable
	case errors.Is(agentErr, ErrAgentNotRunnable):
		return verdictNotRunnable
	case agentErr != nil:
		return verdictAgentFailed
	case errors.Is(err, ErrNoChange):
		return verdictNoChange
	case errors.Is(err, ErrGit):
		return verdictGitFailed
	}
	return verdictTransient
}

// permanent reports whether v escalates as feedback_failed.
func (v verdict) permanent() bool {
	return v == verdictRewritten || v == verdictRefused || v == verdictUnusable
}

// runsAgainAfterRun reports whether the agent loop runs the agent again
// after a run that ended in v.
func (v verdict) runsAgainAfterRun() bool {
	return v == verdictAgentFailed || v == verdictNoChange || v == verdictGitFailed
}

// runsAgentOnResume reports whether a resume that found v runs the agent:
// only when there is no fix to publish. Any other failure of the check
// (git or GitHub) retries the request later, before any agent runs.
func (v verdict) runsAgentOnResume() bool { return v == verdictNoChange }

// metric labels an agent run for prloop_feedback_agent_runs_total.
func (v verdict) metric() string {
	switch v {
	case verdictFixed:
		return metrics.AgentFixed
	case verdictRewritten:
		return metrics.AgentRewritten
	case verdictRefused:
		return metrics.AgentRefused
	case verdictAgentFailed, verdictNotRunnable:
		return metrics.AgentFailed
	case verdictNoChange:
		return metrics.AgentNoChange
	case verdictGitFailed:
		return metrics.AgentGitError
	}
	return metrics.AgentError
}
