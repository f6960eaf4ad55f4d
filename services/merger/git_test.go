package merger

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// recordingGit is a gitRunner for table tests: it records every call as
// "run <args>", "env <env> <args>" or "remote <url> <args>", and answers
// from a table keyed by the args (unknown commands answer "" and succeed).
type recordingGit struct {
	calls   []string
	answers map[string]gitAnswer
}

// gitAnswer is what the fake answers: stdout, or git's exit status 1 (a
// conflict, "not an ancestor") when no is set.
type gitAnswer struct {
	out string
	no  bool
}

var _ gitRunner = (*recordingGit)(nil)

// exit1 is a real exit status 1, as gitx.ExitCode reads it.
func exit1() error {
	err := exec.Command("sh", "-c", "exit 1").Run()
	if err == nil {
		panic("sh -c 'exit 1' succeeded")
	}
	return err
}

func (g *recordingGit) answer(args []string) (string, error) {
	a := g.answers[strings.Join(args, " ")]
	if a.no {
		return "", exit1()
	}
	return a.out, nil
}

func (g *recordingGit) run(_ context.Context, args ...string) (string, error) {
	g.calls = append(g.calls, "run "+strings.Join(args, " "))
	return g.answer(args)
}

func (g *recordingGit) runEnv(_ context.Context, env []string, args ...string) (string, error) {
	g.calls = append(g.calls, "env "+strings.Join(env, ",")+" "+strings.Join(args, " "))
	return g.answer(args)
}

func (g *recordingGit) remote(_ context.Context, remote string, args ...string) (string, error) {
	g.calls = append(g.calls, "remote "+remote+" "+strings.Join(args, " "))
	return g.answer(args)
}

func (g *recordingGit) ok(ctx context.Context, args ...string) (bool, error) {
	g.calls = append(g.calls, "ok "+strings.Join(args, " "))
	if g.answers[strings.Join(args, " ")].no {
		return false, nil
	}
	return true, nil
}

// TestIsMergeOf_OnlyTheMergePrloopWouldMake: a head GitHub's
// update-branch made carries the approval only when it is exactly the
// merge of a base commit into the approved head that prloop computes
// itself; git's answers for each way it can differ.
func TestIsMergeOf_OnlyTheMergePrloopWouldMake(t *testing.T) {
	t.Parallel()
	const (
		head, from, baseC = "h", "f", "b"
		tree, other       = "tree-1", "tree-2"
	)
	good := func() map[string]gitAnswer {
		return map[string]gitAnswer{
			"rev-parse refs/prloop/head":                    {out: head},
			"rev-list --parents -n 1 " + head:               {out: head + " " + from + " " + baseC},
			"merge-tree --write-tree " + from + " " + baseC: {out: tree + "\n"},
			"rev-parse " + head + "^{tree}":                 {out: tree},
		}
	}
	tests := []struct {
		name string
		edit func(map[string]gitAnswer)
		want bool
	}{
		{name: "the merge prloop computes", want: true},
		{name: "the branch moved on again", edit: func(a map[string]gitAnswer) { a["rev-parse refs/prloop/head"] = gitAnswer{out: "x"} }},
		{name: "not a merge", edit: func(a map[string]gitAnswer) { a["rev-list --parents -n 1 "+head] = gitAnswer{out: head + " " + from} }},
		{name: "first parent is not the approved head", edit: func(a map[string]gitAnswer) {
			a["rev-list --parents -n 1 "+head] = gitAnswer{out: head + " x " + baseC}
		}},
		{name: "second parent is not on the base", edit: func(a map[string]gitAnswer) {
			a["merge-base --is-ancestor "+baseC+" refs/prloop/base"] = gitAnswer{no: true}
		}},
		{name: "the two parents conflict", edit: func(a map[string]gitAnswer) {
			a["merge-tree --write-tree "+from+" "+baseC] = gitAnswer{no: true}
		}},
		{name: "another tree than the merge's", edit: func(a map[string]gitAnswer) { a["rev-parse "+head+"^{tree}"] = gitAnswer{out: other} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := good()
			if tt.edit != nil {
				tt.edit(a)
			}
			got, err := isMergeOf(t.Context(), &recordingGit{answers: a}, head, from)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestSpeculation_CandidatesThroughOneGit: a candidate is one
// commit-tree with fixed dates (the same commit on any replica), with the
// PR's head as a second parent only for merge commits, and new candidates
// go out in one push to the base repository.
func TestSpeculation_CandidatesThroughOneGit(t *testing.T) {
	t.Parallel()
	dates := "GIT_AUTHOR_DATE=" + candidateDate + ",GIT_COMMITTER_DATE=" + candidateDate
	pr := func(n int) ghref.PR { return ghref.PR{Owner: "o", Repo: "r", Number: n} }
	c := Candidate{PR: pr(2), Head: "head2", Tree: "tree2", Branch: candidateBranch("main", 2)}
	ahead := []Candidate{{PR: pr(1), Head: "head1"}}
	msg := "prloop merge queue candidate for o/r\n\n#1 at head1\n#2 at head2\n"
	tests := []struct {
		name   string
		method string
		want   string
	}{
		{name: "squash: one parent", method: github.MergeMethodSquash, want: "env " + dates + " commit-tree tree2 -p prev -m " + msg},
		{name: "merge: the head as second parent", method: github.MergeMethodMerge, want: "env " + dates + " commit-tree tree2 -p prev -p head2 -m " + msg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := &recordingGit{answers: map[string]gitAnswer{}}
			sp := &speculation{s: &Service{cfg: Config{MergeMethod: tt.method}}, qid: "o.r.main", g: g}
			_, err := sp.commit(t.Context(), c, "prev", ahead)
			require.NoError(t, err)
			assert.Equal(t, []string{tt.want}, g.calls)
		})
	}
	t.Run("one push for the new candidates", func(t *testing.T) {
		t.Parallel()
		g := &recordingGit{}
		sp := &speculation{s: &Service{}, qid: "o.r.main", g: g}
		url := "https://github.example/o/r.git"
		p := &gh.PullRequest{Base: &gh.PullRequestBranch{Repo: &gh.Repository{CloneURL: gh.String(url)}}}
		fresh := []Candidate{{SHA: "c1", Branch: candidateBranch("main", 1)}, {SHA: "c2", Branch: candidateBranch("main", 2)}}
		require.NoError(t, sp.push(t.Context(), p, fresh))
		assert.Equal(t, []string{fmt.Sprintf("remote %s push -q --no-verify %s +c1:refs/heads/prloop/queue/main/1 +c2:refs/heads/prloop/queue/main/2", url, url)}, g.calls)
		require.NoError(t, sp.push(t.Context(), p, nil))
		assert.Len(t, g.calls, 1, "nothing new, nothing pushed")
	})
}
