// Package simci is a simulated CI for the GitHub simulator: it notices
// the commits pushed to a repository's branches and, a set time later,
// reports a commit status on each, as a CI system triggered by pushes does,
// or the check run of a GitHub Actions job, which can be re-run.
// The chaos suite runs it per PR head, the merger's throughput benchmark
// over every branch (PR heads after update-branch, the merge queue's
// candidate branches).
package simci

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/gitx"
)

// ReportNew calls report once for each commit heads returns that it has
// not reported yet, looking every interval until ended says so or ctx is
// done. A report that fails is tried again at the next look, so a commit
// is never left without its status because the simulator refused once.
func ReportNew(ctx context.Context, every time.Duration, ended func() bool, heads func() []string, report func(sha string) error) {
	done := map[string]bool{}
	for ctx.Err() == nil && !ended() {
		for _, h := range heads() {
			if h != "" && !done[h] {
				if err := report(h); err == nil {
					done[h] = true
				}
			}
		}
		_ = ctxtime.Sleep(ctx, every)
	}
}

// Commit states a CI reports.
const (
	Success = "success"
	Failure = "failure"
)

// Run is one CI run: the commit tested, the branch it was found on, its
// tree, the verdict, when the run started and when it finished, taken
// just before the verdict was set: nobody saw the verdict earlier.
// Attempt is 1 for a commit's first run and counts its re-runs after.
type Run struct {
	SHA, Branch, Tree string
	State             string
	Started, Finished time.Time
	Attempt           int
}

// CI tests every new commit of a repository's branches: it sets its
// context pending when it notices the commit and, Duration later, the
// verdict of Verdict on the commit's files. Commits the branches point at
// when Start is called are not tested: they were pushed before the CI was
// there.
type CI struct {
	Sim  *ghsim.Sim
	Repo ghref.Repo
	// Context is the commit status context it reports, e.g. "ci/test",
	// or with Actions the name of the job and its check run.
	Context string
	// Actions, when set, reports a run as GitHub Actions does: a workflow
	// run "ci" (ghsim's StartWorkflow) of one job, Context, whose check
	// run is in progress from when the commit is noticed and ends
	// Duration later. A re-run of the failed job, asked through the
	// simulator's API as GitHub is asked (POST
	// /actions/runs/{id}/rerun-failed-jobs), runs Duration again before it
	// ends as Verdict says. Without it a run is a commit status, which
	// nothing re-runs.
	Actions bool
	// Flaky, when set, picks the commits whose first run fails although
	// Verdict passes them, by the paths the commit adds (its files that
	// none of its parents has): a flaky test that fails once. A re-run
	// (Actions) ends as Verdict says.
	Flaky func(added []string) bool
	// Duration is how long a run takes; Every how often the branches are
	// looked at (default 10 ms).
	Duration, Every time.Duration
	// Skip, when set, names the branches it does not test (say the base
	// branch, whose post-merge runs would otherwise count as testing what
	// was merged).
	Skip func(branch string) bool
	// Verdict judges a commit by the paths of its files: Success or
	// Failure (default: Success).
	Verdict func(files []string) string

	mu       sync.Mutex
	every    time.Duration
	branch   map[string]string // sha -> a branch it was seen on
	runs     []Run
	errs     []error
	inflight sync.WaitGroup
}

// Start notes the branches' commits as already there and tests every
// commit pushed after, until ctx is done; Wait waits for the runs in
// flight to end after that.
func (c *CI) Start(ctx context.Context) error {
	existing, err := c.Sim.Branches(c.Repo)
	if err != nil {
		return fmt.Errorf("simulated ci of %s: %w", c.Repo, err)
	}
	every := c.Every
	if every <= 0 {
		every = 10 * time.Millisecond
	}
	c.mu.Lock()
	c.branch, c.every = map[string]string{}, every
	c.mu.Unlock()
	skip := map[string]bool{}
	for _, sha := range existing {
		skip[sha] = true
	}
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		ReportNew(ctx, every, func() bool { return false }, func() []string {
			branches, err := c.Sim.Branches(c.Repo)
			if err != nil {
				c.fail(err)
				return nil
			}
			var heads []string
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, name := range slices.Sorted(maps.Keys(branches)) {
				sha := branches[name]
				if skip[sha] || (c.Skip != nil && c.Skip(name)) {
					continue
				}
				if _, ok := c.branch[sha]; !ok {
					c.branch[sha] = name
				}
				heads = append(heads, sha)
			}
			return heads
		}, func(sha string) error {
			var run, job int64 // the workflow run and its job, with Actions
			if c.Actions {
				id, jobs, err := c.Sim.StartWorkflow(c.Repo, sha, "ci", c.Context)
				if err != nil {
					return err
				}
				run, job = id, jobs[0]
			} else if err := c.Sim.SetStatus(c.Repo, sha, c.Context, "pending"); err != nil {
				return err
			}
			c.inflight.Add(1)
			go func() {
				defer c.inflight.Done()
				c.test(ctx, sha, run, job)
			}()
			return nil
		})
	}()
	return nil
}

// test is one run on sha: it judges the commit's files and reports after
// Duration, as the commit status Context or, with Actions, as the end of
// job of workflow run run, whose re-runs it then runs (reruns).
func (c *CI) test(ctx context.Context, sha string, run, job int64) {
	r := Run{SHA: sha, Started: time.Now(), State: Success, Attempt: 1}
	c.mu.Lock()
	r.Branch = c.branch[sha]
	c.mu.Unlock()
	tree, files, err := c.Sim.Tree(c.Repo, sha)
	if err != nil {
		c.fail(err)
		return
	}
	r.Tree = tree
	verdict := Success
	if c.Verdict != nil {
		verdict = c.Verdict(files)
	}
	r.State = verdict
	if c.Flaky != nil && verdict == Success {
		added, err := c.added(ctx, sha, files)
		if err != nil {
			c.fail(err)
			return
		}
		if c.Flaky(added) {
			r.State = Failure
		}
	}
	if ctxtime.Sleep(ctx, c.Duration) != nil {
		return
	}
	r.Finished = time.Now()
	if c.Actions {
		err = c.Sim.FinishJob(c.Repo, job, r.State)
	} else {
		err = c.Sim.SetStatus(c.Repo, sha, c.Context, r.State)
	}
	if err != nil {
		c.fail(err)
		return
	}
	c.record(r)
	if c.Actions && r.State != Success {
		c.reruns(ctx, r, run, verdict)
	}
}

// added are the paths of files that commit sha has and none of its
// parents has.
func (c *CI) added(ctx context.Context, sha string, files []string) ([]string, error) {
	out, err := (&gitx.Runner{}).Run(ctx, gitx.Cmd{GitDir: c.Sim.GitDir(c.Repo), Args: []string{"rev-list", "--parents", "-n", "1", sha}})
	if err != nil {
		return nil, fmt.Errorf("parents of %s: %w", sha, err)
	}
	added := slices.Clone(files)
	for _, p := range strings.Fields(out)[1:] {
		_, had, err := c.Sim.Tree(c.Repo, p)
		if err != nil {
			return nil, err
		}
		added = slices.DeleteFunc(added, func(f string) bool { return slices.Contains(had, f) })
	}
	return added, nil
}

// reruns runs each re-run of the failed job of workflow run run, whose
// last attempt was last, until one passes or ctx is done: it looks for
// the job's next attempt every Every, and Duration after it noticed it
// reports verdict as its conclusion.
func (c *CI) reruns(ctx context.Context, last Run, run int64, verdict string) {
	c.mu.Lock()
	every := c.every
	c.mu.Unlock()
	for last.State != Success {
		var next ghsim.JobSnapshot
		for next.Attempt <= last.Attempt {
			if ctxtime.Sleep(ctx, every) != nil {
				return
			}
			jobs, err := c.Sim.WorkflowJobs(c.Repo, run)
			if err != nil {
				c.fail(err)
				return
			}
			if i := slices.IndexFunc(jobs, func(j ghsim.JobSnapshot) bool { return j.Name == c.Context }); i >= 0 {
				next = jobs[i]
			}
		}
		r := last
		r.Attempt, r.State, r.Started = next.Attempt, verdict, time.Now()
		if ctxtime.Sleep(ctx, c.Duration) != nil {
			return
		}
		r.Finished = time.Now()
		if err := c.Sim.FinishJob(c.Repo, next.ID, r.State); err != nil {
			c.fail(err)
			return
		}
		c.record(r)
		last = r
	}
}

// record keeps a run that reported.
func (c *CI) record(r Run) {
	c.mu.Lock()
	c.runs = append(c.runs, r)
	c.mu.Unlock()
}

func (c *CI) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// Wait waits, after Start's context is done, until no run is in flight.
func (c *CI) Wait() { c.inflight.Wait() }

// Runs returns the runs that reported so far, in the order they did: a
// re-run is a run of its own (Attempt).
func (c *CI) Runs() []Run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.runs)
}

// Errors returns what went wrong reading the repository or reporting; a
// run whose report failed is not in Runs.
func (c *CI) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}
