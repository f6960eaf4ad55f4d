// Package simci is a simulated CI for the GitHub simulator: it notices
// the commits pushed to a repository's branches and, a set time later,
// reports a commit status on each, as a CI system triggered by pushes does.
// The chaos suite runs it per PR head, the merger's throughput benchmark
// over every branch (PR heads after update-branch, the merge queue's
// candidate branches).
package simci

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
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
type Run struct {
	SHA, Branch, Tree string
	State             string
	Started, Finished time.Time
}

// CI tests every new commit of a repository's branches: it sets its
// context pending when it notices the commit and, Duration later, the
// verdict of Verdict on the commit's files. Commits the branches point at
// when Start is called are not tested: they were pushed before the CI was
// there.
type CI struct {
	Sim  *ghsim.Sim
	Repo ghref.Repo
	// Context is the commit status context it reports, e.g. "ci/test".
	Context string
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
	c.branch = map[string]string{}
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
			if err := c.Sim.SetStatus(c.Repo, sha, c.Context, "pending"); err != nil {
				return err
			}
			c.inflight.Add(1)
			go func() {
				defer c.inflight.Done()
				c.test(ctx, sha)
			}()
			return nil
		})
	}()
	return nil
}

// test is one run on sha: it judges the commit's files and reports after
// Duration.
func (c *CI) test(ctx context.Context, sha string) {
	r := Run{SHA: sha, Started: time.Now(), State: Success}
	c.mu.Lock()
	r.Branch = c.branch[sha]
	c.mu.Unlock()
	tree, files, err := c.Sim.Tree(c.Repo, sha)
	if err != nil {
		c.fail(err)
		return
	}
	r.Tree = tree
	if c.Verdict != nil {
		r.State = c.Verdict(files)
	}
	if ctxtime.Sleep(ctx, c.Duration) != nil {
		return
	}
	r.Finished = time.Now()
	if err := c.Sim.SetStatus(c.Repo, sha, c.Context, r.State); err != nil {
		c.fail(err)
		return
	}
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

// Runs returns the runs that reported so far, in the order they did.
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
