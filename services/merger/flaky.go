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
// too, was refused or never reported) removes the PR. It is pure.
func retryFailed(c Candidate, failed []events.FailedCheck, enabled bool, now time.Time, timeout time.Duration) retryVerdict {
	switch {
	case !enabled || len(failed) == 0:
		return retryNone
	case c.Rerun == nil:
		if slices.ContainsFunc(failed, func(f events.FailedCheck) bool { return !f.Actions || f.ID <= 0 }) {
			return retryNone
		}
		return retryNow
	case c.Rerun.Refused || now.Sub(c.Rerun.At) >= timeout:
		return retryNone
	case !slices.ContainsFunc(failed, func(f events.FailedCheck) bool { return !slices.Contains(c.Rerun.Failed, f.ID) }):
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

// retryFailed carries out retryFailed and flakyPassed in a speculative
// pass, after decideBatch (d) and before the pass records the batch: it
// counts the flaky passes, and turns the removal of a PR whose candidate
// gets its one re-run (or waits for it) into a wait. What it marks on the
// candidates (in v's chain and in batch, by commit) is saved at rev
// first; it returns the batch's revision.
func (sp *speculation) retryFailed(ctx context.Context, d *batchDecision, v batchView, batch *Batch, rev uint64) (uint64, error) {
	s := sp.s
	chain, kept, now := v.Chain, v.Kept, v.Now
	mark := func(i int, r Rerun) {
		chain[i].Rerun = &r
		for j := range batch.Candidates {
			if batch.Candidates[j].SHA == chain[i].SHA {
				batch.Candidates[j].Rerun = &r
			}
		}
	}
	changed := false
	for _, i := range flakyPassed(chain, d.Checks, kept) {
		r := *chain[i].Rerun
		r.Passed = true
		mark(i, r)
		changed = true
		s.d.Metrics.CandidateRerun(metrics.RerunFlaky)
		sp.log.Info("a re-run candidate passed: flaky", "pr", chain[i].PR.String(), "candidate", short(chain[i].SHA))
	}
	save := func() error {
		var err error
		rev, err = sp.save(ctx, *batch, rev)
		changed = false
		return err
	}
	if d.Remove == 0 {
		if changed {
			return rev, save()
		}
		return rev, nil
	}
	i := d.Remove - 1
	c := chain[i]
	failed := failures(d.Judged[i])
	log := sp.log.With("pr", c.PR.String(), "candidate", short(c.SHA))
	switch retryFailed(c, failed, s.cfg.RetryFailed, now, s.cfg.policy().ChecksTimeout) {
	case retryNone:
		if changed {
			return rev, save()
		}
		return rev, nil
	case retryNow:
		// Recorded first: a re-run asked is never asked again, whatever
		// happens next.
		mark(i, Rerun{At: now.UTC(), Failed: checkIDs(failed)})
		if err := save(); err != nil {
			return rev, err
		}
		rr, ok := s.d.GitHub.(github.Rerunner)
		var r github.Rerun
		err := errors.ErrUnsupported
		if ok {
			r, err = github.RerunFailed(ctx, rr, c.PR.RepoRef(), failed)
		}
		if err != nil {
			if ctx.Err() != nil || !(errors.Is(err, github.ErrNoRerun) || errors.Is(err, errors.ErrUnsupported)) {
				return rev, about(c.PR, err) // transient: the pass backs off, and waits for the re-run it may have made
			}
			log.Warn("cannot re-run the failed candidate's jobs; its PR leaves", "err", err)
			mark(i, Rerun{At: now.UTC(), Failed: checkIDs(failed), Refused: true})
			return rev, save()
		}
		s.d.Metrics.CandidateRerun(metrics.RerunAsked)
		detail := "re-running the failed jobs of " + strings.Join(cleanNames(r.Names), ", ") + " once before removing the PR"
		log.Info("candidate failed; re-running its failed jobs once", "runs", r.Runs, "checks", r.Names)
		ev := candidateEvent(chain[i], events.CandidateRerun, v.Base, v.BaseSHA, chain, detail)
		e, err := s.emit.Build(ev.Data, ev.Parts...)
		if err != nil {
			return rev, err
		}
		batch.Outbox = append(batch.Outbox, e)
		if err := save(); err != nil {
			return rev, err
		}
		if rev, err = sp.flush(ctx, *batch, rev); err != nil {
			return rev, err
		}
		batch.Outbox = nil
	case retryWait:
		if changed {
			if err := save(); err != nil {
				return rev, err
			}
		}
	}
	d.Remove, d.Fail, d.Why = 0, 0, ""
	d.Checks[i] = Checks{State: ChecksPending, Pending: []string{strings.Join(cleanNames(checkNames(failed)), ", ") + " (re-run)"}}
	return rev, nil
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
