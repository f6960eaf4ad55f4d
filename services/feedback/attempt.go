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
	"text/template"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
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
	// ErrForeignHead says the PR's head moved to a commit prloop did not
	// push: someone else's work, which is never announced as the agent's.
	ErrForeignHead = errors.New("the head moved to a commit prloop did not push")
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

// Agent runs the coding agent (sandboxAgent; fakes in the executor's
// tests).
type Agent interface {
	Run(ctx context.Context, r AgentRun) error
}

var _ Agent = (*sandboxAgent)(nil)

func (s *Service) address(ctx context.Context, req Request) (Result, error) {
	log := s.d.Log.With("pr", req.PR.String(), "head", ghref.EventSHA(req.HeadSHA), "fix_cycle", req.FixCycle)
	rec, _, err := s.records.get(ctx, req.PR)
	if err != nil {
		return Result{}, err
	}
	// The cheap answers come before the lease: a redelivery of a handled
	// request must not wait for the PR's next attempt.
	if act, ok := settled(req, rec); ok {
		return settledResult(act, log), nil
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
	a := &attempt{attemptDeps: s.attemptDeps(), req: req, lease: lease, log: log}
	res, err := a.run(actx)
	cause := context.Cause(actx)
	release()
	if err != nil && cause != nil {
		return res, fmt.Errorf("attempt on %s interrupted: %w", req.PR, cause)
	}
	return res, err
}

// settledResult is the Result of an action settled decided.
func settledResult(act action, log *slog.Logger) Result {
	if act.kind == actIgnore {
		log.Warn("change request without a usable head SHA; ignored")
		return Result{Outcome: OutcomeSkipped}
	}
	log.Info("change request already handled; nothing to do", "outcome", act.rec.Outcome)
	return Result{Outcome: OutcomeDuplicate, NewHead: act.rec.NewHead}
}

// attemptDeps are what an attempt uses of its service, given to it
// explicitly when it starts: the settings, the clock, GitHub, the records
// and the emitter, the agent and its command, the prompt's template and
// review policy, the base's policy reader, git, the wait between runs and
// the workspace. An attempt reaches nothing else of the Service.
type attemptDeps struct {
	cfg      Config
	gh       GitHub
	now      func() time.Time
	holder   string // this replica, in the record it writes
	environ  func() []string
	metrics  *metrics.Feedback
	records  records
	emit     *events.Emitter
	agent    Agent
	spec     agentSpec
	tmpl     *template.Template
	auth     *review.Authorization
	policy   review.Policy
	pol      *policy.Reader
	newGit   func(env []string) Git
	sleep    func(ctx context.Context, d time.Duration) error
	worksDir string
}

// attemptDeps are the service's parts an attempt uses.
func (s *Service) attemptDeps() attemptDeps {
	return attemptDeps{
		cfg: s.cfg, gh: s.d.GitHub, now: s.d.Now, holder: s.d.Holder, environ: s.d.Environ, metrics: s.d.Metrics,
		records: s.records, emit: s.emit, agent: s.agent, spec: s.spec, tmpl: s.tmpl,
		auth: s.auth, policy: s.policy, pol: s.pol, newGit: s.newGit, sleep: s.sleep, worksDir: s.worksDir,
	}
}

// attempt is one replica's work on one change request, under its lease:
// the executor of the policy's actions.
type attempt struct {
	attemptDeps
	req   Request
	lease *kvlease.Lease
	log   *slog.Logger

	rec    Record
	recRev uint64
	// prev is the record as the attempt found it: it knows prloop's last
	// push, whose head the poller may not have seen yet.
	prev  Record
	cycle int // fixes pushed so far
	pull  *gh.PullRequest
	// lim are the limits of the PR's base policy (the operator's until
	// the PR is read): the attempt's every decision and check uses them.
	lim   limits
	git   Git
	env   []string
	wt    Worktree
	files string // prompt and logs, outside the worktree
	logs  []string
	// stats is what the last preset run's stream said (nil: none ran).
	stats *RunStats
	// stoppedBy names the budget that stopped the last run, if any, and
	// budgetFigures says by how much; transcript is the last run's
	// transcript; dayCost the day's spend across PRs before the run.
	stoppedBy     budgetKind
	budgetFigures string
	transcript    string
	dayCost       float64
}

func (a *attempt) run(ctx context.Context) (Result, error) {
	req := a.req
	var err error
	if a.prev, a.recRev, err = a.records.get(ctx, req.PR); err != nil {
		return Result{}, err
	}
	if act, ok := settled(req, a.prev); ok {
		return settledResult(act, a.log), nil // handled while this replica waited for the lease
	}
	snap := snapshot{}
	if a.pull, err = a.getPull(ctx); errors.Is(err, github.ErrNotFound) {
		a.log.Warn("PR not found", "err", err)
	} else if err != nil {
		return Result{}, err
	} else {
		snap = snapshot{
			Found: true, Open: a.pull.GetState() == "open" && !a.pull.GetMerged(),
			Labelled: hasLabel(a.pull, a.cfg.EscalationLabel), Head: a.pull.GetHead().GetSHA(),
		}
	}
	a.lim = a.cfg.limits()
	if snap.Found {
		eff, err := a.policyOf(ctx)
		if err != nil {
			return Result{}, err
		}
		if eff.Invalid != nil {
			a.log.Warn("the base's policy file is invalid; no agent runs", "why", eff.Invalid)
			return a.skip(ctx, eff.Invalid.Error())
		}
		a.lim = a.cfg.limitsUnder(eff)
	}
	act := plan(req, a.prev, snap, a.lim)
	a.rec, a.cycle = act.rec, act.cycle
	if act.kind == actRerun {
		a.log.Info(act.note)
		res, err := a.rerun(ctx)
		if !errors.Is(err, errNoRerun) {
			return res, err
		}
		// GitHub would not re-run them (no permission, a run too old):
		// the agent gets the failure at once.
		a.log.Warn("the failed jobs were not re-run; asking the agent", "err", err)
		lim := a.lim
		lim.Rerun = false
		act = plan(req, a.prev, snap, lim)
		a.rec, a.cycle = act.rec, act.cycle
	}
	switch act.kind {
	case actIgnore, actDuplicate:
		return settledResult(act, a.log), nil
	case actSkip:
		a.log.Info(act.note+"; nothing to do", "why", act.why)
		return a.skip(ctx, act.why)
	case actEscalate:
		a.log.Info(act.note+"; escalating", "max", a.cfg.MaxFixCycles)
		detail := act.detail
		if req.Checks != nil {
			// The comment quotes what fails, so that the human starts there.
			checks, err := a.gatherChecks(ctx)
			if err != nil {
				return Result{}, err
			}
			detail += ":" + checksExcerpt(checks)
		}
		return a.escalate(ctx, act.reason, "", detail)
	}

	resuming := act.kind == actResume
	err = a.setup(ctx, resuming)
	if err == nil && req.baseBranch() != "" {
		err = a.conflictBase(ctx)
	}
	if classify(nil, err).permanent() {
		return a.escalate(ctx, a.failReason(), err.Error(), "")
	} else if err != nil {
		return Result{}, err
	}
	if resuming {
		res, done, err := a.resume(ctx, act.resume)
		if done || err != nil {
			return res, err
		}
	}

	var prompt string
	if req.Conflict != nil {
		prompt, err = a.conflictPrompt(ctx)
		if errors.Is(err, errCleanMerge) {
			// The merger saw a conflict that prloop's git does not: a human
			// looks rather than an agent changing a mergeable PR.
			a.log.Warn("no conflict to resolve in the mirror; escalating", "err", err)
			return a.escalate(ctx, events.ReasonMergeConflict, err.Error(),
				"GitHub reported a conflict with "+SanitizeLine(req.Conflict.BaseBranch)+", but the head merges cleanly with its tip; a human should look")
		}
	} else {
		prompt, err = a.prompt(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	if prompt == "" {
		a.log.Info("no feedback to address on the head any more; nothing to do")
		return a.skip(ctx, "no feedback left to address")
	}
	return a.fix(ctx, prompt)
}

// resume goes on with an interrupted attempt: it publishes the fix found
// on GitHub or in the mirror, or escalates, and reports done; or it finds
// no fix, and the agent runs again.
func (a *attempt) resume(ctx context.Context, mode resumeMode) (Result, bool, error) {
	a.log.Info("resuming an interrupted attempt", "runs", a.rec.Runs, "phase", a.rec.Phase)
	// Whatever the worktree holds is never pushed on a resume: an
	// interrupted agent run left it half-finished, and a finished run's
	// work is in the mirror.
	if err := a.git.Reset(ctx, a.wt, a.req.HeadSHA); err != nil {
		return Result{}, true, err
	}
	result := ""
	if mode == resumePushResult && a.git.HasCommit(ctx, a.wt, a.rec.ResultSHA) {
		result = a.rec.ResultSHA
	}
	fixed, err := a.verify(ctx, result)
	switch v := classify(nil, err); {
	case v == verdictFixed:
		res, err := a.addressed(ctx, fixed)
		return res, true, err
	case v == verdictForeign:
		res, err := a.skipForeign(ctx, err)
		return res, true, err
	case v.permanent():
		res, err := a.escalate(ctx, a.failReason(), err.Error(), "")
		return res, true, err
	case !v.runsAgentOnResume():
		return Result{}, true, err
	}
	a.log.Info("the interrupted agent run left no fix; running the agent again")
	return Result{}, false, nil
}

// fix runs the agent until a fix is verified or the runs are used up.
func (a *attempt) fix(ctx context.Context, prompt string) (Result, error) {
	start, lim := a.req.HeadSHA, a.lim
	var lastErr error
	if a.rec.LastError != "" {
		lastErr = errors.New(a.rec.LastError) // from before an interruption
	}
	for st := next(a.rec, lim); st.kind != stepRunsUsedUp; st = next(a.rec, lim) {
		if st.wait > 0 {
			a.log.Info("retrying the agent", "after", st.wait, "runs", a.rec.Runs, "last_error", errText(lastErr))
			if err := a.sleep(ctx, st.wait); err != nil {
				return Result{}, err
			}
		}
		if st.kind == stepBudgetSpent {
			a.log.Warn("agent budget spent; escalating", "spent", a.rec.AgentSpent, "budget", lim.AgentBudget)
			return a.escalate(ctx, events.ReasonAgentBudgetExhausted, errText(lastErr),
				fmt.Sprintf("the agent ran %s on this PR (%s)", a.rec.AgentSpent.Round(time.Second), lim.BudgetSetting))
		}
		if res, wait, err := a.budgetGate(ctx); err != nil || res != nil {
			return derefResult(res), err
		} else if wait {
			continue
		}
		if err := a.prepareRun(ctx); classify(nil, err).permanent() {
			return a.escalate(ctx, a.failReason(), err.Error(), "")
		} else if err != nil {
			return Result{}, err
		}
		a.rec.Runs++
		a.rec.Phase, a.rec.ResultSHA = PhaseAgentStarted, ""
		if err := a.save(ctx); err != nil {
			return Result{}, err
		}
		logFile := a.logFile(a.rec.Runs)
		a.logs = append(a.logs, logFile)
		a.log.Info("running the agent", "run", a.rec.Runs, "of", a.cfg.AgentAttempts, "worktree", a.wt.Dir, "log", logFile)
		began := time.Now()
		run := AgentRun{
			Dir: a.wt.Dir, Prompt: prompt, PromptFile: filepath.Join(a.files, "prompt.md"), LogFile: logFile,
			Env: append(append(slices.Clip(a.env), "PRLOOP_PR="+a.req.PR.String(), "PRLOOP_BRANCH="+a.wt.Branch),
				agentIdentity(a.cfg.GitAuthorName, a.cfg.GitAuthorEmail)...),
			Timeout: st.timeout,
		}
		a.streamed(ctx, &run, logFile)
		agentErr := a.agent.Run(ctx, run)
		a.rec.AgentSpent += time.Since(began)
		a.account(ctx, run, agentErr)
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
			if a.req.Checks != nil {
				msg = fmt.Sprintf("fix failing checks on #%d", a.req.PR.Number)
			}
			var exclude []string
			if a.req.candidate() != nil {
				// prloop's merge of the base is the agent's starting point;
				// the base tip is in the mirror already.
				msg = fmt.Sprintf("fix failing checks on #%d on top of %s", a.req.PR.Number, SanitizeLine(a.req.baseBranch()))
				exclude = []string{a.rec.ConflictBase}
			}
			if a.req.Conflict != nil {
				// The merge's other parent is in the mirror already.
				msg = fmt.Sprintf("merge %s into #%d, resolving conflicts", SanitizeLine(a.req.Conflict.BaseBranch), a.req.PR.Number)
				exclude = []string{a.rec.ConflictBase}
			}
			if result, err = a.git.Export(ctx, a.wt, start, msg, exclude...); err == nil {
				a.rec.Phase, a.rec.ResultSHA = PhaseAgentFinished, result
			}
		}
		if err := a.save(ctx); err != nil {
			return Result{}, err
		}
		var fixed fixResult
		if err == nil {
			fixed, err = a.verify(ctx, result)
		}
		v := classify(agentErr, err)
		a.metrics.AgentRun(v.metric())
		if res, again, err := a.overBudget(ctx, agentErr, err); res != nil || err != nil {
			return derefResult(res), err
		} else if again {
			continue
		}
		switch {
		case v == verdictFixed:
			if agentErr != nil {
				a.log.Warn("the agent failed but had pushed a fix; keeping it", "err", agentErr)
			}
			return a.addressed(ctx, fixed)
		case v == verdictForeign:
			return a.skipForeign(ctx, err)
		case v == verdictNotRunnable:
			a.log.Warn("the agent command could not be run; escalating without another run", "run", a.rec.Runs, "err", agentErr, "log", logFile)
			return a.escalate(ctx, a.failReason(), agentErr.Error(), notRunnableDetail)
		case v.permanent():
			return a.escalate(ctx, a.failReason(), err.Error(), "")
		case !v.runsAgainAfterRun():
			return Result{}, err // GitHub or NATS: retry the change request later
		case v == verdictAgentFailed:
			lastErr = agentErr
		default:
			lastErr = err
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
	return a.escalate(ctx, a.failReason(), lastErr.Error(), "")
}

// setup prepares the credentials-free environment and the worktree: the
// watch request's worktree when it is usable, prloop's own clone otherwise.
func (a *attempt) setup(ctx context.Context, resuming bool) error {
	tok, err := a.gh.GitToken(ctx)
	if err != nil {
		return err
	}
	a.env = SafeEnv(a.environ(), tok.Reveal())
	a.git = a.newGit(a.env)

	pr, userWT := a.req.PR, a.req.Worktree
	base := filepath.Join(a.worksDir, strings.ToLower(pr.Owner), strings.ToLower(pr.Repo))
	a.files = filepath.Join(base, "pr-"+strconv.Itoa(pr.Number)+".d")
	if err := os.MkdirAll(a.files, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", a.files, err)
	}
	remote := a.pull.GetHead().GetRepo().GetCloneURL()
	branch := a.pull.GetHead().GetRef()
	// The mirror and the bundles sit beside the worktree, never in it: the
	// agent's sandbox sees only the worktree and the prompt.
	mirror, out := filepath.Join(base, "mirror.git"), filepath.Join(a.files, "out")
	if userWT != "" {
		wt := Worktree{Dir: userWT, Remote: remote, Branch: branch, Mirror: mirror, Number: pr.Number, Out: out}
		if resuming && a.rec.Worktree == userWT {
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
		a.log.Info("not using the watch request's worktree; cloning", "worktree", userWT, "why", why, "err", err)
	}
	a.wt = Worktree{Dir: filepath.Join(base, "pr-"+strconv.Itoa(pr.Number)), Own: true, Remote: remote, Branch: branch, Mirror: mirror, Number: pr.Number, Out: out}
	a.rec.Worktree, a.rec.UserFiles = "", nil
	return a.git.Clone(ctx, a.wt, a.req.HeadSHA)
}

// prompt gathers the feedback and renders the prompt; "" means there is
// nothing to address.
func (a *attempt) prompt(ctx context.Context) (string, error) {
	req := a.req
	pr, head := req.PR, req.HeadSHA
	checks, err := a.gatherChecks(ctx)
	if err != nil {
		return "", err
	}
	if req.Checks != nil && !req.Checks.ChangesRequested {
		// Failing checks alone: no review feedback to gather.
		return a.render(PromptData{Checks: checks, Candidate: a.promptCandidate()})
	}
	at := anchor(req, a.prev)
	if at.IsZero() {
		// The poller, which asked for the change, gave no anchor for this
		// head. The commit's dates are its author's to set and never
		// decide which signals count: nothing to address.
		a.log.Info("no anchor for the head in the change request")
		return "", nil
	}
	sig, err := review.Gather(ctx, timeoutSource{a.gh}, pr, at)
	if err != nil {
		return "", err
	}
	var addressed map[string]bool
	if len(req.Addressed) > 0 {
		addressed = make(map[string]bool, len(req.Addressed))
		for _, k := range req.Addressed {
			addressed[k] = true
		}
	}
	eff, err := a.policyOf(ctx)
	if err != nil {
		return "", err
	}
	pol, perms := eff.Review(ctx, a.policy, a.auth, pr.RepoRef(), a.log)
	rhead := review.Head{SHA: head, Anchor: at, Author: a.pull.GetUser().GetLogin(), Addressed: addressed}
	v := review.Evaluate(sig, rhead, pol, perms.Authorized)
	if req.Command != 0 && review.FixCommanded(sig, req.Command, rhead, pol, perms.Authorized) {
		// "/prloop fix": what the command asks for, whatever the
		// protocols say of the status (docs/commands.md).
		if items := review.FixItems(v, sig, rhead, pol, perms.Authorized); len(items) > 0 {
			v.Status, v.Feedback, v.Ignored = events.StatusChangesRequested, items, nil
		}
	}
	if err := perms.Err(); err != nil {
		// Without every reviewer's permission the feedback is not known:
		// try again later rather than skip or address part of it.
		return "", fmt.Errorf("gather feedback of %s: %w", pr, err)
	}
	if v.Status != events.StatusChangesRequested || len(v.Feedback) == 0 {
		a.log.Info("review status is no longer changes requested", "status", v.Status)
		if req.Checks != nil {
			return a.render(PromptData{Checks: checks})
		}
		return "", nil
	}
	// Whom to tell when the fix is pushed is known only now: a resume
	// after the push gathers nothing.
	aud := audienceOf(v.Feedback, pol.Quorum)
	a.rec.Audience = &aud
	return a.render(PromptData{
		Comments: Comments(v.Feedback, a.cfg.PromptMaxBytes),
		LeftOut:  LeftOut(v.Ignored), LeftOutCount: len(v.Ignored), Checks: checks,
	})
}

// render fills in what every prompt says of the PR, the spec context,
// and renders the template with data's feedback and checks.
func (a *attempt) render(data PromptData) (string, error) {
	req, pr := a.req, a.req.PR
	data.URL, data.Ref, data.Title, data.Branch = a.pull.GetHTMLURL(), pr.String(), SanitizeLine(a.pull.GetTitle()), SanitizeLine(a.wt.Branch)
	data.HeadSHA, data.FixCycle, data.ContextPath = req.HeadSHA, a.cycle, SanitizeLine(req.ContextPath)
	if data.URL == "" {
		data.URL = pr.URL
	}
	if req.ContextPath != "" {
		// A relative context path is in the watch request's worktree (an
		// untracked .specify/, say), even when prloop works in its clone.
		var err error
		for _, root := range slices.Compact([]string{req.Worktree, a.wt.Dir}) {
			if root == "" {
				continue
			}
			if data.Context, data.ContextOmitted, err = ReadContext(root, req.ContextPath, a.cfg.ContextMaxBytes); err == nil {
				break
			}
		}
		if err != nil {
			a.log.Warn("spec context not included", "context", req.ContextPath, "err", err)
		}
	}
	a.log.Info("feedback gathered", "comments", len(data.Comments), "checks", len(data.Checks), "context_files", len(data.Context))
	return Render(a.tmpl, data)
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
	if remote != start && !ownHead(remote, result, a.rec) {
		// Someone else pushed: however well their commit passes the
		// checks, it is not the agent's work, and announcing it as a fix
		// (or as a resolution, which may keep an approval) would credit
		// the agent with it. Nor is the agent's work pushed over it.
		return fixResult{}, fmt.Errorf("%s: %s: %w", a.req.PR, ghref.EventSHA(remote), ErrForeignHead)
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
		if a.req.Conflict != nil {
			// prloop's own push of a resolution passes the same checks on
			// a resume as before it.
			if err := a.checkConflictResult(ctx, target); err != nil {
				return fixResult{}, err
			}
		}
		at := a.now()
		if a.rec.PushedSHA == target && !a.rec.PushedAt.IsZero() {
			at = a.rec.PushedAt
		}
		return fixResult{head: target, pushedAt: at}, nil
	}
	if a.req.Conflict != nil {
		// Exactly one merge commit, checked strictly: Inspect would count
		// the base's commits and workflows as the agent's.
		err = a.checkConflictResult(ctx, target)
	} else if a.req.candidate() != nil {
		// prloop's merge of the base is where the agent started: only what
		// comes after it is the agent's.
		err = a.checkFromBaseMerge(ctx, target)
	} else {
		err = a.git.Inspect(ctx, a.wt, remote, target, a.cfg.AgentMaxCommits, a.lim.ForbidWorkflows)
	}
	if err != nil {
		return fixResult{}, err
	}
	if err := a.fence(ctx); err != nil {
		return fixResult{}, err
	}
	if err := a.git.Push(ctx, a.wt, target); err != nil {
		return fixResult{}, err
	}
	at := a.now()
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
		if err := a.sleep(ctx, wait); err != nil {
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
	return a.gh.GetPull(ctx, a.req.PR)
}

// addressed publishes the fix and records that it did. The poller counts
// the fix cycle and notes the push from the event; a crash in between
// publishes again, and the event's id makes that a duplicate.
func (a *attempt) addressed(ctx context.Context, res fixResult) (Result, error) {
	pr := a.req.PR
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	detail, parts := a.detail(), []string{ghref.EventSHA(a.req.HeadSHA), strconv.Itoa(a.req.FixCycle)}
	if c := a.req.Conflict; c != nil {
		detail = strings.TrimSuffix(fmt.Sprintf("resolved a conflict with %s at %s; %s",
			SanitizeLine(c.BaseBranch), ghref.ShortSHA(a.rec.ConflictBase), detail), "; ")
		parts = append(parts, "conflict", ghref.EventSHA(c.BaseSHA))
	}
	_, dup, err := a.emit.Emit(ctx, &events.FeedbackAddressed{
		Base: events.Base{PR: pr, HeadSHA: res.head}, PreviousHeadSHA: a.req.HeadSHA,
		FixCycle: a.cycle + 1, PushedAt: res.pushedAt.UTC(), Actor: Name, Detail: detail, Agent: a.summary(),
	}, parts...)
	if err != nil {
		return Result{}, err
	}
	// Before the outcome is recorded: a crash in between tells them on the
	// resume, and the note's markers keep it from being told twice.
	if err := a.notify(ctx, res.head); err != nil {
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
	if detail == "" && len(a.logs) > 0 {
		detail = "the agent's output is in its log on prloop's server: " + filepath.Base(a.logs[len(a.logs)-1])
	}
	// The comment and the webhook quote these texts: no path of the
	// server's goes into them (the logs keep the paths).
	lastErr, detail = a.redact(lastErr), a.redact(detail)
	// The id carries the change request's event id: a redelivery asks
	// once, the same change request published anew after a human removed
	// the label (see "Event ids" in package events) asks again.
	_, _, err := a.emit.Emit(ctx, &events.EscalationRequested{
		Base: events.Base{PR: a.req.PR, HeadSHA: a.req.HeadSHA}, Reason: reason, Severity: events.SeverityBlocking,
		FixCycle: a.cycle, Detail: detail, LastError: lastErr,
		HumanReviewRequired: reason == events.ReasonMaxFixCycles, Actor: Name, Epoch: a.req.Epoch, Agent: a.summary(),
	}, string(reason), ghref.EventSHA(a.req.HeadSHA), strconv.Itoa(a.req.FixCycle), a.req.EventID)
	if err != nil {
		return Result{}, err
	}
	a.rec.Outcome, a.rec.LastError = OutcomeEscalated, lastErr
	if err := a.save(ctx); err != nil {
		return Result{}, err
	}
	a.log.Warn("escalation requested", "reason", reason, "last_error", lastErr, "log", a.lastLog())
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
	if _, _, err := a.emit.Emit(ctx, &events.FeedbackSkipped{
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

// skipForeign ends the attempt when someone else moved the PR's head
// (err wraps ErrForeignHead): nothing of the agent's is pushed over it, and
// the poller's next change request, if any, is about the new head.
func (a *attempt) skipForeign(ctx context.Context, err error) (Result, error) {
	a.log.Warn("the PR's head moved to a commit prloop did not push; the change request is stale", "err", err)
	return a.skip(ctx, "the head moved to a commit prloop did not push (someone else pushed); the change request is stale")
}

// fence renews the lease before a side effect, so the effect happens
// while this attempt surely holds the PR: a renewal fails once anyone else
// has taken the lease.
func (a *attempt) fence(ctx context.Context) error { return fenceLease(ctx, a.lease, a.cfg.LeaseTTL) }

// fenceLease renews lease right before a side effect, bounded well inside
// its TTL: it fails once anyone else took the lease (attempts and opens).
func fenceLease(ctx context.Context, lease *kvlease.Lease, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, ttl/4)
	defer cancel()
	return lease.Renew(ctx)
}

// save writes the record, fenced by the lease.
func (a *attempt) save(ctx context.Context) error {
	if err := a.fence(ctx); err != nil {
		return err
	}
	a.rec.Holder, a.rec.UpdatedAt = a.holder, a.now().UTC()
	rev, err := a.records.put(ctx, a.req.PR, a.rec, a.recRev)
	if err != nil {
		return err
	}
	a.recRev = rev
	return nil
}

// logFile is where the agent's output of the request's run-th run goes.
func (a *attempt) logFile(run int) string {
	if a.files == "" || run < 1 {
		return ""
	}
	return filepath.Join(a.files, fmt.Sprintf("agent-%s-c%d-r%d.log", ghref.EventSHA(a.req.HeadSHA), a.req.FixCycle, run))
}

// detail links the agent logs from PRFeedbackAddressed, which stays in
// prloop (explain, the page); an escalation, which GitHub shows, names
// only the log's file.
func (a *attempt) detail() string {
	if l := a.lastLog(); l != "" {
		return "agent log: " + l
	}
	return ""
}

// lastLog is the path of the last agent run's log, or "".
func (a *attempt) lastLog() string {
	if len(a.logs) == 0 {
		return ""
	}
	return a.logs[len(a.logs)-1]
}

// notRunnableDetail is the escalation's detail when the agent's command
// could not be run: what happened and what the operator can do.
const notRunnableDetail = "prloop could not run the coding agent's command (exit status 126 or 127: not found or not executable inside prloop's sandbox), so it did not retry. " +
	"Whoever runs prloop can install the agent where the sandbox sees it (under /usr, or a directory listed in PRLOOP_AGENT_READONLY_PATHS) or fix PRLOOP_AGENT_CMD."

// redact replaces the server's paths that an attempt knows (its
// worktree, the watch request's, the directory of its prompt and logs, and
// the workspace directory holding them all) with placeholders.
func (a *attempt) redact(s string) string {
	type path struct{ from, to string }
	var ps []path
	for _, p := range []path{{a.wt.Dir, "<worktree>"}, {a.req.Worktree, "<worktree>"}, {a.files, "<prompt dir>"}, {a.worksDir, "<workspace>"}} {
		if p.from != "" && p.from != "/" {
			ps = append(ps, p)
		}
	}
	// The longest first: a worktree may be inside the workspace.
	slices.SortStableFunc(ps, func(x, y path) int { return len(y.from) - len(x.from) })
	for _, p := range ps {
		s = strings.ReplaceAll(s, p.from, p.to)
	}
	return s
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

// policyOf is the effective policy of the attempt's PR: its base's file
// now. An invalid file fails closed: the attempt is skipped, and no agent
// runs in that repository on that base until the file is fixed.
func (a *attempt) policyOf(ctx context.Context) (policy.Effective, error) {
	e, _, err := a.pol.At(ctx, a.req.PR.RepoRef(), a.pull.GetBase().GetRef(), "")
	return e, err
}
