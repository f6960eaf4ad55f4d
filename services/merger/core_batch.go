package merger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// The speculative queue's pure core: which PRs ride in candidates, how the
// candidates' checks are judged, what the queue does with the verdicts.

// mergeDecision is chooseMerge's answer.
type mergeDecision struct {
	// Merge is how many PRs, from the first, can be merged now: each of
	// them has its own candidate green.
	Merge int
	// Remove, when not 0, is the place (from 1) of a PR whose candidate
	// failed while the candidate before it passed (or it is the first):
	// that PR broke the build and leaves the queue.
	Remove int
	// Stack says new candidates may be built at the end of the chain. Not
	// after a failed candidate: a candidate stacked on it holds the
	// failure too, and would only spend a CI run on a certain red. They
	// are built once the failing PR has left.
	Stack bool
}

// chooseMerge decides from the candidates' check verdicts, in order, what
// the queue can do: merge the PRs whose candidates are green, from the
// first up to the first that is not; remove the PR whose candidate is the
// first failed one when the candidate before it passed (the base plus the
// PRs ahead was green, adding this PR made it red); or wait. It is pure.
//
// Merging PR k moves the base to candidate k's tree, so candidate k must
// be green before that merge call, whatever a later candidate says: a
// green candidate k+1 proves the PRs 1…k+1 together, not the tree main
// sits on between the two merges, and if the second merge does not come
// (refused, approval withdrawn, base moved) main stays on that tree. So
// [pending, green] waits for the first candidate. Squash merges land one
// PR at a time; nothing can move the base to candidate k+1 in one step.
//
// A failed candidate after a pending one only waits: its fault may lie
// with a PR before it, which that PR's own candidate will show.
func chooseMerge(states []ChecksState) mergeDecision {
	d := mergeDecision{Stack: true}
	proven := true // every candidate so far is green
	for i, st := range states {
		if st == ChecksFailed {
			d.Stack = false
			if i == 0 || states[i-1] == ChecksGreen {
				d.Remove = i + 1
			}
			break
		}
		proven = proven && st == ChecksGreen
		if proven {
			d.Merge = i + 1
		}
	}
	return d
}

// reusable returns the old candidate that still tests what the chain's
// candidate for pr at head must test: the same tree. Its place may have
// changed (the PRs ahead of it merged): the tree, not the place, is what
// CI tested.
func reusable(old []Candidate, pr ghref.PR, head, tree string) (Candidate, bool) {
	for _, c := range old {
		if c.PR.Number == pr.Number && c.Head == head && c.Tree == tree {
			return c, true
		}
	}
	return Candidate{}, false
}

// invalidated returns the candidates of old that next no longer holds
// (by commit), for PRs still queued.
func invalidated(old, next []Candidate, queued func(ghref.PR) bool) []Candidate {
	var out []Candidate
	for _, c := range old {
		if !slices.ContainsFunc(next, func(n Candidate) bool { return n.SHA == c.SHA }) && queued(c.PR) {
			out = append(out, c)
		}
	}
	return out
}

// riding returns how many of the first entries of a queue ride in
// candidates: at most depth, up to the first that is waiting out the
// backoff of an error of its own (NotBefore after now). Queue order holds:
// the PRs behind such an entry wait with it, the PRs ahead of it go on. It
// is pure.
func riding(entries []Entry, depth int, now time.Time) int {
	n := min(len(entries), depth)
	for i := range n {
		if entries[i].NotBefore.After(now) {
			return i
		}
	}
	return n
}

// blame returns the place (from 0) in prs of the PR an error of a pass is
// about: the first of them when the error (or one joined in it) is about
// none of them in particular (the base, the queue, a local failure),
// otherwise the earliest PR named, since the PRs behind it wait for it
// anyway. It is pure.
func blame(err error, prs []ghref.PR) int {
	place := len(prs)
	var walk func(error) bool // false: err is about no PR of prs
	walk = func(err error) bool {
		switch e := err.(type) {
		case *prError:
			i := slices.IndexFunc(prs, func(p ghref.PR) bool { return p == e.pr })
			if i < 0 {
				return false
			}
			place = min(place, i)
			return true
		case interface{ Unwrap() []error }:
			for _, sub := range e.Unwrap() {
				if !walk(sub) {
					return false
				}
			}
			return len(e.Unwrap()) > 0
		case interface{ Unwrap() error }:
			if sub := e.Unwrap(); sub != nil {
				return walk(sub)
			}
		}
		return false
	}
	if !walk(err) || place == len(prs) {
		return 0
	}
	return place
}

// prsOf returns the PRs of entries, in order.
func prsOf(entries []Entry) []ghref.PR {
	out := make([]ghref.PR, len(entries))
	for i, e := range entries {
		out[i] = e.PR
	}
	return out
}

// judgeCandidates evaluates the checks of a chain's candidates, in chain
// order. Each must report what the base requires and every check seen
// before it: on the queue's earlier candidates (seen), on the ones ahead
// of it in this chain, read at the same moment, because CI may have
// registered a check on candidate 1 and not yet on candidate 2, and on the
// heads of the PRs it carries (heads[i] for the PR of candidate i): with
// no rule naming them, a check that ran on a PR's own head is how prloop
// knows CI has it. It returns the verdicts, what each was judged on (the
// input with what was expected of the candidate: mayLand judges it again
// right before the merge), and every check seen on a candidate so far.
func judgeCandidates(inputs []ChecksInput, required, seen []string, heads [][]string) ([]Checks, []ChecksInput, []string) {
	out := make([]Checks, len(inputs))
	on := make([]ChecksInput, len(inputs))
	var carried []string
	for i, in := range inputs {
		if i < len(heads) {
			carried = union(carried, heads[i])
		}
		in.Required, in.Seen = required, union(seen, carried)
		on[i], out[i] = in, candidateChecks(in)
		seen = union(seen, out[i].Reported)
	}
	return out, on, seen
}

// greenPrefix returns how many candidates, from the first, chooseMerge
// would merge on these verdicts: those whose checks are about to be
// trusted.
func greenPrefix(judged []Checks) int {
	states := make([]ChecksState, len(judged))
	for i, c := range judged {
		states[i] = c.State
	}
	return chooseMerge(states).Merge
}

// candidateChecks evaluates a candidate's checks: those the base requires
// and those seen on the queue's earlier candidates (in.Required, in.Seen)
// must all report and pass, and a candidate on which nothing reported is
// never green (it was not tested).
func candidateChecks(in ChecksInput) Checks {
	c := EvaluateChecks(in)
	if c.State == ChecksGreen && len(c.Reported) == 0 {
		c.State = ChecksPending
		c.Pending = []string{"any check (none reported on the candidate yet)"}
	}
	return c
}

// ride says whether a PR of the speculative queue rides in the
// candidates, or how it leaves. Its exits are the serial queue's, decided
// without checks or a comparison with the base: a candidate brings the PR
// up to date and carries its checks. It is pure.
func ride(e Entry, o Observation, pol Policy) (Transition, bool) {
	d := Decide(Input{PR: o.PR, Head: e.Head, Approval: o.Approval, ChecksTimeout: pol.ChecksTimeout})
	switch d.Action {
	case ActMerged, ActDrop, ActFail:
		return exit(e, o.PR, d, o.MergedTree, pol), false
	}
	return Transition{Next: e}, true
}

// land decides the merge of the speculative queue's PR e on its own
// candidate c, from a read of GitHub made right before (o: the PR, its
// approval, the base's policy, the base tip), with the base where the
// previous merge of the batch (or the batch itself) left it (builtOn);
// judged is what c's checks were judged on. mayLand alone lets the merge go: the transition then
// records the merge intent (the candidate's tree is what main must get)
// and holds the merge command, whose landing carries the tip just read.
// Without a command the merges stop there, and the next pass looks again:
// the PR changed or left, or the base moved (rebuild), or the rule refused
// for another reason (counted like a refusal). It is pure.
func land(e Entry, o Observation, c Candidate, judged ChecksInput, builtOn string, pol Policy) Transition {
	v := o.PR
	if !v.Open || v.Merged {
		return Transition{Next: e, Why: "the PR left before its merge; the next pass lets it leave"}
	}
	approval := o.Approval
	if v.HeadSHA != e.Head {
		approval = ApprovalCheck{} // not read: the rule refuses the head first
	}
	l := landing{
		Head: v.HeadSHA, Approved: e.Head, Base: v.BaseRef, ApprovedBase: e.Base, Approval: approval,
		Tested: c.SHA, TestedHead: c.Head, Candidate: true, BuiltOn: builtOn, Tip: o.Tip,
		RequireChecks: true, Required: judged.Required, Seen: judged.Seen, Reports: judged,
	}
	verdict := mayLand(l)
	f, isFrozen := frozen(o.Freezes, e.Base, o.Now)
	switch {
	case verdict.ok() && isFrozen:
		// Tested and approved: it merges on this candidate once unfrozen.
		return hold(e, f)
	case verdict.ok():
	case verdict.Refusal == refusedHead || verdict.Refusal == refusedBase:
		return Transition{Next: e, Why: "the PR changed before its merge; the next pass looks again: " + verdict.Why}
	case verdict.Refusal == refusedTip:
		return Transition{Next: e, Why: "the base branch moved; rebuilding the candidates: " + verdict.Why}
	default:
		return withhold(e, verdict, pol)
	}
	next := e
	next.Intent = &Intent{Kind: intentMerge, Head: c.Head, Tree: c.Tree}
	return Transition{Next: next, Commands: []Command{cmdMerge{Head: c.Head, Tree: c.Tree, Landing: l, Settings: o.Settings}}, Why: "merging on its green candidate " + short(c.SHA)}
}

// batchView is what a speculative pass observed of its chain of
// candidates.
type batchView struct {
	Now           time.Time
	Base, BaseSHA string
	Chain         []Candidate
	// Kept is how many candidates, from the first, were kept from earlier
	// passes: only they can have checks (a changed tree changes every tree
	// after it, so they form a prefix). Inputs is what reported on each.
	Kept   int
	Inputs []ChecksInput
	// Required names the checks the base requires; Seen those seen on the
	// queue's earlier candidates.
	Required, Seen []string
	// Heads names, per kept candidate, the checks seen on its PR's own
	// heads; HeadsRead says they were read in this pass.
	Heads     [][]string
	HeadsRead bool
}

// batchDecision is decideBatch's answer.
type batchDecision struct {
	mergeDecision
	// ReadHeads, when set, asks for the checks on the own heads of the
	// first ReadHeads riders before deciding: a green candidate is about
	// to be trusted, and what reported on the heads it carries is expected
	// of it too, read when CI on those heads has had the longest time to
	// register.
	ReadHeads int
	// Checks is the verdict on each candidate of the chain; Judged what
	// each kept one was judged on (mayLand judges it again right before a
	// merge); Seen every check seen on a candidate so far.
	Checks []Checks
	Judged []ChecksInput
	Seen   []string
	// Fail, when set, is the place (from 1) of the PR that leaves with
	// checks_failed: its candidate failed while the one before it passed,
	// or the first candidate's checks timed out; Why is the detail.
	Fail int
	Why  string
}

// decideBatch judges the chain's candidates and says what the queue does:
// merge the PRs whose own candidates are green, remove the PR that broke
// the build, give up on checks that did not finish in time, or wait. It
// is pure.
func decideBatch(v batchView, pol Policy) batchDecision {
	judged, on, seen := judgeCandidates(v.Inputs, v.Required, v.Seen, v.Heads)
	if n := greenPrefix(judged); n > 0 && !v.HeadsRead {
		return batchDecision{ReadHeads: n}
	}
	checks := make([]Checks, len(v.Chain))
	copy(checks, judged)
	states := make([]ChecksState, len(v.Chain))
	for i := range v.Chain {
		if i >= v.Kept {
			checks[i] = Checks{State: ChecksPending, Pending: []string{"any check (the candidate is new)"}}
		}
		states[i] = checks[i].State
	}
	d := batchDecision{mergeDecision: chooseMerge(states), Checks: checks, Judged: on, Seen: seen}
	switch {
	case d.Merge > 0 && d.Remove == 0:
	case d.Remove > 0:
		i := d.Remove - 1
		c := v.Chain[i]
		var plus strings.Builder
		for _, a := range v.Chain[:i] {
			fmt.Fprintf(&plus, "#%d, ", a.PR.Number)
		}
		d.Fail, d.Why = d.Remove, fmt.Sprintf("checks failed on candidate %s (branch %s: %s at %s plus %sthis PR at %s): %s",
			ghref.ShortSHA(c.SHA), c.Branch, v.Base, ghref.ShortSHA(v.BaseSHA), plus.String(), ghref.ShortSHA(c.Head), strings.Join(checks[i].Failed, ", "))
	case len(v.Chain) > 0 && v.Now.Sub(v.Chain[0].BuiltAt) >= pol.ChecksTimeout:
		c := v.Chain[0]
		d.Fail, d.Why = 1, fmt.Sprintf("checks on candidate %s (branch %s) still pending after %s: %s",
			ghref.ShortSHA(c.SHA), c.Branch, pol.ChecksTimeout, strings.Join(checks[0].Pending, ", "))
	}
	return d
}

// candidateEvents says the chain: PRMergeCandidate "invalidated" for
// every candidate of old it no longer holds whose PR is still queued, then
// "built" for each new one; gone are the old candidates whose PRs left,
// whose branches are deleted. Ids carry the candidate commit, so a pass
// repeated after a crash says nothing twice. It is pure.
func candidateEvents(old Batch, chain []Candidate, base, baseSHA string, queued func(ghref.PR) bool) (evs []outEvent, gone []Candidate) {
	for _, c := range old.Candidates {
		if !queued(c.PR) {
			gone = append(gone, c)
		}
	}
	for _, c := range invalidated(old.Candidates, chain, queued) {
		detail := "the base branch moved"
		if i := slices.IndexFunc(chain, func(n Candidate) bool { return n.PR.Number == c.PR.Number }); i >= 0 && chain[i].Head != c.Head {
			detail = "the PR's head changed"
		} else if old.BaseSHA == baseSHA {
			detail = "a PR ahead of it left the queue or changed"
		}
		evs = append(evs, candidateEvent(c, events.CandidateInvalidated, base, old.BaseSHA, old.Candidates, detail))
	}
	for _, c := range chain {
		if slices.ContainsFunc(old.Candidates, func(o Candidate) bool { return o.SHA == c.SHA && o.PR.Number == c.PR.Number }) {
			continue
		}
		evs = append(evs, candidateEvent(c, events.CandidateBuilt, base, baseSHA, chain, ""))
	}
	return evs, gone
}

// candidateEvent is one PRMergeCandidate about c, a member of chain.
func candidateEvent(c Candidate, state, base, baseSHA string, chain []Candidate, detail string) outEvent {
	pos := slices.IndexFunc(chain, func(o Candidate) bool { return o.SHA == c.SHA }) + 1
	var ahead []int
	for _, o := range chain[:max(pos-1, 0)] {
		ahead = append(ahead, o.PR.Number)
	}
	return outEvent{Data: &events.MergeCandidate{
		Base: events.Base{PR: c.PR, HeadSHA: c.Head}, BaseBranch: base, State: state, Candidate: c.SHA, Tree: c.Tree,
		Branch: c.Branch, BaseSHA: baseSHA, Position: pos, Ahead: ahead, Detail: detail,
	}, Parts: []string{state, c.SHA}}
}

// removed is the transition of the speculative queue's PR e that leaves
// because its candidate c failed while the one before it passed
// (decideBatch's Remove): cand is what reported on c, own what reported
// on the PR's own head, why decideBatch's detail. A PR whose own head is
// green passes alone and fails on the base it would land on: it leaves
// without a human (candidate_failed), and its PRMergeFailed carries the
// candidate's failing checks, the candidate commit and the base tip, for
// the agent to bring the base in and fix. Otherwise (its own head failed
// too, or has not finished) a human is asked, checks_failed. It is pure.
func removed(e Entry, c Candidate, cand, own ChecksInput, baseSHA, why string, pol Policy) Transition {
	own.Required, own.Seen = cand.Required, e.SeenChecks
	mine := EvaluateChecks(own)
	if mine.State != ChecksGreen || len(mine.Reported) == 0 {
		return fail(e, events.ReasonChecksFailed, why+"; its own head is "+mine.Summary(), pol)
	}
	t := drop(e, events.ReasonCandidateFailed, why+"; its own head is green: it does not pass on the current base", pol)
	mf := t.Events[0].Data.(*events.MergeFailed)
	mf.Checks, mf.Candidate, mf.BaseBranch, mf.BaseSHA = failures(cand), c.SHA, e.Base, baseSHA
	mf.Epoch, mf.FixCycle = e.Epoch, e.FixCycle
	t.Why = "its candidate failed; the coding agent is to make it pass on the current base: " + why
	return t
}

// failures names the failed checks among what reported on a commit, as
// events do: the latest run of each check run name and the statuses,
// prloop's own excepted, in name order, at most events.MaxFailedChecks.
func failures(in ChecksInput) []events.FailedCheck {
	var out []events.FailedCheck
	if in.Combined != nil {
		for _, st := range in.Combined.Statuses {
			if st != nil && st.GetContext() != in.Own && (st.GetState() == "failure" || st.GetState() == "error") {
				out = append(out, github.FailedStatus(st))
			}
		}
	}
	for _, r := range latestRuns(in) {
		switch r.GetConclusion() {
		case "success", "neutral", "skipped", "":
		default:
			if r.GetStatus() == "completed" {
				out = append(out, github.FailedRun(r))
			}
		}
	}
	slices.SortFunc(out, func(a, b events.FailedCheck) int { return strings.Compare(a.Name+a.Kind, b.Name+b.Kind) })
	return out[:min(len(out), events.MaxFailedChecks)]
}
