package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simci"
)

// reviewTimeout is the services' PRLOOP_REVIEW_TIMEOUT: long enough for a
// reviewer who acts within seconds and for a fix cycle or two, short enough
// for a run. It counts from when watching began, so under a long run's
// load (200 PRs on 2 cores) a minute timed out every fix-cycle lifecycle
// before its approval, and the long run never took a fix to a merge.
func (o options) reviewTimeout() time.Duration {
	if o.short {
		return 60 * time.Second
	}
	return 3 * time.Minute
}

// scenario is what the reviewers and the humans do with one PR.
type scenario int

const (
	approveFirst  scenario = iota // 👍 at once
	oneFix                        // one change request, then 👍
	twoFixes                      // two change requests, then 👍
	maxCycles                     // three change requests: max_fix_cycles
	timeoutReview                 // nobody with access reviews (an outsider's 👍): review_timeout
	withdrawn                     // 👍 while checks run, withdrawn, 👍 again
	conflict                      // a human changes the same lines on main: merge conflict
	flakyChecks                   // checks fail, then pass
	closedByHand                  // a human closes it
	numScenarios
)

var scenarioNames = [...]string{"approve-first", "one-fix", "two-fixes", "max-cycles", "review-timeout", "withdrawn-approval", "conflict", "flaky-checks", "closed-by-hand"}

func (s scenario) String() string { return scenarioNames[s] }

// approval is one 👍 of the reviewer, with the head it was given on.
type approval struct {
	head      string
	at        time.Time
	withdrawn time.Time // zero if it stands
}

// lifecycle is one PR of the workload and what the workload did to it.
type lifecycle struct {
	n      int
	kind   scenario
	repo   ghref.Repo
	branch string
	pr     ghref.PR
	opened time.Time

	mu        sync.Mutex
	approvals []approval
	comments  int // the reviewer's change requests
	notes     []string
}

func (l *lifecycle) note(format string, args ...any) {
	l.mu.Lock()
	l.notes = append(l.notes, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// setupRepos creates the repositories and who may do what in them.
func (w *world) setupRepos() error {
	for _, u := range []string{reviewer, outsider, author, human} {
		w.sim.AddUser(u, false)
	}
	for i := 0; i < w.o.repos; i++ {
		repo, err := w.sim.CreateRepo(owner, fmt.Sprintf("r%d", i), map[string]string{
			"README.md": "# chaos\n", "shared.txt": "base\n",
		})
		if err != nil {
			return err
		}
		for login, perm := range map[string]string{reviewer: "write", author: "write", botLogin: "write", outsider: "read", human: "admin"} {
			if err := w.sim.SetPermission(repo, login, perm); err != nil {
				return err
			}
		}
		// Every other repository requires ci by a ruleset, as GitHub's
		// default leaves it: not strict, so a PR behind main is "clean"
		// and only prloop's own comparison keeps it from landing untested.
		// The others have no rule, and ci is required by prloop's own
		// PRLOOP_REQUIRED_CHECKS (run.go): with neither, nothing can know
		// that CI exists before it first reports on a PR, and a head
		// approved before then merges untested (seen: a -short run flagged
		// two such merges), which the check "main only moves to a tree CI
		// passed" rightly calls a violation.
		if i%2 == 0 {
			if err := w.sim.SetRuleset(repo, "main", ghsim.RequiredChecks{Contexts: []string{ciContext}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// runWorkload opens the PRs at random moments over the first part of the
// run, drives each through its scenario, and returns when every PR is
// terminal or the duration limit has passed.
func (w *world) runWorkload(ctx context.Context) []*lifecycle {
	ctx, cancel := context.WithTimeout(ctx, w.o.durationLimit)
	defer cancel()
	spread := min(time.Duration(w.o.prs)*time.Second, 90*time.Second)
	var ls []*lifecycle
	for i := 0; i < w.o.prs; i++ {
		l := &lifecycle{n: i + 1, kind: scenario(w.rng.intn(int(numScenarios))), repo: ghref.Repo{Owner: owner, Name: fmt.Sprintf("r%d", i%w.o.repos)}, branch: fmt.Sprintf("chaos-%d", i+1)}
		ls = append(ls, l)
	}
	var wg sync.WaitGroup
	for _, l := range ls {
		delay := w.rng.between(0, spread)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sleep(ctx, delay) {
				return
			}
			if err := w.open(l); err != nil {
				l.note("open: %v", err)
				return
			}
			if l.kind != withdrawn && l.kind != flakyChecks {
				// Those two set ci themselves, and run it after drive.
				go w.runCI(ctx, l, "success")
			}
			w.drive(ctx, l)
			if l.kind == withdrawn || l.kind == flakyChecks {
				// Whether or not drive got to the end (an await that timed
				// out on a loaded machine returns early), CI reports: a real
				// CI always does, and a head left pending holds every PR
				// queued behind it for PRLOOP_CHECKS_TIMEOUT (seed 41 on a
				// loaded machine: two such heads, seven PRs stuck behind).
				go w.runCI(ctx, l, "success")
			}
			w.waitTerminal(ctx, l)
		}()
	}
	wg.Wait()
	return ls
}

func (w *world) open(l *lifecycle) error {
	files := map[string]string{l.branch + ".txt": fmt.Sprintf("pr %d\n", l.n)}
	if l.kind == conflict {
		files["shared.txt"] = fmt.Sprintf("changed by PR %d\n", l.n)
	}
	if _, err := w.sim.PushCommit(l.repo, l.branch, author, files, fmt.Sprintf("Change %d", l.n)); err != nil {
		return err
	}
	pr, err := w.sim.OpenPR(l.repo, ghsim.PRInput{Title: fmt.Sprintf("Chaos change %d (%s)", l.n, l.kind), Body: "Opened by the chaos suite's agent.", Head: l.branch, Author: author})
	if err != nil {
		return err
	}
	l.pr, l.opened = pr, time.Now()
	if l.kind == withdrawn || l.kind == flakyChecks {
		return w.sim.SetStatus(l.repo, w.head(l), ciContext, "pending")
	}
	return nil
}

func (w *world) head(l *lifecycle) string {
	info, err := w.sim.PRInfo(l.pr)
	if err != nil {
		return ""
	}
	return info.HeadSHA
}

// drive plays the scenario's humans. A step that waits in vain (the PR
// escalated or ended early under faults) ends the scenario: the invariants,
// not the scenario, judge the run.
func (w *world) drive(ctx context.Context, l *lifecycle) {
	if !w.await(ctx, l, events.TypeReviewPending, 1, 2*time.Minute) {
		return
	}
	// GitHub's timestamps have whole seconds: a reviewer acting within the
	// second of a push may be taken as acting before it.
	pause := func() bool { return sleep(ctx, w.rng.between(1100*time.Millisecond, 3*time.Second)) }
	pause()
	switch l.kind {
	case approveFirst:
		w.approve(l)
	case oneFix, twoFixes, maxCycles:
		rounds := map[scenario]int{oneFix: 1, twoFixes: 2, maxCycles: 3}[l.kind]
		for i := 1; i <= rounds; i++ {
			w.requestChanges(l, i)
			if i == 3 {
				return // the third change request is one too many: max_fix_cycles
			}
			if !w.await(ctx, l, events.TypeFeedbackAddressed, i, 3*time.Minute) ||
				!w.await(ctx, l, events.TypeReviewPending, i+1, time.Minute) || !pause() {
				return
			}
		}
		w.approve(l)
	case timeoutReview:
		// An outsider's 👍 approves nothing; the review times out.
		if _, err := w.sim.AddReaction(l.pr, outsider, "+1"); err != nil {
			l.note("outsider reaction: %v", err)
		}
	case withdrawn:
		id := w.approve(l)
		if !w.awaitAny(ctx, l, []events.Type{events.TypeMergeQueued, events.TypeMergeWaiting}, time.Minute) {
			return
		}
		w.withdraw(l, id)
		w.await(ctx, l, events.TypeMergeFailed, 1, 30*time.Second)
		pause()
		w.approve(l)
		pause()
	case conflict:
		if _, err := w.sim.PushCommit(l.repo, "main", human, map[string]string{"shared.txt": fmt.Sprintf("changed on main against PR %d\n", l.n)}, "Conflicting change"); err != nil {
			l.note("conflicting push: %v", err)
		}
		w.approve(l)
	case flakyChecks:
		w.approve(l)
		pause()
		if err := w.sim.SetStatus(l.repo, w.head(l), ciContext, "failure"); err != nil {
			l.note("ci failure: %v", err)
		}
		pause()
	case closedByHand:
		if w.rng.intn(2) == 0 {
			_, _ = w.sim.AddReaction(l.pr, reviewer, "eyes")
		}
		sleep(ctx, w.rng.between(time.Second, 10*time.Second))
		if err := w.sim.ClosePR(l.pr); err != nil {
			l.note("close: %v", err)
		}
	}
}

func (w *world) approve(l *lifecycle) int64 {
	head := w.head(l)
	id, err := w.sim.AddReaction(l.pr, reviewer, "+1")
	if err != nil {
		l.note("approve: %v", err)
		return 0
	}
	l.mu.Lock()
	l.approvals = append(l.approvals, approval{head: head, at: time.Now()})
	l.mu.Unlock()
	return id
}

func (w *world) withdraw(l *lifecycle, id int64) {
	// Recorded as withdrawn before the reaction goes: a merge in between
	// is on an approval being withdrawn, and the check errs toward a
	// violation.
	l.mu.Lock()
	if n := len(l.approvals); n > 0 {
		l.approvals[n-1].withdrawn = time.Now()
	}
	l.mu.Unlock()
	if err := w.sim.RemoveReaction(l.pr, id); err != nil {
		l.note("withdraw: %v", err)
	}
}

func (w *world) requestChanges(l *lifecycle, round int) {
	if _, err := w.sim.AddIssueComment(l.pr, reviewer, fmt.Sprintf("Please handle the empty case too (round %d).", round)); err != nil {
		l.note("comment: %v", err)
		return
	}
	l.mu.Lock()
	l.comments++
	l.mu.Unlock()
}

// runCI reports state for the ci context on every head the PR gets
// (prloop's update-branch makes new ones), as a real CI does, until the PR
// is merged or closed or the workload ends. An escalation does not stop
// it: an escalated PR may be approved again and queued, and a queue whose
// first PR waits for checks nobody reports holds up every PR behind it
// for PRLOOP_CHECKS_TIMEOUT.
func (w *world) runCI(ctx context.Context, l *lifecycle, state string) {
	simci.ReportNew(ctx, 500*time.Millisecond, func() bool { return w.rec.ended(l.pr) }, func() []string { return []string{w.head(l)} },
		func(sha string) error { return w.sim.SetStatus(l.repo, sha, ciContext, state) })
}

func (w *world) waitTerminal(ctx context.Context, l *lifecycle) {
	for ctx.Err() == nil && w.rec.terminal(l.pr) == "" {
		sleep(ctx, 250*time.Millisecond)
	}
}

// await waits until the PR has n events of type t; false if it ended
// (terminal) first or the wait timed out.
func (w *world) await(ctx context.Context, l *lifecycle, t events.Type, n int, d time.Duration) bool {
	return w.awaitAny(ctx, l, []events.Type{t}, d, n)
}

func (w *world) awaitAny(ctx context.Context, l *lifecycle, ts []events.Type, d time.Duration, n ...int) bool {
	want := 1
	if len(n) > 0 {
		want = n[0]
	}
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for _, t := range ts {
			if w.rec.count(l.pr, t) >= want {
				return true
			}
		}
		if w.rec.terminal(l.pr) != "" {
			return false
		}
		sleep(ctx, 100*time.Millisecond)
	}
	l.note("waited %s for %v", d, ts)
	return false
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
