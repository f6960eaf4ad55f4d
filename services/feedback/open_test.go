package feedback

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// TestPlanOpen covers every branch of planOpen: what prloop does about a
// request to open a PR, from what the mirror and GitHub say.
func TestPlanOpen(t *testing.T) {
	t.Parallel()
	base, work, old, other := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 40)
	req := OpenRequest{Repo: ghref.Repo{Owner: "acme", Name: "widgets"}, Worktree: "/w", Branch: "feature/x"}
	mine, theirs := &openClaim{Worktree: "/w"}, &openClaim{Worktree: "/elsewhere", PR: 9}
	for _, tc := range []struct {
		name string
		req  OpenRequest
		base string
		f    openFacts
		want openPlan
	}{
		{name: "new branch: push and open", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2},
			want: openPlan{kind: openCreate, push: true}},
		{name: "new branch, an old claim from another worktree: push and open", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Claim: theirs},
			want: openPlan{kind: openCreate, push: true}},
		{name: "branch pushed by prloop before a crash, no PR: open without pushing", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: work, RemoteBehind: true, Claim: mine},
			want: openPlan{kind: openCreate}},
		{name: "prloop's branch behind the worktree's: fast-forward, then open", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 3, Remote: old, RemoteBehind: true, Claim: mine},
			want: openPlan{kind: openCreate, push: true}},
		{name: "asked again: the open PR is announced, nothing pushed", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: work, RemoteBehind: true, Existing: &openPR{Number: 4, Head: work, Base: "main"}, Claim: &openClaim{Worktree: "/w", PR: 4}},
			want: openPlan{kind: openAnnounce}},
		{name: "asked again with new commits: pushed to the open PR", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 3, Remote: old, RemoteBehind: true, Existing: &openPR{Number: 4, Head: old, Base: "main"}, Claim: &openClaim{Worktree: "/w", PR: 4}},
			want: openPlan{kind: openAnnounce, push: true}},
		{name: "the branch is the base", req: OpenRequest{Branch: "main"}, base: "main",
			f:    openFacts{Base: base, Result: base},
			want: openPlan{kind: openRefuse, why: `branch "main" is the base branch`}},
		{name: "a protected branch, even prloop's own", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Claim: mine, Protected: "rules: update"},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" is protected on GitHub (rules: update); prloop opens pull requests from branches of their own`}},
		{name: "another PR's branch, checked out in the worktree", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: old, RemoteBehind: true, Existing: &openPR{Number: 3, Head: old, Base: "main"}},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" belongs to pull request #3, which prloop did not open from /w; check out a new branch for this work`}},
		{name: "another PR's branch, opened by prloop from another worktree", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: old, RemoteBehind: true, Existing: &openPR{Number: 9, Head: old, Base: "main"}, Claim: theirs},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" belongs to pull request #9, which prloop did not open from /w; check out a new branch for this work`}},
		{name: "a branch prloop pushed from another worktree, its PR closed", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: old, RemoteBehind: true, Claim: theirs},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" is the branch prloop opened a pull request from in another worktree, /elsewhere; check out a new branch for this work`}},
		{name: "a branch somebody pushed, no PR (release/2.4, say)", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: work, RemoteBehind: true},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" exists on GitHub and prloop did not create it; prloop pushes only to a new branch or to one it opened a pull request from in this worktree (for a pull request you opened yourself, use prloop watch)`}},
		{name: "prloop's branch, now the head of a PR into another base", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: work, RemoteBehind: true, Existing: &openPR{Number: 5, Head: work, Base: "develop"}, Claim: mine},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" belongs to pull request #5 into develop, not into main`}},
		{name: "prloop's branch, now the head of a PR someone else opened", req: req, base: "main",
			f:    openFacts{Base: base, Result: work, NewCommits: 2, Remote: work, RemoteBehind: true, Existing: &openPR{Number: 6, Head: work, Base: "main"}, Claim: &openClaim{Worktree: "/w", PR: 4}},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" belongs to pull request #6, not to #4 that prloop opened from it`}},
		{name: "nothing to merge", req: req, base: "main",
			f:    openFacts{Base: base, Result: base},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" has no commits that main lacks`}},
		{name: "diverged from GitHub's branch: no force-push", req: req, base: "develop",
			f:    openFacts{Base: base, Result: work, NewCommits: 1, Remote: other, Claim: mine},
			want: openPlan{kind: openRefuse, why: `branch "feature/x" on GitHub is at ddddddd, which the worktree's bbbbbbb does not descend from; prloop does not force-push`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, planOpen(tc.req, tc.base, tc.f))
		})
	}
}

// TestOpenTitle: the request's title and body, else the last commit's
// subject and body, cleaned and bounded; the branch as a last resort.
func TestOpenTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", events.MaxBody+100)
	for _, tc := range []struct {
		name                string
		req                 OpenRequest
		subject, body       string
		wantTitle, wantBody string
	}{
		{name: "the request's", req: OpenRequest{Title: "Add x", Body: "Because."}, subject: "wip", body: "noise",
			wantTitle: "Add x", wantBody: "Because."},
		{name: "a title without a body keeps no body", req: OpenRequest{Title: "Add x"}, subject: "wip", body: "noise",
			wantTitle: "Add x"},
		{name: "the last commit's", req: OpenRequest{Branch: "b"}, subject: "Add the parser", body: "It parses.\r\n\r\nFixes #3.\n",
			wantTitle: "Add the parser", wantBody: "It parses.\n\nFixes #3."},
		{name: "the request's body beside the commit's subject", req: OpenRequest{Body: "Mine."}, subject: "Add y", body: "theirs",
			wantTitle: "Add y", wantBody: "Mine."},
		{name: "hostile characters cleaned", req: OpenRequest{Branch: "b"}, subject: "Add\u202e txt.exe\x1b[31m", body: "a\u200bb\x00c",
			wantTitle: "Add txt.exe [31m", wantBody: "abc"},
		{name: "the branch when nothing else is left", req: OpenRequest{Branch: "feature/x"}, subject: "\u200b",
			wantTitle: "feature/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			title, body := openTitle(tc.req, tc.subject, tc.body)
			assert.Equal(t, tc.wantTitle, title)
			assert.Equal(t, tc.wantBody, body)
		})
	}
	_, body := openTitle(OpenRequest{Branch: "b"}, "s", long)
	assert.LessOrEqual(t, len(body), events.MaxBody)
	assert.True(t, strings.HasSuffix(body, "[… truncated]"))
	title, _ := openTitle(OpenRequest{Branch: "b"}, strings.Repeat("t", 1000), "")
	assert.Len(t, []rune(title), events.MaxTitle)
}

// TestOpenRequest_Check refuses what no retry can make possible.
func TestOpenRequest_Check(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := OpenRequest{Worktree: dir, Branch: "feature/x", Labels: []string{"agent"}}
	require.NoError(t, ok.check())
	for name, mut := range map[string]func(*OpenRequest){
		"relative worktree":  func(r *OpenRequest) { r.Worktree = "wt" },
		"missing worktree":   func(r *OpenRequest) { r.Worktree = dir + "/nope" },
		"no branch":          func(r *OpenRequest) { r.Branch = "" },
		"branch like a flag": func(r *OpenRequest) { r.Branch = "--upload-pack=x" },
		"base like a flag":   func(r *OpenRequest) { r.Base = "-x" },
		"empty label":        func(r *OpenRequest) { r.Labels = []string{""} },
		"label with newline": func(r *OpenRequest) { r.Labels = []string{"a\nb"} },
		"label too long":     func(r *OpenRequest) { r.Labels = []string{strings.Repeat("l", maxLabel+1)} },
		"too many labels":    func(r *OpenRequest) { r.Labels = make([]string, maxLabels+1) },
	} {
		r := ok
		mut(&r)
		assert.ErrorIs(t, r.check(), ErrOpenRefused, name)
	}
}

// TestProtectedBy: the rules that make a branch no branch to open a pull
// request from, and those that do not.
func TestProtectedBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rules []string
		want  string
	}{
		{name: "no rules"},
		{name: "no force-push, no deletion: any branch", rules: []string{"non_fast_forward", "deletion"}},
		{name: "required checks and reviews", rules: []string{"required_status_checks", "pull_request", "required_status_checks"}, want: "rules: required_status_checks, pull_request"},
		{name: "restricted updates", rules: []string{"deletion", "update"}, want: "rules: update"},
		{name: "restricted creation", rules: []string{"creation"}, want: "rules: creation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rules []github.BranchRule
			for _, r := range tc.rules {
				rules = append(rules, github.BranchRule{Type: r})
			}
			assert.Equal(t, tc.want, protectedBy(rules))
		})
	}
}
