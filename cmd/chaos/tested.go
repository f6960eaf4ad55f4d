package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// ciContext is the commit status context the workload's CI reports
// (runCI).
const ciContext = "ci"

// checkTested checks that main only ever moved to a tree CI passed: every
// commit of each repository's main, along its first-parent history, that
// a merge put there has the tree of a commit on which the simulated CI
// had reported success (its latest ci status then) before main moved. A
// human's push to main (the conflict scenario) is nobody's merge and is
// only counted; a commit the simulator did not move main to (a push over
// git) is a violation, since nothing but a merge should move it.
func (w *world) checkTested() {
	merges, pushes, untested := 0, 0, 0
	for i := range w.o.repos {
		repo := ghref.Repo{Owner: owner, Name: fmt.Sprintf("r%d", i)}
		bad, m, p, err := w.testedMoves(repo)
		if err != nil {
			w.rep.violate("main only moves to a tree CI passed", repo.String(), err.Error())
			continue
		}
		for _, b := range bad {
			w.rep.violate("main only moves to a tree CI passed", repo.String(), b)
		}
		merges, pushes, untested = merges+m, pushes+p, untested+len(bad)
	}
	w.rep.note("main moved %d times by a merge (%d of them not to a tree CI passed before) and %d times by a human's push", merges, untested, pushes)
}

// testedMoves reads repo's main, the simulator's record of its moves and
// of the CI's statuses, and judges them (untestedMoves).
func (w *world) testedMoves(repo ghref.Repo) (bad []string, merges, pushes int, err error) {
	moves, err := w.sim.BranchMoves(repo, "main")
	if err != nil {
		return nil, 0, 0, err
	}
	statuses, err := w.sim.Statuses(repo, ciContext)
	if err != nil {
		return nil, 0, 0, err
	}
	g := func(args ...string) (string, error) {
		return w.gitIn(repo, args...)
	}
	out, err := g("log", "--first-parent", "--reverse", "--format=%H %T %P", "main")
	if err != nil {
		return nil, 0, 0, err
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
			return nil, 0, 0, err
		}
		for i, t := range strings.Fields(out) {
			trees[shas[i]] = t
		}
	}
	bad, merges, pushes = untestedMoves(chain, moves, statuses, trees)
	return bad, merges, pushes, nil
}

// treeCommit is a commit and its tree.
type treeCommit struct{ sha, tree string }

// untestedMoves judges main's first-parent history (chain, oldest first,
// the root left out) against the moves that put each commit there and
// the CI's statuses (oldest first; trees maps their commits to their
// trees). It returns a line per commit a merge put on main whose tree no
// commit had passed CI with before the move, or that no recorded move put
// there; and how many merges and human pushes moved main. It is pure.
func untestedMoves(chain []treeCommit, moves []ghsim.BranchMove, statuses []ghsim.StatusRecord, trees map[string]string) (bad []string, merges, pushes int) {
	by := map[string]ghsim.BranchMove{}
	for _, m := range moves {
		by[m.To] = m
	}
	for _, c := range chain {
		m, ok := by[c.sha]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("main moved to %.7s, and no merge or recorded push put it there", c.sha))
			continue
		case strings.HasPrefix(m.Via, "push by "):
			pushes++
			continue
		}
		merges++
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
		bad = append(bad, fmt.Sprintf("%s moved main to %.7s at %s, whose tree %.7s CI had not passed (ci statuses: %s)",
			m.Via, c.sha, m.At.Format(time.StampMilli), c.tree, strings.Join(on, "; ")))
	}
	return bad, merges, pushes
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
