package merger

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
)

// A flaky candidate gets one more run (docs/queue.md, Flaky candidates):
// when a speculative candidate fails where its PR would be removed
// (decideBatch's Remove), its failed GitHub Actions jobs are re-run once
// (PRLOOP_QUEUE_RETRY_FAILED) and the PR stays; only a failure of the
// re-run removes it. A pass on the re-run is counted as flaky. The re-run
// is recorded on the candidate (Candidate.Rerun) before GitHub is asked,
// so a restart or another replica never re-runs it twice; a candidate
// rebuilt (a new tree) starts without one.

// Rerun is the one re-run of a failed candidate's GitHub Actions jobs.
type Rerun struct {
	// At is when it was asked: the re-run's checks time out
	// PRLOOP_CHECKS_TIMEOUT after it.
	At time.Time `json:"at"`
	// Failed are the check runs that had failed: while every failed
	// check is one of them, the new attempt has not reported yet.
	Failed []int64 `json:"failed,omitempty"`
	// Refused says GitHub would not re-run them: the PR leaves as it
	// would have.
	Refused bool `json:"refused,omitempty"`
	// Passed says the candidate went green after it: counted as flaky,
	// once.
	Passed bool `json:"passed,omitempty"`
	// Asks counts the requests made to GitHub for this re-run (records
	// from before it was counted say 0: one).
	Asks int `json:"asks,omitempty"`
	// Unsent says the last request failed in a way that may pass (GitHub
	// unreachable, a 5xx): GitHub most likely re-ran nothing, so a later
	// pass asks again, up to rerunAsks requests in all, instead of waiting
	// PRLOOP_CHECKS_TIMEOUT for a re-run that never started.
	Unsent bool `json:"unsent,omitempty"`
}

// rerunAsks is how many requests one re-run may take when GitHub fails
// to answer: a blip costs a pass's backoff, not the PR's place.
const rerunAsks = 3

// askAgain is the re-run of candidate c whose failed checks are failed,
// as recorded before GitHub is asked (again): now, the failed checks,
// and one more request. It is pure.
func askAgain(c Candidate, failed []events.FailedCheck, now time.Time) Rerun {
	r := Rerun{At: now.UTC(), Failed: checkIDs(failed), Asks: 1}
	if c.Rerun != nil {
		r.Asks = max(c.Rerun.Asks, 1) + 1
	}
	return r
}

// retryVerdict is what retryFailed says of a failed candidate.
type retryVerdict int

const (
	// retryNone: its PR is removed, as decideBatch decided.
	retryNone retryVerdict = iota
	// retryNow: re-run its failed jobs, and its PR stays.
	retryNow
	// retryWait: the re-run was asked and its new attempt has not
	// reported yet; its PR stays.
	retryWait
)

// retryFailed decides about candidate c, whose failed checks (failed)
// would remove its PR: the first failure of a candidate whose every
// failed check is a GitHub Actions job is re-run once, when enabled
// (PRLOOP_QUEUE_RETRY_FAILED); a re-run whose new attempt has not
// reported is waited for, up to timeout after it was asked; anything else
// (a commit status failed, which no re-run repeats; the re-run failed
// too, was refused or never reported) removes the PR. A request GitHub
// failed to answer (Rerun.Unsent) is made again while the same checks
// are failed, up to rerunAsks requests. It is pure.
func retryFailed(c Candidate, failed []events.FailedCheck, enabled bool, now time.Time, timeout time.Duration) retryVerdict {
	sameFailure := func() bool {
		return !slices.ContainsFunc(failed, func(f events.FailedCheck) bool { return !slices.Contains(c.Rerun.Failed, f.ID) })
	}
	switch {
	case !enabled || len(failed) == 0:
		return retryNone
	case c.Rerun == nil:
		if slices.ContainsFunc(failed, func(f events.FailedCheck) bool { return !f.Actions || f.ID <= 0 }) {
			return retryNone
		}
		return retryNow
	case c.Rerun.Refused:
		return retryNone
	case c.Rerun.Unsent:
		if max(c.Rerun.Asks, 1) < rerunAsks && sameFailure() {
			return retryNow
		}
		return retryNone
	case now.Sub(c.Rerun.At) >= timeout:
		return retryNone
	case sameFailure():
		return retryWait
	}
	return retryNone
}

// flakyPassed returns the places (from 0) of the first kept candidates of
// a chain that were re-run and are green now (checks, in chain order) and
// not yet counted as flaky. It is pure.
func flakyPassed(chain []Candidate, checks []Checks, kept int) []int {
	var out []int
	for i := range min(kept, len(chain), len(checks)) {
		if r := chain[i].Rerun; r != nil && !r.Passed && !r.Refused && checks[i].State == ChecksGreen {
			out = append(out, i)
		}
	}
	return out
}

// checkIDs are the ids of failed checks.
func checkIDs(failed []events.FailedCheck) []int64 {
	out := make([]int64, 0, len(failed))
	for _, f := range failed {
		out = append(out, f.ID)
	}
	return out
}

// markFlaky returns chain with the re-run candidates that are green now
// (flakyPassed) marked Passed: counted as flaky once, when the batch that
// holds the mark is stored. It is pure; chain is not changed.
func markFlaky(chain []Candidate, checks []Checks, kept int) []Candidate {
	idx := flakyPassed(chain, checks, kept)
	if len(idx) == 0 {
		return chain
	}
	out := slices.Clone(chain)
	for _, i := range idx {
		r := *out[i].Rerun
		r.Passed = true
		out[i].Rerun = &r
	}
	return out
}

// waitForRerun is d with the removal of the PR whose candidate (at i)
// gets, or got, its one re-run turned into a wait for the re-run's
// verdict. It is pure.
func waitForRerun(d batchDecision, i int, failed []events.FailedCheck) batchDecision {
	d.Remove, d.Fail, d.Why = 0, 0, ""
	d.Checks = slices.Clone(d.Checks)
	if i < len(d.Checks) {
		d.Checks[i] = Checks{State: ChecksPending, Pending: []string{strings.Join(cleanNames(checkNames(failed)), ", ") + " (re-run)"}}
	}
	return d
}

// rerun is askRerun's phase: the re-run is recorded on the stored batch
// first (a re-run asked is never asked again, whatever happens next,
// unless GitHub failed to answer), then GitHub is asked; a refusal is
// recorded too. A transient error is recorded as Unsent and is o.Err:
// the pass backs off and a later one asks again (retryFailed). o's chain
// and batch get the candidate's Rerun as stored.
func (sp *speculation) rerun(ctx context.Context, a askRerun, o *batchObservation, ps *passState) error {
	s := sp.s
	c := o.Chain[a.Index]
	mark := func(r Rerun) error {
		o.Chain = slices.Clone(o.Chain)
		o.Chain[a.Index].Rerun = &r
		o.Batch.Candidates = slices.Clone(o.Batch.Candidates)
		for j := range o.Batch.Candidates {
			if o.Batch.Candidates[j].SHA == c.SHA {
				o.Batch.Candidates[j].Rerun = &r
			}
		}
		var err error
		ps.rev, err = sp.save(ctx, o.Batch, ps.rev)
		return err
	}
	if err := mark(a.Mark); err != nil {
		return err
	}
	log := sp.log.With("pr", c.PR.String(), "candidate", short(c.SHA))
	rr, ok := s.d.GitHub.(github.Rerunner)
	var r github.Rerun
	err := errors.ErrUnsupported
	if ok {
		r, err = github.RerunFailed(ctx, rr, c.PR.RepoRef(), a.Failed)
	}
	if err != nil {
		if ctx.Err() != nil || !(errors.Is(err, github.ErrNoRerun) || errors.Is(err, errors.ErrUnsupported)) {
			o.Err = about(c.PR, err)
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("asking GitHub to re-run the failed candidate's jobs failed; a later pass asks again", "ask", a.Mark.Asks, "of", rerunAsks, "err", err)
			unsent := a.Mark
			unsent.Unsent = true
			return mark(unsent)
		}
		log.Warn("cannot re-run the failed candidate's jobs; its PR leaves", "err", err)
		refused := a.Mark
		refused.Refused = true
		return mark(refused)
	}
	s.d.Metrics.CandidateRerun(metrics.RerunAsked)
	log.Info("candidate failed; re-running its failed jobs once", "runs", r.Runs, "checks", r.Names)
	o.Rerun, o.RerunNames = true, r.Names
	return nil
}

// unstoredFlaky returns the commits of the candidates of chain marked
// Passed (markFlaky) whose mark the stored candidates do not hold: a
// candidate that merges in the pass its re-run passed is never stored
// with the mark, so it is counted as flaky when it merges instead
// (mergeUpTo). It is pure.
func unstoredFlaky(stored, chain []Candidate) []string {
	var out []string
	for _, c := range chain {
		if c.Rerun == nil || !c.Rerun.Passed {
			continue
		}
		if slices.ContainsFunc(stored, func(o Candidate) bool { return o.SHA == c.SHA && o.Rerun != nil && o.Rerun.Passed }) {
			continue
		}
		out = append(out, c.SHA)
	}
	return out
}

// countFlaky counts the candidates of next marked Passed (markFlaky) that
// were not in old: each flaky pass once, as the batch holding it is
// stored (or, for one that merges first, as it merges: unstoredFlaky).
func (sp *speculation) countFlaky(old, next Batch) {
	for _, c := range next.Candidates {
		if c.Rerun == nil || !c.Rerun.Passed {
			continue
		}
		if slices.ContainsFunc(old.Candidates, func(o Candidate) bool { return o.SHA == c.SHA && o.Rerun != nil && o.Rerun.Passed }) {
			continue
		}
		sp.s.d.Metrics.CandidateRerun(metrics.RerunFlaky)
		sp.log.Info("a re-run candidate passed: flaky", "pr", c.PR.String(), "candidate", short(c.SHA))
	}
}

// checkNames are the failed checks' names.
func checkNames(failed []events.FailedCheck) []string {
	out := make([]string, len(failed))
	for i, f := range failed {
		out[i] = f.Name
	}
	return out
}

// cleanNames are check names as events and logs may show them.
func cleanNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = events.CleanTitle(n)
	}
	return out
}
