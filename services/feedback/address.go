package feedback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

// apiTimeout bounds each GitHub call of an attempt (each page included).
const apiTimeout = 30 * time.Second

// pushVisibleWait bounds how long GitHub may take to show a pushed head on
// the PR: it updates pull requests asynchronously after a push.
const pushVisibleWait = 30 * time.Second

// Errors of a fix that retrying the agent cannot repair.
var (
	// ErrNoChange says the agent changed nothing: a failure, not a success.
	ErrNoChange = errors.New("the agent changed nothing")
	// ErrRewritten says the branch or the agent's work no longer descends
	// from the head the change request was about; prloop does not force-push.
	ErrRewritten = errors.New("history was rewritten; refusing to force-push")
)

// Result says what Address did about a change request.
type Result struct {
	Outcome Outcome
	// NewHead is the fixed head, for OutcomeAddressed.
	NewHead string
	// Reason is the escalation reason, for OutcomeEscalated.
	Reason events.Reason
}

// Address works on one change request, holding the PR's lease throughout.
// It returns an error when the request should be retried later: the PR is
// busy with another attempt (kvlease.ErrHeld), GitHub or NATS failed, or
// the attempt was interrupted (shutdown, lost lease). Everything else,
// success or not, ends in a Result and a record that makes a redelivery
// harmless.
func (s *Service) Address(ctx context.Context, req Request) (Result, error) {
	start := time.Now()
	res, err := s.address(ctx, req)
	s.d.Metrics.Attempt(attemptOutcome(res, err), time.Since(start))
	return res, err
}

// attemptOutcome labels an attempt for prloop_feedback_attempts_total.
func attemptOutcome(res Result, err error) string {
	switch {
	case errors.Is(err, kvlease.ErrHeld):
		return metrics.FeedbackBusy
	case err != nil:
		return metrics.FeedbackError
	}
	return string(res.Outcome)
}

func (s *Service) address(ctx context.Context, req Request) (Result, error) {
	log := s.d.Log.With("pr", req.PR.String(), "head", ghref.EventSHA(req.HeadSHA), "fix_cycle", req.FixCycle)
	if !shaRE.MatchString(req.HeadSHA) {
		log.Warn("change request without a usable head SHA; ignored")
		return Result{Outcome: OutcomeSkipped}, nil
	}
	rec, _, err := s.records.get(ctx, req.PR)
	if err != nil {
		return Result{}, err
	}
	if rec.Handled(req) {
		log.Info("change request already handled; nothing to do", "outcome", rec.Outcome)
		return Result{Outcome: OutcomeDuplicate, NewHead: rec.NewHead}, nil
	}
	lease, err := kvlease.Acquire(ctx, s.d.KV, leaseKey(req.PR), s.d.Holder, kvlease.Options{TTL: s.cfg.LeaseTTL, Note: req.Key(), Log: log})
	if err != nil {
		return Result{}, fmt.Errorf("attempt on %s: %w", req.PR, err)
	}
	actx, release := lease.Hold(ctx)
	context.AfterFunc(actx, func() {
		if cause := context.Cause(actx); errors.Is(cause, kvlease.ErrLost) {
			log.Warn("lease lost; stopping the attempt", "err", cause)
		}
	})
	a := &attempt{s: s, req: req, lease: lease, log: log}
	res, err := a.run(actx)
	cause := context.Cause(actx)
	release()
	if err != nil && cause != nil {
		return res, fmt.Errorf("attempt on %s interrupted: %w", req.PR, cause)
	}
	return res, err
}

// attempt is one replica's work on one change request, under its lease.
type attempt struct {
	s     *Service
	req   Request
	lease *kvlease.Lease
	log   *slog.Logger

	rec    Record
	recRev uint64
	cycle  int // fixes pushed so far
	pull   *gh.PullRequest
	git    *Git
	env    []string
	wt     Worktree
	files  string // prompt and logs, outside the worktree
	logs   []string
}

func (a *attempt) run(ctx context.Context) (Result, error) {
	s, req := a.s, a.req
	var err error
	if a.rec, a.recRev, err = s.records.get(ctx, req.PR); err != nil {
		return Result{}, err
	}
	if a.rec.Handled(req) {
		a.log.Info("change request already handled; nothing to do", "outcome", a.rec.Outcome)
		return Result{Outcome: OutcomeDuplicate, NewHead: a.rec.NewHead}, nil
	}
	resuming := a.rec.InFlight(req) && a.rec.Runs > 0
	if !a.rec.InFlight(req) {
		a.rec = Record{Key: req.Key(), EventID: req.EventID, AgentSpent: a.rec.AgentSpent}
	}

	st, _, err := s.d.Store.Get(ctx, req.PR)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return Result{}, err
	}
	if a.pull, err = a.getPull(ctx); errors.Is(err, github.ErrNotFound) {
		a.log.Warn("PR not found; nothing to do", "err", err)
		return a.skip(ctx, "the PR was not found")
	} else if err != nil {
		return Result{}, err
	}
	head := a.pull.GetHead().GetSHA()
	switch {
	case a.pull.GetState() != "open" || a.pull.GetMerged():
		a.log.Info("PR closed or merged meanwhile; nothing to do", "state", a.pull.GetState(), "merged", a.pull.GetMerged())
		return a.skip(ctx, "the PR was closed")
	case hasLabel(a.pull, s.cfg.EscalationLabel):
		a.log.Info("PR carries the escalation label; a human has it, no agent runs", "label", s.cfg.EscalationLabel)
		return a.skip(ctx, "the PR carries the label "+s.cfg.EscalationLabel)
	case head != req.HeadSHA && !resuming:
		a.log.Info("PR head moved since the change request; it is stale", "now", ghref.EventSHA(head))
		return a.skip(ctx, "the head moved to "+ghref.EventSHA(head))
	}
	if resuming && a.rec.FixCycle > 0 {
		// The PR's state may count this change request's push already
		// (a failure after its update): the record numbered the fix
		// before anything was pushed.
		a.cycle = a.rec.FixCycle - 1
	} else {
		a.cycle = max(req.FixCycle, st.FixCycle)
		a.rec.FixCycle = a.cycle + 1
	}
	if a.cycle >= s.cfg.MaxFixCycles && !resuming {
		a.log.Info("fix cycles used up; escalating", "max", s.cfg.MaxFixCycles)
		return a.escalate(ctx, events.ReasonMaxFixCycles, "",
			fmt.Sprintf("prloop pushed %d fixes to this PR (PRLOOP_MAX_FIX_CYCLES=%d); a human must review the latest change request", a.cycle, s.cfg.MaxFixCycles))
	}

	if err := a.setup(ctx, st, resuming); errors.Is(err, ErrUnusable) {
		return a.escalate(ctx, events.ReasonFeedbackFailed, err.Error(), "")
	} else if err != nil {
		return Result{}, err
	}
	if resuming {
		a.log.Info("resuming an interrupted attempt", "runs", a.rec.Runs, "phase", a.rec.Phase)
		// Whatever the worktree holds is never pushed on a resume: an
		// interrupted agent run left it half-finished, and a finished
		// run's work is in the mirror.
		if err := a.git.Reset(ctx, a.wt, req.HeadSHA); err != nil {
			return Result{}, err
		}
		result := ""
		if a.rec.Phase == PhaseAgentFinished && a.git.HasCommit(ctx, a.wt, a.rec.ResultSHA) {
			result = a.rec.ResultSHA
		}
		res, err := a.verify(ctx, result)
		switch {
		case err == nil:
			return a.addressed(ctx, res)
		case errors.Is(err, ErrRewritten), errors.Is(err, ErrRefused):
			return a.escalate(ctx, events.ReasonFeedbackFailed, err.Error(), "")
		case !errors.Is(err, ErrNoChange):
			return Result{}, err
		}
		a.log.Info("the interrupted agent run left no fix; running the agent again")
	}

	prompt, err := a.prompt(ctx, st)
	if err != nil {
		return Result{}, err
	}
	if prompt == "" {
		a.log.Info("no feedback to address on the head any more; nothing to do")
		return a.skip(ctx, "no feedback left to address")
	}
	return a.fix(ctx, prompt)
}

// fix runs the agent until a fix is verified or the runs are used up.
func (a *attempt) fix(ctx context.Context, prompt string) (Result, error) {
	s, start := a.s, a.req.HeadSHA
	var lastErr error
	if a.rec.LastError != "" {
		lastErr = errors.New(a.rec.LastError) // from before an interruption
	}
	for a.rec.Runs < s.cfg.AgentAttempts {
		if a.rec.Runs > 0 {
			wait := s.cfg.AgentBackoff << min(a.rec.Runs-1, 10)
			a.log.Info("retrying the agent", "after", wait, "runs", a.rec.Runs, "last_error", errText(lastErr))
			if err := s.sleep(ctx, wait); err != nil {
				return Result{}, err
			}
		}
		left := s.cfg.AgentBudget - a.rec.AgentSpent
		if s.cfg.AgentBudget > 0 && left <= 0 {
			a.log.Warn("agent budget spent; escalating", "spent", a.rec.AgentSpent, "budget", s.cfg.AgentBudget)
			return a.escalate(ctx, events.ReasonAgentBudgetExhausted, errText(lastErr),
				fmt.Sprintf("the agent ran %s on this PR (PRLOOP_AGENT_BUDGET=%s)", a.rec.AgentSpent.Round(time.Second), s.cfg.AgentBudget))
		}
		a.rec.Runs++
		a.rec.Phase, a.rec.ResultSHA = PhaseAgentStarted, ""
		if err := a.save(ctx); err != nil {
			return Result{}, err
		}
		logFile := filepath.Join(a.files, fmt.Sprintf("agent-%s-c%d-r%d.log", ghref.EventSHA(start), a.req.FixCycle, a.rec.Runs))
		a.logs = append(a.logs, logFile)
		a.log.Info("running the agent", "run", a.rec.Runs, "of", s.cfg.AgentAttempts, "worktree", a.wt.Dir, "log", logFile)
		began := time.Now()
		agentErr := s.agent.Run(ctx, AgentRun{
			Dir: a.wt.Dir, Prompt: prompt, PromptFile: filepath.Join(a.files, "prompt.md"), LogFile: logFile,
			Env:     append(slices.Clip(a.env), "PRLOOP_PR="+a.req.PR.String(), "PRLOOP_BRANCH="+a.wt.Branch),
			Timeout: max(0, left),
		})
		a.rec.AgentSpent += time.Since(began)
		if ctx.Err() != nil {
			// Counted even so: an interrupted run cost its time too.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = a.save(sctx)
			cancel()
			return Result{}, context.Cause(ctx)
		}
		var result string
		var err error
		if agentErr == nil {
			// Only the work of a run that ended normally is taken in, and
			// recorded as taken in before anything is pushed.
			msg := fmt.Sprintf("address review feedback on #%d", a.req.PR.Number)
			if result, err = a.git.Export(ctx, a.wt, start, msg); err == nil {
				a.rec.Phase, a.rec.ResultSHA = PhaseAgentFinished, result
			}
		}
		if err := a.save(ctx); err != nil {
			return Result{}, err
		}
		var res fixResult
		if err == nil {
			res, err = a.verify(ctx, result)
		}
		s.d.Metrics.AgentRun(agentResult(agentErr, err))
		switch {
		case err == nil:
			if agentErr != nil {
				a.log.Warn("the agent failed but had pushed a fix; keeping it", "err", agentErr)
			}
			return a.addressed(ctx, res)
		case errors.Is(err, ErrRewritten), errors.Is(err, ErrRefused):
			return a.escalate(ctx, events.ReasonFeedbackFailed, err.Error(), "")
		case agentErr != nil:
			lastErr = agentErr
		case errors.Is(err, ErrNoChange), errors.Is(err, ErrGit):
			lastErr = err
		default:
			return Result{}, err // GitHub or NATS: retry the change request later
		}
		a.log.Warn("agent run failed", "run", a.rec.Runs, "err", lastErr)
		a.rec.LastError = lastErr.Error()
		if err := a.git.Reset(ctx, a.wt, start); err != nil {
			return Result{}, err
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no agent run left (PRLOOP_AGENT_ATTEMPTS)")
	}
	return a.escalate(ctx, events.ReasonFeedbackFailed, lastErr.Error(), "")
}

// agentResult labels an agent run for prloop_feedback_agent_runs_total,
// from its own error and the verification of its work, in the order fix
// weighs them.
func agentResult(agentErr, verifyErr error) string {
	switch {
	case verifyErr == nil:
		return metrics.AgentFixed
	case errors.Is(verifyErr, ErrRewritten):
		return metrics.AgentRewritten
	case errors.Is(verifyErr, ErrRefused):
		return metrics.AgentRefused
	case agentErr != nil:
		return metrics.AgentFailed
	case errors.Is(verifyErr, ErrNoChange):
		return metrics.AgentNoChange
	case errors.Is(verifyErr, ErrGit):
		return metrics.AgentGitError
	}
	return metrics.AgentError
}

// setup prepares the credentials-free environment and the worktree: the
// watch request's worktree when it is usable, prloop's own clone otherwise.
func (a *attempt) setup(ctx context.Context, st state.PR, resuming bool) error {
	s := a.s
	tok, err := s.d.GitHub.GitToken(ctx)
	if err != nil {
		return err
	}
	a.env = SafeEnv(s.d.Environ(), tok.Reveal())
	g := *s.git
	g.Env = a.env
	a.git = &g

	pr := a.req.PR
	base := filepath.Join(s.worksDir, strings.ToLower(pr.Owner), strings.ToLower(pr.Repo))
	a.files = filepath.Join(base, "pr-"+strconv.Itoa(pr.Number)+".d")
	if err := os.MkdirAll(a.files, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", a.files, err)
	}
	remote := a.pull.GetHead().GetRepo().GetCloneURL()
	branch := a.pull.GetHead().GetRef()
	// The mirror and the bundles sit beside the worktree, never in it: the
	// agent's sandbox sees only the worktree and the prompt.
	mirror, out := filepath.Join(base, "mirror.git"), filepath.Join(a.files, "out")
	if st.Worktree != "" {
		wt := Worktree{Dir: st.Worktree, Remote: remote, Branch: branch, Mirror: mirror, Number: pr.Number, Out: out}
		if resuming && a.rec.Worktree == st.Worktree {
			// The untracked files there now may be the interrupted
			// agent's: the user's are those from before the attempt.
			wt.Keep = map[string]bool{}
			for _, f := range a.rec.UserFiles {
				wt.Keep[f] = true
			}
		}
		why, err := a.git.Adopt(ctx, &wt, a.req.HeadSHA, resuming)
		if err == nil && why == "" {
			a.wt = wt
			a.rec.Worktree, a.rec.UserFiles = wt.Dir, slices.Sorted(maps.Keys(wt.Keep))
			return nil
		}
		a.log.Info("not using the watch request's worktree; cloning", "worktree", st.Worktree, "why", why, "err", err)
	}
	a.wt = Worktree{Dir: filepath.Join(base, "pr-"+strconv.Itoa(pr.Number)), Own: true, Remote: remote, Branch: branch, Mirror: mirror, Number: pr.Number, Out: out}
	a.rec.Worktree, a.rec.UserFiles = "", nil
	return a.git.Clone(ctx, a.wt, a.req.HeadSHA)
}

// prompt gathers the feedback and renders the prompt; "" means there is
// nothing to address.
func (a *attempt) prompt(ctx context.Context, st state.PR) (string, error) {
	s, pr, head := a.s, a.req.PR, a.req.HeadSHA
	anchor := st.HeadAnchor
	switch {
	case head == st.PushedHeadSHA && !st.PushedAt.IsZero():
		anchor = st.PushedAt // prloop's own push, not yet seen by the poller
	case st.HeadSHA != head || anchor.IsZero():
		// The poller, which asked for the change, has no anchor for this
		// head. The commit's dates are its author's to set and never
		// decide which signals count: nothing to address.
		a.log.Info("no anchor for the head in the poller's record", "recorded_head", ghref.EventSHA(st.HeadSHA))
		return "", nil
	}
	sig, err := review.Gather(ctx, timeoutSource{s.d.GitHub}, pr, anchor)
	if err != nil {
		return "", err
	}
	perms := s.auth.For(ctx, pr.RepoRef(), a.log)
	v := review.Evaluate(sig, review.Head{SHA: head, Anchor: anchor, Author: a.pull.GetUser().GetLogin(), Addressed: st.Addressed()}, s.policy, perms.Authorized)
	if err := perms.Err(); err != nil {
		// Without every reviewer's permission the feedback is not known:
		// try again later rather than skip or address part of it.
		return "", fmt.Errorf("gather feedback of %s: %w", pr, err)
	}
	if v.Status != events.StatusChangesRequested || len(v.Feedback) == 0 {
		a.log.Info("review status is no longer changes requested", "status", v.Status)
		return "", nil
	}
	data := PromptData{
		URL: a.pull.GetHTMLURL(), Ref: pr.String(), Title: SanitizeLine(a.pull.GetTitle()), Branch: SanitizeLine(a.wt.Branch),
		HeadSHA: head, FixCycle: a.cycle, ContextPath: SanitizeLine(st.ContextPath),
		Comments: Comments(v.Feedback, s.cfg.PromptMaxBytes),
		LeftOut:  LeftOut(v.Ignored), LeftOutCount: len(v.Ignored),
	}
	if data.URL == "" {
		data.URL = pr.URL
	}
	if st.ContextPath != "" {
		// A relative context path is in the watch request's worktree (an
		// untracked .specify/, say), even when prloop works in its clone.
		var err error
		for _, root := range slices.Compact([]string{st.Worktree, a.wt.Dir}) {
			if root == "" {
				continue
			}
			if data.Context, data.ContextOmitted, err = ReadContext(root, st.ContextPath, s.cfg.ContextMaxBytes); err == nil {
				break
			}
		}
		if err != nil {
			a.log.Warn("spec context not included", "context", st.ContextPath, "err", err)
		}
	}
	a.log.Info("feedback gathered", "comments", len(data.Comments), "context_files", len(data.Context))
	return Render(s.tmpl, data)
}

// fixResult is a verified fix.
type fixResult struct {
	head     string
	pushedAt time.Time
}

// verify establishes whether the PR's branch on GitHub moved from the
// change request's head to a descendant, pushing result first when it is
// set: the work of an agent run that ended normally, as the mirror took it
// in (Export). Every decision is made in prloop's mirror; checking that the
// branch exists would prove nothing: it existed before.
func (a *attempt) verify(ctx context.Context, result string) (fixResult, error) {
	start := a.req.HeadSHA
	remote, err := a.remoteHead(ctx)
	if err != nil {
		return fixResult{}, err
	}
	if remote != start {
		if _, err := a.git.Sync(ctx, a.wt); err != nil {
			return fixResult{}, err
		}
	}
	target, pushed := remote, false
	if result != "" && result != remote {
		if ok, err := a.git.IsAncestor(ctx, a.wt, remote, result); err != nil {
			return fixResult{}, err
		} else if ok {
			target, pushed = result, true
		} else if behind, err := a.git.IsAncestor(ctx, a.wt, result, remote); err != nil {
			return fixResult{}, err
		} else if !behind {
			return fixResult{}, fmt.Errorf("local %s and the branch's %s diverged: %w", ghref.EventSHA(result), ghref.EventSHA(remote), ErrRewritten)
		}
	}
	if target == start {
		return fixResult{}, fmt.Errorf("fix for %s: %w", a.req.PR, ErrNoChange)
	}
	if ok, err := a.git.IsAncestor(ctx, a.wt, start, target); err != nil {
		return fixResult{}, err
	} else if !ok {
		return fixResult{}, fmt.Errorf("%s does not descend from %s: %w", ghref.EventSHA(target), ghref.EventSHA(start), ErrRewritten)
	}
	if !pushed {
		at := a.s.d.Now()
		if a.rec.PushedSHA == target && !a.rec.PushedAt.IsZero() {
			at = a.rec.PushedAt
		}
		return fixResult{head: target, pushedAt: at}, nil
	}
	if err := a.git.Inspect(ctx, a.wt, remote, target, a.s.cfg.AgentMaxCommits, a.s.cfg.AgentMayEditWorkflows); err != nil {
		return fixResult{}, err
	}
	if err := a.fence(ctx); err != nil {
		return fixResult{}, err
	}
	if err := a.git.Push(ctx, a.wt, target); err != nil {
		return fixResult{}, err
	}
	at := a.s.d.Now()
	a.log.Info("pushed the fix", "new_head", ghref.EventSHA(target))
	a.rec.Phase, a.rec.PushedSHA, a.rec.PushedAt = PhasePushed, target, at
	if err := a.save(ctx); err != nil {
		return fixResult{}, err
	}
	if err := a.awaitHead(ctx, target); err != nil {
		return fixResult{}, err
	}
	return fixResult{head: target, pushedAt: at}, nil
}

// awaitHead waits until GitHub shows want as the PR's head.
func (a *attempt) awaitHead(ctx context.Context, want string) error {
	deadline := time.Now().Add(pushVisibleWait)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		got, err := a.remoteHead(ctx)
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pushed %s to %s but GitHub shows head %s after %s", ghref.EventSHA(want), a.req.PR, ghref.EventSHA(got), pushVisibleWait)
		}
		if err := a.s.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// remoteHead asks GitHub for the PR's head, and checks it is still open.
func (a *attempt) remoteHead(ctx context.Context) (string, error) {
	p, err := a.getPull(ctx)
	if err != nil {
		return "", err
	}
	if p.GetState() != "open" {
		return "", fmt.Errorf("%s was closed during the attempt", a.req.PR)
	}
	return p.GetHead().GetSHA(), nil
}

func (a *attempt) getPull(ctx context.Context) (*gh.PullRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return a.s.d.GitHub.GetPull(ctx, a.req.PR)
}

// addressed records the fix in the PR's state, publishes it, and records
// that it did. The state goes first so that whoever reacts to the event
// finds it up to date; a crash in between repeats both, harmlessly.
func (a *attempt) addressed(ctx context.Context, res fixResult) (Result, error) {
	pr := a.req.PR
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	_, err := a.s.d.Store.Update(ctx, pr, func(p *state.PR) error {
		if p.FixCycle >= a.cycle+1 && p.PushedHeadSHA == res.head {
			return state.ErrNoChange
		}
		p.FixCycle = max(p.FixCycle, a.cycle+1)
		p.PushedHeadSHA, p.PushedAt, p.LastPushAt = res.head, res.pushedAt.UTC(), res.pushedAt.UTC()
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	_, dup, err := a.s.emit.Emit(ctx, &events.FeedbackAddressed{
		Base: events.Base{PR: pr, HeadSHA: res.head}, PreviousHeadSHA: a.req.HeadSHA,
		FixCycle: a.cycle + 1, PushedAt: res.pushedAt.UTC(), Actor: Name, Detail: a.detail(),
	}, ghref.EventSHA(a.req.HeadSHA), strconv.Itoa(a.req.FixCycle))
	if err != nil {
		return Result{}, err
	}
	a.rec.Outcome, a.rec.NewHead = OutcomeAddressed, res.head
	if err := a.save(ctx); err != nil {
		return Result{}, err
	}
	a.log.Info("feedback addressed", "new_head", ghref.EventSHA(res.head), "new_fix_cycle", a.cycle+1, "duplicate", dup)
	return Result{Outcome: OutcomeAddressed, NewHead: res.head}, nil
}

// escalate asks for a human and records it.
func (a *attempt) escalate(ctx context.Context, reason events.Reason, lastErr, detail string) (Result, error) {
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	if detail == "" {
		detail = a.detail()
	}
	// The id carries the change request's event id: a redelivery asks
	// once, the same change request published anew after a human removed
	// the label (see "Event ids" in package events) asks again.
	_, _, err := a.s.emit.Emit(ctx, &events.EscalationRequested{
		Base: events.Base{PR: a.req.PR, HeadSHA: a.req.HeadSHA}, Reason: reason, Severity: events.SeverityBlocking,
		FixCycle: a.cycle, Detail: detail, LastError: lastErr,
		HumanReviewRequired: reason == events.ReasonMaxFixCycles, Actor: Name,
	}, string(reason), ghref.EventSHA(a.req.HeadSHA), strconv.Itoa(a.req.FixCycle), a.req.EventID)
	if err != nil {
		return Result{}, err
	}
	a.rec.Outcome, a.rec.LastError = OutcomeEscalated, lastErr
	if err := a.save(ctx); err != nil {
		return Result{}, err
	}
	a.log.Warn("escalation requested", "reason", reason, "last_error", lastErr)
	return Result{Outcome: OutcomeEscalated, Reason: reason}, nil
}

// skip ends the change request without a fix: it tells the poller, which
// holds back every event about a new head while a change request on the
// old one is being addressed (so that a fix's PRFeedbackAddressed precedes
// every event about the fix's head), and records the outcome so that a
// redelivery does not look again. The event's id carries the change
// request's own id: a later change request on the same head is skipped
// with an event of its own, not dropped as a duplicate.
func (a *attempt) skip(ctx context.Context, why string) (Result, error) {
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	if _, _, err := a.s.emit.Emit(ctx, &events.FeedbackSkipped{
		Base: events.Base{PR: a.req.PR, HeadSHA: a.req.HeadSHA}, FixCycle: a.req.FixCycle, Actor: Name, Detail: why,
	}, a.req.EventID); err != nil {
		return Result{}, err
	}
	a.rec.Outcome = OutcomeSkipped
	if err := a.save(ctx); err != nil {
		return Result{}, err
	}
	return Result{Outcome: OutcomeSkipped}, nil
}

// fence renews the lease before a side effect, so the effect happens
// while this attempt surely holds the PR: a renewal fails once anyone else
// has taken the lease.
func (a *attempt) fence(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.s.cfg.LeaseTTL/4)
	defer cancel()
	return a.lease.Renew(ctx)
}

// save writes the record, fenced by the lease.
func (a *attempt) save(ctx context.Context) error {
	if err := a.fence(ctx); err != nil {
		return err
	}
	a.rec.Holder, a.rec.UpdatedAt = a.s.d.Holder, a.s.d.Now().UTC()
	rev, err := a.s.records.put(ctx, a.req.PR, a.rec, a.recRev)
	if err != nil {
		return err
	}
	a.recRev = rev
	return nil
}

// detail links the agent logs from the event.
func (a *attempt) detail() string {
	if len(a.logs) == 0 {
		return ""
	}
	return "agent log: " + a.logs[len(a.logs)-1]
}

func hasLabel(p *gh.PullRequest, name string) bool {
	for _, l := range p.Labels {
		if name != "" && strings.EqualFold(l.GetName(), name) {
			return true
		}
	}
	return false
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// timeoutSource gives each GitHub call Gather makes its own deadline.
type timeoutSource struct{ gh GitHub }

var _ review.Source = timeoutSource{}

func (t timeoutSource) ListReactions(ctx context.Context, pr ghref.PR) ([]github.Reaction, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return t.gh.ListReactions(ctx, pr)
}

func (t timeoutSource) ListIssueComments(ctx context.Context, pr ghref.PR, since time.Time) ([]*gh.IssueComment, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return t.gh.ListIssueComments(ctx, pr, since)
}

func (t timeoutSource) ListReviews(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestReview, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return t.gh.ListReviews(ctx, pr)
}

func (t timeoutSource) ListReviewComments(ctx context.Context, pr ghref.PR) ([]*gh.PullRequestComment, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return t.gh.ListReviewComments(ctx, pr)
}
