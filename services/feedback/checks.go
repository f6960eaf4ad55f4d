package feedback

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// Failing checks (PRChecksFailed, issue #32): the poller saw gating checks
// fail on a head and the service treats it like a change request, through
// the same attempt (the PR's lease, the sandbox, the verified push from the
// mirror, PRFeedbackAddressed), with three differences, all here: a head's
// first failure of GitHub Actions jobs is re-run once before the agent is
// asked (PRLOOP_RERUN_FAILED_CHECKS), the prompt quotes the failure as
// gathered with prloop's token (a check run's output and annotations, a
// job's failed steps and the tail of its log, a commit status's
// description), cleaned, fenced, bounded and without any token, and the
// cycles may be bounded on their own (PRLOOP_MAX_CI_FIX_CYCLES); when
// they are used up a human is asked once, reason checks_failed.

//go:embed checks.tmpl
var checksTemplateText string

// Bounds of what the checks section quotes.
const (
	maxPromptChecks      = 10
	maxCheckAnnotations  = 50
	maxCheckOutputBytes  = 8 << 10
	maxAnnotationBytes   = 1 << 10
	maxExcerptLines      = 5
	maxExcerptLineBytes  = 200
	maxCheckSectionBytes = 96 << 10
)

// ChecksFailure is what a PRChecksFailed adds to a Request.
type ChecksFailure struct {
	// Round is the poller's count of failures of the head (1: the first).
	Round int
	// ChangesRequested says a reviewer's change request stands on the
	// head too: the prompt carries both.
	ChangesRequested bool
	// Candidate is set when the checks failed on the speculative queue's
	// candidate, not on the head (PRMergeFailed, candidate_failed).
	Candidate *CandidateFailure
}

// CandidateFailure is the candidate a PR failed on while its own head is
// green: the commit the checks ran on, and the base branch with the tip
// the candidate was built on. prloop brings the base in (its tip now) and
// the agent fixes on top.
type CandidateFailure struct {
	SHA, BaseBranch, BaseSHA string
}

// candidateRequestOf reads a candidate's failure from the merger's
// PRMergeFailed (reason candidate_failed): a failing-checks request with
// no re-run (the PR left the queue; its fix runs CI again), bounded like
// every CI fix.
func candidateRequestOf(d *events.MergeFailed, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Checks:       &ChecksFailure{Candidate: &CandidateFailure{SHA: d.Candidate, BaseBranch: d.BaseBranch, BaseSHA: d.BaseSHA}},
		FailedChecks: d.Checks,
	}
}

// checkedSHA is the commit the failing checks ran on: the candidate's,
// or the head's.
func (r Request) checkedSHA() string {
	if r.Checks != nil && r.Checks.Candidate != nil {
		return r.Checks.Candidate.SHA
	}
	return r.HeadSHA
}

// candidate is the candidate the request's checks failed on (nil when
// they failed on the head).
func (r Request) candidate() *CandidateFailure {
	if r.Checks == nil {
		return nil
	}
	return r.Checks.Candidate
}

// baseBranch is the base branch prloop merges into the head before the
// agent runs: a conflict's, or a failed candidate's ("" for none).
func (r Request) baseBranch() string {
	switch {
	case r.Conflict != nil:
		return r.Conflict.BaseBranch
	case r.candidate() != nil:
		return r.candidate().BaseBranch
	}
	return ""
}

// checksRequestOf reads a failing-checks request from its event.
func checksRequestOf(d *events.ChecksFailed, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Worktree: d.Worktree, ContextPath: d.ContextPath, Anchor: d.Anchor, Addressed: d.AddressedItems,
		Checks:       &ChecksFailure{Round: d.Round, ChangesRequested: d.ChangesRequested},
		FailedChecks: d.Checks,
	}
}

// planChecksFix bounds the fixes of failing checks: with
// PRLOOP_MAX_CI_FIX_CYCLES on their own, otherwise together with review
// fixes against PRLOOP_MAX_FIX_CYCLES. Used up, a human is asked with
// reason checks_failed.
func planChecksFix(rec Record, cycle int, lim limits) action {
	used, bound, setting := cycle, lim.MaxFixCycles, "PRLOOP_MAX_FIX_CYCLES"
	if lim.MaxCIFixCycles > 0 {
		used, bound, setting = rec.CIFixes, lim.MaxCIFixCycles, "PRLOOP_MAX_CI_FIX_CYCLES"
	}
	if used >= bound {
		return action{kind: actEscalate, reason: events.ReasonChecksFailed, note: "fix cycles used up on failing checks", cycle: cycle, rec: rec,
			detail: fmt.Sprintf("checks still fail after %d fixes by the agent (%s=%d)", used, setting, bound)}
	}
	rec.CIFixes++
	return action{kind: actFix, cycle: cycle, rec: rec}
}

// checksGitHub is what gathering a failure and re-running it take of the
// GitHub client.
type checksGitHub interface {
	ListCheckRuns(ctx context.Context, repo ghref.Repo, ref string) ([]*gh.CheckRun, error)
	ListCheckRunAnnotations(ctx context.Context, repo ghref.Repo, id int64) ([]*gh.CheckRunAnnotation, error)
	GetWorkflowJob(ctx context.Context, repo ghref.Repo, id int64) (*gh.WorkflowJob, error)
	JobLogTail(ctx context.Context, repo ghref.Repo, id int64, maxLines, maxBytes int) (string, error)
	RerunFailedJobs(ctx context.Context, repo ghref.Repo, id int64) error
}

var _ checksGitHub = (*github.Client)(nil)

func (a *attempt) checksGitHub() (checksGitHub, error) {
	c, ok := a.s.d.GitHub.(checksGitHub)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot read checks", ErrUnusable, a.s.d.GitHub)
	}
	return c, nil
}

// errNoRerun says GitHub would not re-run the failed jobs, or none was
// found: the agent is asked at once instead.
var errNoRerun = github.ErrNoRerun

// rerun re-runs the failed jobs of each GitHub Actions run among the
// failure, once per head (the request of round 1), and ends the request
// with PRFeedbackSkipped: the poller looks at the head's checks again, and
// a failure that repeats comes back as round 2, for the agent.
func (a *attempt) rerun(ctx context.Context) (Result, error) {
	c, err := a.checksGitHub()
	if err != nil {
		return Result{}, err
	}
	if err := a.fence(ctx); err != nil {
		return Result{}, err
	}
	r, err := github.RerunFailed(ctx, c, a.req.PR.RepoRef(), a.req.FailedChecks)
	for _, id := range r.Refused {
		a.log.Warn("GitHub refused to re-run a run's failed jobs", "run", id)
	}
	for range r.Runs {
		a.s.d.Metrics.CheckRerun()
	}
	if err != nil {
		return Result{}, fmt.Errorf("re-run the failed checks of %s: %w", a.req.PR, err)
	}
	names := make([]string, len(r.Names))
	for i, n := range r.Names {
		names[i] = SanitizeLine(n)
	}
	runs := r.Runs
	a.log.Info("re-ran the failed jobs; the agent is asked only if they fail again", "runs", len(runs), "checks", names)
	return a.skip(ctx, "re-running the failed jobs of "+strings.Join(names, ", ")+" once; the agent is asked only if they fail again")
}

// PromptCheck is one failing check as the prompt quotes it; every text is
// cleaned (cleanCheckText) and bounded.
type PromptCheck struct {
	Name, Kind, Conclusion, URL string
	// Title, Summary and Text are a check run's output; Description a
	// commit status's.
	Title, Summary, Text, Description string
	Annotations                       []PromptAnnotation
	// AnnotationsLeftOut counts annotations past the bound.
	AnnotationsLeftOut int
	// FailedSteps are a GitHub Actions job's failed steps; Log the tail
	// of its log.
	FailedSteps []string
	Log         string
}

// PromptAnnotation is one annotation of a check run.
type PromptAnnotation struct {
	Location, Level, Message string
}

// ansi matches terminal escape sequences (colours, cursor moves, OSC
// titles and links), which CI logs are full of.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// cleanCheckText makes text from a check fit for the prompt: escape
// sequences go, then what Sanitize removes from review comments, then
// every credential-shaped string and prloop's own token.
func cleanCheckText(s string, tok github.Secret) string {
	return github.RedactTokens(Sanitize(ansi.ReplaceAllString(s, "")), tok)
}

// gatherChecks reads what the failing checks say, with prloop's token
// (never the agent's), and cleans and bounds it. A check whose details
// cannot be read is quoted by name and conclusion only.
func (a *attempt) gatherChecks(ctx context.Context) ([]PromptCheck, error) {
	if len(a.req.FailedChecks) == 0 {
		return nil, nil
	}
	c, err := a.checksGitHub()
	if err != nil {
		return nil, err
	}
	tok, err := a.s.d.GitHub.GitToken(ctx)
	if err != nil {
		return nil, err
	}
	repo := a.req.PR.RepoRef()
	clean := func(s string, n int) string { return Truncate(cleanCheckText(s, tok), n) }
	var runs map[int64]*gh.CheckRun
	if slices.ContainsFunc(a.req.FailedChecks, func(f events.FailedCheck) bool { return f.Kind == events.CheckKindRun }) {
		list, err := c.ListCheckRuns(ctx, repo, a.req.checkedSHA())
		if err != nil {
			return nil, err
		}
		runs = make(map[int64]*gh.CheckRun, len(list))
		for _, r := range list {
			runs[r.GetID()] = r
		}
	}
	budget := maxCheckSectionBytes
	var out []PromptCheck
	for _, f := range a.req.FailedChecks[:min(len(a.req.FailedChecks), maxPromptChecks)] {
		pc := PromptCheck{Name: SanitizeLine(clean(f.Name, 200)), Kind: f.Kind, Conclusion: SanitizeLine(f.Conclusion), URL: SanitizeLine(f.URL)}
		if f.Kind == events.CheckKindStatus {
			pc.Description = clean(f.Description, maxCheckOutputBytes)
			out = append(out, pc)
			continue
		}
		if r := runs[f.ID]; r != nil && r.Output != nil {
			pc.Title = SanitizeLine(clean(r.Output.GetTitle(), 500))
			pc.Summary = clean(r.Output.GetSummary(), maxCheckOutputBytes)
			pc.Text = clean(r.Output.GetText(), maxCheckOutputBytes)
			if r.Output.GetAnnotationsCount() > 0 {
				anns, err := c.ListCheckRunAnnotations(ctx, repo, f.ID)
				if err != nil {
					a.log.Warn("annotations not read", "check", pc.Name, "err", err)
				}
				for i, an := range anns {
					if i == maxCheckAnnotations {
						pc.AnnotationsLeftOut = len(anns) - i
						break
					}
					loc := an.GetPath()
					if an.GetStartLine() > 0 {
						loc = fmt.Sprintf("%s:%d", loc, an.GetStartLine())
					}
					pc.Annotations = append(pc.Annotations, PromptAnnotation{
						Location: SanitizeLine(clean(loc, 300)), Level: SanitizeLine(an.GetAnnotationLevel()),
						Message: clean(an.GetMessage(), maxAnnotationBytes),
					})
				}
			}
		}
		if f.Actions {
			a.gatherJob(ctx, c, f, &pc, tok)
		}
		if n := checkSize(pc); n > budget {
			pc.Text, pc.Log, pc.Summary = "", Truncate(pc.Log, max(0, budget/2)), Truncate(pc.Summary, max(0, budget/4))
		}
		budget -= checkSize(pc)
		out = append(out, pc)
	}
	return out, nil
}

// gatherJob adds a GitHub Actions job's failed steps and its log's tail.
func (a *attempt) gatherJob(ctx context.Context, c checksGitHub, f events.FailedCheck, pc *PromptCheck, tok github.Secret) {
	repo := a.req.PR.RepoRef()
	job, err := c.GetWorkflowJob(ctx, repo, f.ID)
	if err != nil {
		a.log.Warn("job not read", "check", pc.Name, "err", err)
		return
	}
	for _, st := range job.Steps {
		if c := st.GetConclusion(); c != "" && c != "success" && c != "skipped" {
			pc.FailedSteps = append(pc.FailedSteps, SanitizeLine(cleanCheckText(st.GetName(), tok))+" ("+SanitizeLine(c)+")")
		}
	}
	tail, err := c.JobLogTail(ctx, repo, f.ID, a.s.cfg.CheckLogLines, a.s.cfg.CheckLogBytes)
	if err != nil {
		a.log.Warn("job log not read", "check", pc.Name, "err", err)
		return
	}
	pc.Log = Truncate(cleanCheckText(tail, tok), a.s.cfg.CheckLogBytes)
}

func checkSize(pc PromptCheck) int {
	n := len(pc.Summary) + len(pc.Text) + len(pc.Log) + len(pc.Description)
	for _, an := range pc.Annotations {
		n += len(an.Message) + len(an.Location)
	}
	return n
}

// checksExcerpt is what an escalation says of the failure: each check's
// name and conclusion, and the first lines of what it reported.
func checksExcerpt(checks []PromptCheck) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "\n- %s (%s)", c.Name, c.Conclusion)
		var lines []string
		for _, an := range c.Annotations {
			lines = append(lines, an.Location+": "+an.Message)
		}
		for _, text := range []string{c.Title, c.Summary, c.Description} {
			lines = append(lines, strings.Split(text, "\n")...)
		}
		if c.Log != "" {
			log := strings.Split(c.Log, "\n")
			lines = append(lines, log[max(0, len(log)-maxExcerptLines):]...)
		}
		n := 0
		for _, l := range lines {
			if l = strings.TrimSpace(l); l == "" || n == maxExcerptLines {
				continue
			}
			fmt.Fprintf(&b, "\n    %s", Truncate(SanitizeLine(l), maxExcerptLineBytes))
			n++
		}
	}
	return b.String()
}

// promptCandidate is what the prompt says of a failed candidate (nil for
// checks that failed on the head).
func (a *attempt) promptCandidate() *PromptCandidate {
	c := a.req.candidate()
	if c == nil {
		return nil
	}
	return &PromptCandidate{SHA: c.SHA, BaseBranch: SanitizeLine(c.BaseBranch), BaseSHA: a.rec.ConflictBase}
}

// checkFromBaseMerge checks the agent's fix of a failed candidate: it
// must build on prloop's merge of the base into the head, and what it
// adds after that merge passes Inspect like any fix.
func (a *attempt) checkFromBaseMerge(ctx context.Context, target string) error {
	m := a.rec.BaseMerge
	if m == "" {
		return fmt.Errorf("%w: no merge of the base recorded for %s", ErrRefused, a.req.PR)
	}
	if ok, err := a.git.IsAncestor(ctx, a.wt, m, target); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s does not build on prloop's merge of the base %s", ErrRewritten, ghref.EventSHA(target), ghref.EventSHA(m))
	}
	return a.git.Inspect(ctx, a.wt, m, target, a.s.cfg.AgentMaxCommits, a.lim.ForbidWorkflows)
}
