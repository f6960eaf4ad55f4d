package feedback

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

// The executor of the budgets (budget.go has the rule): it asks
// judgeBudget before each run and after each line of a preset's stream,
// keeps the transcript, and adds each run's cost to the PR's record and to
// the day's spend.

// summaryFinalBytes bounds the agent's final message in an event.
const summaryFinalBytes = 1000

// budgetGate is asked before a run: the PR's cost budget spent escalates
// (a non-nil Result); the day's spent waits for the next UTC day and asks
// for the loop to start over (wait).
func (a *attempt) budgetGate(ctx context.Context) (res *Result, wait bool, err error) {
	now := a.now()
	day, err := a.records.daySpent(ctx, now)
	if err != nil {
		return nil, false, err
	}
	a.dayCost = day
	call := judgeBudget(a.cfg.budget(), spend{PRCostUSD: a.rec.AgentCostUSD, DayCostUSD: day})
	switch call.Kind {
	case budgetPRCost:
		a.log.Warn("the PR's agent cost budget is spent; escalating", "figures", call.Figures)
		r, err := a.escalate(ctx, events.ReasonAgentBudgetExhausted, "", call.Figures)
		return &r, false, err
	case budgetDay:
		until := nextUTCDay(now)
		a.log.Warn("the day's agent cost budget is spent; the run waits for the next UTC day", "figures", call.Figures, "until", until)
		if err := a.announceWait(ctx, day, until); err != nil {
			return nil, false, err
		}
		if err := a.sleep(ctx, until.Sub(now)); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	return nil, false, a.announceResume(ctx)
}

// announceWait tells the views that the agent's next run waits for the
// day's budget (PRAgentWaiting, state waiting), recorded first so that
// the end of the wait is told even after a crash. The event's id (with
// the change request's own, as an escalation's) makes it one per PR per
// wait, however often the attempt comes back here.
func (a *attempt) announceWait(ctx context.Context, day float64, until time.Time) error {
	if !a.rec.AgentWaitUntil.Equal(until) {
		a.rec.AgentWaitUntil = until
		if err := a.save(ctx); err != nil {
			return err
		}
	}
	return a.emitWait(ctx, &events.AgentWaiting{State: events.AgentWaitStarted, SpentUSD: roundCents(day),
		BudgetUSD: a.cfg.budget().DailyCostUSD, ResumeAt: until})
}

// announceResume tells the views that a wait announced is over and the
// run starts (PRAgentWaiting, state resumed); nothing when none was.
func (a *attempt) announceResume(ctx context.Context) error {
	until := a.rec.AgentWaitUntil
	if until.IsZero() {
		return nil
	}
	if err := a.emitWait(ctx, &events.AgentWaiting{State: events.AgentWaitEnded, ResumeAt: until}); err != nil {
		return err
	}
	a.rec.AgentWaitUntil = time.Time{}
	return a.save(ctx)
}

func (a *attempt) emitWait(ctx context.Context, w *events.AgentWaiting) error {
	if err := a.fence(ctx); err != nil {
		return err
	}
	w.Base, w.Reason, w.FixCycle = events.Base{PR: a.req.PR, HeadSHA: a.req.HeadSHA}, events.AgentWaitDailyBudget, a.req.FixCycle
	_, dup, err := a.emit.Emit(ctx, w, ghref.EventSHA(a.req.HeadSHA), strconv.Itoa(a.req.FixCycle), w.State, w.ResumeAt.UTC().Format(time.DateOnly), a.req.EventID)
	if err != nil {
		return err
	}
	a.log.Info("agent wait announced", "state", w.State, "resume_at", w.ResumeAt, "duplicate", dup)
	return nil
}

// streamed sets up a preset's run: its transcript beside the log, the
// budget check after each line, and where its stats go.
func (a *attempt) streamed(_ context.Context, run *AgentRun, logFile string) {
	a.stats, a.stoppedBy, a.budgetFigures = nil, budgetOK, ""
	if a.spec.Preset == PresetCommand {
		return
	}
	run.Transcript = strings.TrimSuffix(logFile, ".log") + ".jsonl"
	a.transcript = run.Transcript
	run.Stats = &RunStats{Preset: a.spec.Preset}
	a.stats = run.Stats
	// Read here, not in Check: Check runs on the stream's goroutine.
	b, prCost, dayCost := a.cfg.budget(), a.rec.AgentCostUSD, a.dayCost
	run.Check = func(st RunStats) error {
		if call := judgeBudget(b, spend{Turns: st.Turns, RunCostUSD: st.CostUSD, PRCostUSD: prCost, DayCostUSD: dayCost}); call.Kind != budgetOK {
			return &BudgetError{call: call}
		}
		return nil
	}
}

// account adds a preset run's cost to the PR's record and to the day's
// spend, counts it, and notes a budget that stopped it.
func (a *attempt) account(ctx context.Context, run AgentRun, agentErr error) {
	if run.Stats == nil {
		return
	}
	st := *run.Stats
	a.rec.AgentCostUSD += st.CostUSD
	if st.CostUSD > 0 {
		// The day's spend is shared by all PRs: a failure to count it is
		// logged, not a reason to lose the run's work.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := a.records.addDaySpend(sctx, a.now(), st.CostUSD); err != nil {
			a.log.Warn("the day's agent spend was not counted", "err", err, "cost_usd", st.CostUSD)
		}
		cancel()
	}
	outcome := metrics.AgentRunOK
	var be *BudgetError
	switch {
	case errors.As(agentErr, &be):
		outcome, a.stoppedBy, a.budgetFigures = metrics.AgentRunBudget, be.call.Kind, be.call.Figures
	case st.Subtype == "error_max_turns":
		// The CLI's own cap (PRLOOP_AGENT_ARGS may set a lower one).
		outcome, a.stoppedBy = metrics.AgentRunBudget, budgetTurns
		a.budgetFigures = "the agent stopped itself at its own --max-turns after " + strconv.Itoa(st.Turns) + " turns"
	case agentErr != nil:
		outcome = metrics.AgentRunFailed
	}
	a.metrics.Agent.Run(string(st.Preset), outcome, st.Turns, st.CostUSD)
	a.log.Info("agent run's stream", "preset", st.Preset, "turns", st.Turns, "cost_usd", st.CostUSD, "cost_reported", st.CostReported,
		"pr_cost_usd", a.rec.AgentCostUSD, "tools", st.Tools, "denials", st.Denials, "subtype", st.Subtype, "budget", a.stoppedBy)
}

// overBudget ends a run that a budget stopped: the PR's budget or the
// run's turns escalate (a non-nil Result); the day's budget resets the
// worktree and asks the loop to go round again, where budgetGate waits.
// A head someone else moved is left to the loop (nil, false, nil).
func (a *attempt) overBudget(ctx context.Context, agentErr, err error) (*Result, bool, error) {
	if a.stoppedBy == budgetOK || classify(agentErr, err) == verdictForeign || classify(agentErr, err) == verdictFixed {
		return nil, false, nil
	}
	if a.stoppedBy == budgetDay {
		if err := a.save(ctx); err != nil {
			return nil, false, err
		}
		return nil, true, a.git.Reset(ctx, a.wt, a.req.HeadSHA)
	}
	a.log.Warn("agent budget used up; escalating", "budget", a.stoppedBy, "figures", a.budgetFigures)
	r, err := a.escalate(ctx, events.ReasonAgentBudgetExhausted, errText(agentErr), a.budgetFigures)
	return &r, false, err
}

// summary is the last preset run's summary for an event, nil when none ran.
func (a *attempt) summary() *events.AgentRunSummary {
	if a.stats == nil {
		return nil
	}
	sm := a.stats.Summary(summaryFinalBytes)
	sm.PRCostUSD = roundCents(a.rec.AgentCostUSD)
	sm.Budget = string(a.stoppedBy)
	sm.Final = a.redact(sm.Final)
	if a.transcript != "" {
		sm.Transcript = filepath.Base(a.transcript)
	}
	return sm
}

func derefResult(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}
