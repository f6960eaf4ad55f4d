// The executor's part of failing checks: it re-runs them or gathers the
// failure for the agent's prompt from GitHub; plan_checks.go decides.

package feedback

import (
	"context"
	"fmt"
	"slices"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

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
	c, ok := a.gh.(checksGitHub)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot read checks", ErrUnusable, a.gh)
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
		a.metrics.CheckRerun()
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
	tok, err := a.gh.GitToken(ctx)
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
	tail, err := c.JobLogTail(ctx, repo, f.ID, a.cfg.CheckLogLines, a.cfg.CheckLogBytes)
	if err != nil {
		a.log.Warn("job log not read", "check", pc.Name, "err", err)
		return
	}
	pc.Log = Truncate(cleanCheckText(tail, tok), a.cfg.CheckLogBytes)
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
	return a.git.Inspect(ctx, a.wt, m, target, a.cfg.AgentMaxCommits, a.lim.ForbidWorkflows)
}
