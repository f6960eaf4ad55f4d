package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// ciContext is the commit status context the workload's CI reports
// (runCI).
const ciContext = "ci"

// raceWindow bounds how long before a merge a human's push to main may
// have landed for the merge to count as having raced it. GitHub's merge
// call has no guard on the base tip (only on the head), so a push to the
// base between prloop's last read of the tip and the merge call makes
// GitHub merge onto a tip prloop never saw: no tool that merges through
// the API can prevent that on a base that accepts direct pushes, and
// prloop's promise there is to notice (the tree check after the merge)
// and call a human (untested_merge). The window is the read-to-call time
// under the chaos GitHub's faults (a retried read backs off about a
// second) with room to spare; anything older is prloop's own mistake.
const raceWindow = 5 * time.Second

// checkTested checks that main only ever moved to a tree CI passed: every
// commit of each repository's main, along its first-parent history, that
// a merge put there has the tree of a commit on which the simulated CI
// had reported success (its latest ci status then) before main moved. A
// human's push to main (the conflict scenario) is nobody's merge and is
// only counted; a commit the simulator did not move main to (a push over
// git) is a violation, since nothing but a merge should move it. So is
// a merge onto an untested tree, except one that raced a human's push to
// main (raceWindow) and for which prloop called a human (untested_merge):
// that is counted and listed, as the documented limit of GitHub's merge
// call.
func (w *world) checkTested() {
	merges, pushes, untested, raced := 0, 0, 0, 0
	for i := range w.o.repos {
		repo := ghref.Repo{Owner: owner, Name: fmt.Sprintf("r%d", i)}
		j, err := w.testedMoves(repo)
		if err != nil {
			w.rep.violate("main only moves to a tree CI passed", repo.String(), err.Error())
			continue
		}
		for _, b := range j.bad {
			w.rep.violate("main only moves to a tree CI passed", repo.String(), b)
		}
		for _, r := range j.raced {
			w.rep.note("%s: %s", repo, r)
		}
		merges, pushes = merges+j.merges, pushes+j.pushes
		untested, raced = untested+len(j.bad)+len(j.raced), raced+len(j.raced)
	}
	w.rep.note("main moved %d times by a merge (%d of them not to a tree CI passed before, %d of those racing a human's push to main and escalated untested_merge) and %d times by a human's push", merges, untested, raced, pushes)
}

// untestedMergeEscalations returns the numbers of repo's PRs for which
// an untested_merge escalation was requested.
func (w *world) untestedMergeEscalations(repo ghref.Repo) map[int]bool {
	out := map[int]bool{}
	for _, e := range w.rec.events() {
		if d, ok := e.data.(*events.EscalationRequested); ok && d.Reason == events.ReasonUntestedMerge && d.PR.Owner == repo.Owner && d.PR.Repo == repo.Name {
			out[d.PR.Number] = true
		}
	}
	return out
}

// testedMoves reads repo's main, the simulator's record of its moves and
// of the CI's statuses, and the escalations, and judges them
// (untestedMoves).
func (w *world) testedMoves(repo ghref.Repo) (judgement, error) {
	moves, err := w.sim.BranchMoves(repo, "main")
	if err != nil {
		return judgement{}, err
	}
	statuses, err := w.sim.Statuses(repo, ciContext)
	if err != nil {
		return judgement{}, err
	}
	g := func(args ...string) (string, error) {
		return w.gitIn(repo, args...)
	}
	out, err := g("log", "--first-parent", "--reverse", "--format=%H %T %P", "main")
	if err != nil {
		return judgement{}, err
	}
	var chain []treeCommit
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue // the root commit, which the repository was made with
		}
		chain = append(chain, treeCommit{sha: f[0], tree: f[1]})
	}
	trees := map[string]string{}
	if len(statuses) > 0 {
		var args []string
		var shas []string
		for _, s := range statuses {
			if _, ok := trees[s.SHA]; !ok {
				trees[s.SHA] = ""
				shas = append(shas, s.SHA)
				args = append(args, s.SHA+"^{tree}")
			}
		}
		out, err := g(append([]string{"rev-parse"}, args...)...)
		if err != nil {
			return judgement{}, err
		}
		for i, t := range strings.Fields(out) {
			trees[shas[i]] = t
		}
	}
	return untestedMoves(chain, moves, statuses, trees, w.untestedMergeEscalations(repo)), nil
}

// judgement is what untestedMoves found in one repository's history.
type judgement struct {
	// bad are the violations, a line each; raced the merges onto an
	// untested tree that raced a human's push and were escalated.
	bad, raced     []string
	merges, pushes int
}

// treeCommit is a commit and its tree.
type treeCommit struct{ sha, tree string }

// untestedMoves judges main's first-parent history (chain, oldest first,
// the root left out) against the moves that put each commit there and
// the CI's statuses (oldest first; trees maps their commits to their
// trees; escalated the PRs prloop escalated untested_merge). It returns
// a line per commit a merge put on main whose tree no commit had passed
// CI with before the move, or that no recorded move put there; apart, the
// merges onto an untested tree that raced a human's push (main moved
// there by a push at most raceWindow before) and were escalated; and how
// many merges and human pushes moved main. It is pure.
func untestedMoves(chain []treeCommit, moves []ghsim.BranchMove, statuses []ghsim.StatusRecord, trees map[string]string, escalated map[int]bool) (j judgement) {
	by := map[string]ghsim.BranchMove{}
	for _, m := range moves {
		by[m.To] = m
	}
	var prev *ghsim.BranchMove // the move that put main's previous commit there
	for _, c := range chain {
		m, ok := by[c.sha]
		before := prev
		if ok {
			prev = &m
		} else {
			prev = nil
		}
		switch {
		case !ok:
			j.bad = append(j.bad, fmt.Sprintf("main moved to %.7s, and no merge or recorded push put it there", c.sha))
			continue
		case strings.HasPrefix(m.Via, "push by "):
			j.pushes++
			continue
		}
		j.merges++
		if passedBefore(c.tree, m.At, statuses, trees) {
			continue
		}
		var on []string
		for _, s := range statuses {
			if trees[s.SHA] == c.tree {
				on = append(on, fmt.Sprintf("%s on %.7s at %s", s.State, s.SHA, s.Created.Format(time.StampMilli)))
			}
		}
		if len(on) == 0 {
			on = []string{"none on a commit with that tree"}
		}
		line := fmt.Sprintf("%s moved main to %.7s at %s, whose tree %.7s CI had not passed (ci statuses: %s)",
			m.Via, c.sha, m.At.Format(time.StampMilli), c.tree, strings.Join(on, "; "))
		if before != nil && strings.HasPrefix(before.Via, "push by ") && m.At.Sub(before.At) <= raceWindow && escalated[mergedPR(m.Via)] {
			j.raced = append(j.raced, fmt.Sprintf("%s, %s after %s moved main: raced the push, escalated untested_merge",
				line, m.At.Sub(before.At).Round(time.Millisecond), before.Via))
			continue
		}
		j.bad = append(j.bad, line)
	}
	return j
}

// mergedPR is N of a move's "merge of #N", or 0.
func mergedPR(via string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(via, "merge of #"))
	if err != nil || !strings.HasPrefix(via, "merge of #") {
		return 0
	}
	return n
}

// passedBefore reports whether some commit with tree had, as its latest
// CI status set before t, a success.
func passedBefore(tree string, t time.Time, statuses []ghsim.StatusRecord, trees map[string]string) bool {
	latest := map[string]string{} // commit -> its latest state before t
	for _, s := range statuses {
		if trees[s.SHA] == tree && !s.Created.After(t) {
			latest[s.SHA] = s.State
		}
	}
	for _, state := range latest {
		if state == "success" {
			return true
		}
	}
	return false
}
