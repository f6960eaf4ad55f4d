package github

import (
	"context"
	"errors"
	"fmt"
	"slices"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Re-running a failure's GitHub Actions jobs once, the one way both loops
// that do it share: the feedback service on a PR head's failed checks
// (services/feedback/checks.go) and the merger on a failed speculative
// candidate (services/merger/flaky.go).

// Rerunner is what re-running failed jobs takes of the client.
type Rerunner interface {
	GetWorkflowJob(ctx context.Context, repo ghref.Repo, id int64) (*gh.WorkflowJob, error)
	RerunFailedJobs(ctx context.Context, repo ghref.Repo, id int64) error
}

var _ Rerunner = (*Client)(nil)

// Rerunnable reports whether a failure has GitHub Actions jobs to re-run:
// a failed check run made by GitHub Actions (its id is the job's).
func Rerunnable(failed []events.FailedCheck) bool {
	return slices.ContainsFunc(failed, func(f events.FailedCheck) bool { return f.Actions && f.ID > 0 })
}

// Refused reports whether GitHub's answer says that asking again will not
// help (no permission, no such job or run, a run that cannot be re-run).
func Refused(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrForbidden) ||
		errors.Is(err, ErrValidation) || errors.Is(err, ErrUnauthorized)
}

// ErrNoRerun says GitHub would not re-run the failed jobs, or none was
// found.
var ErrNoRerun = errors.New("no failed GitHub Actions job could be re-run")

// Rerun is what RerunFailed did: the workflow runs whose failed jobs run
// again, the failed checks' names (as GitHub named them: clean them before
// showing them) and the runs GitHub refused to re-run.
type Rerun struct {
	Runs, Refused []int64
	Names         []string
}

// RerunFailed re-runs, in repo, the failed jobs of each GitHub Actions
// run among failed ("Re-run failed jobs from a workflow run"): each
// failed Actions check's job is read for its run, and each run is asked
// once. A job GitHub will not show is skipped, a run it refuses to re-run
// is listed in Refused; another error stops. It returns ErrNoRerun when no
// run was re-run.
func RerunFailed(ctx context.Context, c Rerunner, repo ghref.Repo, failed []events.FailedCheck) (Rerun, error) {
	var r Rerun
	var runs []int64
	for _, f := range failed {
		if !f.Actions || f.ID <= 0 {
			continue
		}
		job, err := c.GetWorkflowJob(ctx, repo, f.ID)
		if Refused(err) {
			continue // not a job after all, or not ours to read
		} else if err != nil {
			return r, err
		}
		r.Names = append(r.Names, f.Name)
		if id := job.GetRunID(); id > 0 && !slices.Contains(runs, id) {
			runs = append(runs, id)
		}
	}
	for _, id := range runs {
		err := c.RerunFailedJobs(ctx, repo, id)
		if Refused(err) {
			r.Refused = append(r.Refused, id)
			continue
		} else if err != nil {
			return r, err
		}
		r.Runs = append(r.Runs, id)
	}
	if len(r.Runs) == 0 {
		return r, fmt.Errorf("re-run the failed checks on %s: %w", repo, ErrNoRerun)
	}
	return r, nil
}
