package merger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// A speculative pass through the core.
//
// A pass over the speculative queue is observe → stepBatch → store →
// execute, as the serial queue's is observe → Step → store → execute, in
// phases: what the pass reads depends on what it found (the chain is built
// only for PRs that ride, the own heads' checks are read only when a
// green candidate is about to be trusted, the culprit's own checks only
// when its candidate failed). stepBatch is called again after each phase
// with the observation grown by it, and answers with either the next
// phase (Ask: a read, or a side effect whose outcome it must know: the
// push of candidates, the store of the batch) or the pass's end
// (Commands). It decides everything: which PRs ride and which leave
// (ride), what the candidates' verdicts mean (decideBatch), whether the
// next candidates are stacked while the batch merges, the batch to store
// and its events (candidateEvents), the culprit's exit (removed), the
// errors charged to the PR they are about (blame, backOff), the reset of
// the failure counts after a pass that went through, the announcement of
// what the first PR waits for, and a stored decision found not carried
// out after a crash (an entry's outbox or Leaving, the batch's outbox).

// batchObservation is what a speculative pass read so far; the shell
// fills one phase's fields at a time, as stepBatch asks.
type batchObservation struct {
	// Now is when the pass began.
	Now time.Time
	// Entries is the queue, first come first; Batch its stored
	// candidates (with the outbox as stored, until it is flushed).
	Entries []Entry
	Batch   Batch
	// Err is a read of the last phase that failed: charged to the PR it
	// is about (blame), or to the first.
	Err error

	// Riders is what GitHub showed of each PR that rides, in order (the
	// PR, the approval on its head, a merge's tree): askRiders.
	Riders []Observation

	// Built says the chain was built (askBuild): Chain is the candidates
	// on BaseSHA, the tip read, Fresh those committed in this pass (not
	// pushed yet, the end of Chain); Conflict, when set, says why the
	// first PR conflicts with the base itself.
	Built    bool
	Chain    []Candidate
	Fresh    []Candidate
	BaseSHA  string
	Conflict string

	// ChecksRead says what reported on the kept candidates was read
	// (askChecks): Inputs, one per kept candidate, and Required, the
	// base's required checks.
	ChecksRead bool
	Inputs     []ChecksInput
	Required   []string
	// ChecksAt is when they were read: a verdict found then was not there
	// at Now, and the CI times measured (eta.go) end here.
	ChecksAt time.Time

	// Heads is what reported on the own heads of the first riders
	// (askHeads); nil until read.
	Heads []ChecksInput

	// Stacked says the next PRs' candidates were built on Chain (askStack):
	// StackedChain is Chain with them, StackedFresh the new ones;
	// StackErr says they could not be (only time is lost).
	Stacked      bool
	StackedChain []Candidate
	StackedFresh []Candidate
	StackErr     error

	// Pushed says the push stepBatch asked for was made (askPush), and
	// PushErr how it failed.
	Pushed  bool
	PushErr error
	// Stored says the batch stepBatch decided is stored and its events out
	// (askStore).
	Stored bool

	// Own is what reported on the culprit's own head (askOwn); nil until
	// read.
	Own *ChecksInput

	// Rerun says the failed candidate's one re-run was recorded on it and
	// asked of GitHub (askRerun): the shell sets the candidate's Rerun in
	// Chain and Batch as stored; RerunNames are the checks re-run.
	Rerun      bool
	RerunNames []string
}

// batchAsk is a phase stepBatch asks the shell for before it decides
// again: a closed set.
type batchAsk interface{ ask() }

// askRiders: read each riding PR (GetPull), its approval when it is on
// the queued head, or the tree of a merge prloop made.
type askRiders struct{ N int }

// askFlush: publish the stored batch's outbox (a pass stopped between
// storing a decision and saying it) and empty it.
type askFlush struct{}

// askBuild: fetch the base and the riders' heads and build the chain of
// candidates on the base tip, keeping those that test the same trees.
type askBuild struct{ N int }

// askChecks: read what reported on the first N (kept) candidates, and
// what the base requires.
type askChecks struct{ N int }

// askHeads: read what reported on the own heads of the first N riders.
type askHeads struct{ N int }

// askStack: read the N PRs queued from From on (those behind the batch)
// and build their candidates on the chain, while the batch merges.
type askStack struct{ From, N int }

// askPush: push these candidates to their branches, in one push.
type askPush struct{ Candidates []Candidate }

// askStore: store Batch with Events in its outbox, publish them, and
// delete the branches of the candidates in Gone (their PRs left).
type askStore struct {
	Batch  Batch
	Events []outEvent
	Gone   []Candidate
}

// askOwn: read what reported on the own head of the entry at Index.
type askOwn struct{ Index int }

// askRerun: record the one re-run of the failed candidate at Index on the
// stored batch (Mark, so that it is never asked twice), then ask GitHub
// to re-run its Failed Actions jobs; a refusal is recorded too (Mark
// with Refused), and then the PR leaves as it would have (flaky.go).
type askRerun struct {
	Index  int
	Mark   Rerun
	Failed []events.FailedCheck
}

func (askRiders) ask() {}
func (askFlush) ask()  {}
func (askBuild) ask()  {}
func (askChecks) ask() {}
func (askHeads) ask()  {}
func (askStack) ask()  {}
func (askPush) ask()   {}
func (askStore) ask()  {}
func (askOwn) ask()    {}
func (askRerun) ask()  {}

// batchCommand is one side effect that ends a pass: a closed set.
type batchCommand interface{ batchCommand() }

// cmdFinish carries out what the entry at Index stored and did not do:
// its outbox, and its removal when it was leaving.
type cmdFinish struct{ Index int }

// cmdClear forgets an empty queue's candidates (the checks seen on them
// stay) and deletes their branches.
type cmdClear struct{}

// cmdEntry stores and carries out a transition of the entry at Index (a
// PR that leaves, one backing off after an error, a failure count reset,
// the checks seen on its head, an announcement).
type cmdEntry struct {
	Index int
	T     Transition
}

// cmdMergeUpTo merges the first len(Candidates) riders, each on its own
// green candidate (judged on Judged), through land, the base where the
// batch left it (BuiltOn) or where the previous merge did.
type cmdMergeUpTo struct {
	Candidates []Candidate
	Judged     []ChecksInput
	BuiltOn    string
	// Flaky are the candidates (by commit) whose re-run passed in this
	// pass and whose mark no stored batch holds: counted as flaky when
	// they merge, since the batch stored next no longer holds them.
	Flaky []string
}

func (cmdFinish) batchCommand()    {}
func (cmdClear) batchCommand()     {}
func (cmdEntry) batchCommand()     {}
func (cmdMergeUpTo) batchCommand() {}

// batchTransition is stepBatch's answer: the next phase (Ask), or the
// commands that end the pass, in order.
type batchTransition struct {
	Ask      batchAsk
	Commands []batchCommand
	// More says to start the next pass at once; otherwise the queue is
	// empty or waits (a backoff). Wait says to wait the poll interval
	// first.
	More, Wait bool
	// Why says what was decided, for logs.
	Why string
	// Samples are CI times the pass measured on its candidates, from the
	// push to a conclusive verdict (eta.go): the shell records them for
	// the queue's ETA, each commit once.
	Samples []eta.Sample
}

// stepBatch decides a speculative pass from what it observed so far, and
// the policy. It is pure: everything it looks at is in its arguments, and
// everything it does is in its answer.
func stepBatch(o batchObservation, pol Policy) batchTransition {
	if len(o.Entries) == 0 {
		return batchTransition{Commands: []batchCommand{cmdClear{}}, Why: "the queue is empty"}
	}
	for i, e := range o.Entries {
		if len(e.Outbox) > 0 || e.Leaving != "" {
			// A decision stored and not carried out (a crash): its events
			// first, and an entry that was leaving leaves.
			return batchTransition{Commands: []batchCommand{cmdFinish{Index: i}}, More: true, Why: "finishing what a stopped pass decided"}
		}
	}
	if o.Entries[0].NotBefore.After(o.Now) {
		return batchTransition{Why: "the first PR backs off after an error"}
	}
	n := riding(o.Entries, max(pol.QueueDepth, 1), o.Now) // at least the first rides
	// The entries as this pass leaves them: the checks seen on their own
	// heads, once read, are theirs from now on.
	entries := seenOnHeads(o.Entries[:n], o.Heads)
	if o.Err != nil {
		return retryBatch(o, entries, o.Err, pol)
	}
	if o.Riders == nil {
		return batchTransition{Ask: askRiders{N: n}}
	}
	for i, e := range entries {
		if t, rides := ride(e, o.Riders[i], pol); !rides {
			return batchTransition{Commands: []batchCommand{cmdEntry{Index: i, T: t}}, More: true, Why: "a PR leaves the queue"}
		}
		// Wait (mergeability not computed yet), update (behind: the
		// candidate brings it up to date) and merge all ride.
	}
	if len(o.Batch.Outbox) > 0 {
		// Decided and stored, not said: a pass stopped in between.
		return batchTransition{Ask: askFlush{}}
	}
	if !o.Built {
		return batchTransition{Ask: askBuild{N: n}}
	}
	if o.Conflict != "" {
		// The first PR conflicts with the base itself.
		return batchTransition{Commands: []batchCommand{cmdEntry{Index: 0, T: conflicted(entries[0], o.BaseSHA, o.Conflict, pol)}}, More: true, Why: "the first PR conflicts with its base"}
	}
	// The candidates kept from earlier passes form a prefix of the chain
	// (a changed tree changes every tree after it); only they can have
	// checks. New ones are pending by definition.
	kept := len(o.Chain) - len(o.Fresh)
	if kept > 0 && !o.ChecksRead {
		return batchTransition{Ask: askChecks{N: kept}}
	}
	view := batchView{
		Now: o.Now, Base: entries[0].Base, BaseSHA: o.BaseSHA, Chain: o.Chain, Kept: kept, Inputs: o.Inputs,
		Required: o.Required, Seen: o.Batch.SeenChecks, Heads: seenChecksOf(entries[:kept]), HeadsRead: o.Heads != nil,
	}
	d := decideBatch(view, pol)
	if d.ReadHeads > 0 {
		return batchTransition{Ask: askHeads{N: d.ReadHeads}}
	}
	samples := candidateSamples(o.Chain, d.Checks, kept, o.ChecksAt)
	// A re-run candidate green now passed on its re-run: flaky, marked
	// once on the candidate stored.
	o.Chain = markFlaky(o.Chain, d.Checks, kept)
	var rerunEvent []outEvent
	if d.Remove > 0 {
		// A flaky candidate gets one more run before its PR leaves.
		i := d.Remove - 1
		failed := failures(d.Judged[i])
		switch retryFailed(o.Chain[i], failed, pol.RetryFailed, o.Now, pol.ChecksTimeout) {
		case retryNow:
			return batchTransition{Ask: askRerun{Index: i, Mark: askAgain(o.Chain[i], failed, o.Now), Failed: failed}, Samples: samples}
		case retryWait:
			d = waitForRerun(d, i, failed)
			if o.Rerun {
				detail := "re-running the failed jobs of " + strings.Join(cleanNames(o.RerunNames), ", ") + " once before removing the PR"
				rerunEvent = []outEvent{candidateEvent(o.Chain[i], events.CandidateRerun, entries[0].Base, o.BaseSHA, o.Chain, detail)}
			}
		}
	}
	t := stepBatchDecided(o, entries, n, kept, d, rerunEvent, pol)
	t.Samples = samples
	return t
}

// stepBatchDecided goes on with a pass whose candidates' verdicts are in
// (d): merge the green prefix, push and store the candidates, remove the
// culprit, or wait for the checks.
func stepBatchDecided(o batchObservation, entries []Entry, n, kept int, d batchDecision, extra []outEvent, pol Policy) batchTransition {
	next := o.Batch
	next.Outbox = nil
	next.SeenChecks = d.Seen
	if d.Merge > 0 && d.Remove == 0 {
		// The checks seen on the candidates about to merge stay expected
		// of those behind them, which are built on their trees.
		if d.Stack && len(o.Chain) == n {
			var ask batchAsk
			if ask, next = stackNext(o, next, n, d.Merge); ask != nil {
				return batchTransition{Ask: ask}
			}
		}
		if !o.Stored {
			return storeBatch(o, next, extra...)
		}
		return batchTransition{Commands: append(headUpdates(o, entries, -1), cmdMergeUpTo{
			Candidates: o.Chain[:d.Merge], Judged: d.Judged[:d.Merge], BuiltOn: o.BaseSHA,
			Flaky: unstoredFlaky(o.Batch.Candidates, o.Chain[:d.Merge]),
		}), More: true, Why: fmt.Sprintf("merging the first %d PRs on their green candidates", d.Merge)}
	}
	chain, fresh := o.Chain, o.Fresh
	if !d.Stack {
		// Built in the scratch repository only; the next pass, after the
		// failing PR has left, builds what is worth testing.
		chain, fresh = chain[:kept], nil
	}
	// The push comes before the store: a candidate recorded is one CI can
	// see, and a pass that stops in between builds the same commit again.
	if len(fresh) > 0 && !o.Pushed {
		return batchTransition{Ask: askPush{Candidates: fresh}}
	}
	if o.PushErr != nil {
		return retryBatch(o, entries, o.PushErr, pol)
	}
	next.BaseSHA, next.Candidates = o.BaseSHA, chain
	if !o.Stored {
		return storeBatch(o, next, extra...)
	}
	if d.Fail > 0 {
		// The culprit leaves first, before the PRs ahead of it merge: the
		// next pass stacks the PRs behind it on the green prefix while
		// those merges go on.
		i := d.Fail - 1
		if d.Remove == 0 {
			return batchTransition{Commands: append(headUpdates(o, entries, i), cmdEntry{Index: i, T: fail(entries[i], events.ReasonChecksFailed, d.Why, pol)}), More: true, Why: d.Why}
		}
		// Its candidate failed: whether its own head is green says
		// whether the agent or a human is asked.
		if o.Own == nil {
			return batchTransition{Ask: askOwn{Index: i}}
		}
		t := removed(entries[i], o.Chain[i], d.Judged[i], *o.Own, o.BaseSHA, d.Why, pol)
		return batchTransition{Commands: append(headUpdates(o, entries, i), cmdEntry{Index: i, T: t}), More: true, Why: t.Why}
	}
	// The pass went through: every rider's earlier errors are behind it
	// (and what its head's checks taught is kept), and the first says what
	// it waits for.
	var cmds []batchCommand
	for i, e := range entries {
		t := Transition{Next: e, Why: "the pass went through"}
		t.Next.Failures = 0
		if i == 0 && len(d.Checks) > 0 {
			t.Events, t.Why = announceWaiting(&t.Next, d.Checks[0]), "waiting for checks"
		}
		cmds = append(cmds, cmdEntry{Index: i, T: t})
	}
	return batchTransition{Commands: cmds, More: true, Wait: true, Why: "waiting for the candidates' checks"}
}

// stackNext is the phase that gives the PRs after the batch (queued after
// the riders) their candidates before the batch's proven PRs (merge of
// them) merge, so that their CI runs during the merges rather than after
// them. The merges leave the base at the tree of the last merged
// candidate, so a candidate stacked on the chain now has the tree the
// next pass computes on the new base, and that pass keeps it (by tree)
// with its CI already under way. If the merges stop early, the next pass
// finds other trees and rebuilds: a CI run spent, nothing untested
// merged. At most merge more candidates are stacked: as many as leave CI
// by merging, so no more than the depth are ever pending. It returns the
// phase to ask for next, or (nil) the batch to store: next holding the
// chain with the new candidates, pushed, or next as it was when they
// could not be built or pushed (only time is lost: the next pass builds
// them on the base the merges leave).
func stackNext(o batchObservation, next Batch, riders, merge int) (batchAsk, Batch) {
	more := o.Entries[riders:min(len(o.Entries), riders+merge)]
	more = more[:riding(more, len(more), o.Now)]
	if len(more) > 0 && !o.Stacked {
		return askStack{From: riders, N: len(more)}, next
	}
	if o.StackErr != nil {
		return nil, next
	}
	if push := append(slices.Clone(o.Fresh), o.StackedFresh...); len(push) > 0 && !o.Pushed {
		return askPush{Candidates: push}, next
	}
	if o.PushErr != nil {
		return nil, next
	}
	next.BaseSHA, next.Candidates = o.BaseSHA, o.Chain
	if o.Stacked {
		next.Candidates = o.StackedChain
	}
	return nil, next
}

// headUpdates stores what the own heads' checks taught of the entries
// (entries as the pass leaves them), but for the one at except, whose own
// transition holds it.
func headUpdates(o batchObservation, entries []Entry, except int) []batchCommand {
	var cmds []batchCommand
	for i := range o.Heads {
		if i != except && i < len(entries) && len(entries[i].SeenChecks) != len(o.Entries[i].SeenChecks) {
			cmds = append(cmds, cmdEntry{Index: i, T: Transition{Next: entries[i], Why: "checks seen on its head"}})
		}
	}
	return cmds
}

// storeBatch is the phase that stores next with the PRMergeCandidate
// events that say how it differs from the stored batch.
func storeBatch(o batchObservation, next Batch, extra ...outEvent) batchTransition {
	queued := func(pr ghref.PR) bool {
		return slices.ContainsFunc(o.Entries, func(e Entry) bool { return e.PR.Number == pr.Number })
	}
	evs, gone := candidateEvents(o.Batch, next.Candidates, o.Entries[0].Base, next.BaseSHA, queued)
	return batchTransition{Ask: askStore{Batch: next, Events: append(evs, extra...), Gone: gone}}
}

// retryBatch charges err to the PR it is about; one about the base or the
// queue to the first, and it holds the whole queue, first come first
// served. A PR further back waits on its own: the next pass leaves it and
// those behind it out of the candidates until its backoff ends (riding),
// and the PRs ahead of it go on at once.
func retryBatch(o batchObservation, entries []Entry, err error, pol Policy) batchTransition {
	i := blame(err, prsOf(entries))
	t := backOff(entries[i], err, o.Now, pol)
	return batchTransition{Commands: append(headUpdates(o, entries, i), cmdEntry{Index: i, T: t}), More: i != 0, Why: t.Why}
}

// seenOnHeads is entries with what reported on their own heads (heads,
// for the first of them) added to the checks seen on them.
func seenOnHeads(entries []Entry, heads []ChecksInput) []Entry {
	out := slices.Clone(entries)
	for i, in := range heads {
		if i < len(out) {
			out[i].SeenChecks = union(out[i].SeenChecks, EvaluateChecks(in).Reported)
		}
	}
	return out
}

// seenChecksOf returns, per entry, the checks that reported on its PR's
// heads.
func seenChecksOf(entries []Entry) [][]string {
	out := make([][]string, len(entries))
	for i, e := range entries {
		out[i] = e.SeenChecks
	}
	return out
}
