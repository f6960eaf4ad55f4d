package ghsim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

type pullView struct {
	Number         int     `json:"number"`
	State          string  `json:"state"`
	Merged         bool    `json:"merged"`
	Mergeable      *bool   `json:"mergeable"`
	MergeableState string  `json:"mergeable_state"`
	MergeCommitSHA *string `json:"merge_commit_sha"`
	UpdatedAt      string  `json:"updated_at"`
	Head           struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo struct {
			CloneURL string `json:"clone_url"`
		} `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"base"`
}

func getPull(t *testing.T, e *env, n int) pullView {
	t.Helper()
	r := call(t, e.srv, "GET", fmt.Sprintf("/repos/octo/socket.io/pulls/%d", n), tokBot, nil)
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	var p pullView
	r.json(t, &p)
	return p
}

// TestPRLifecycle_CloneCommitPushSquashMerge works the way prloop's agents
// will: git against clone_url, the API for everything else.
func TestPRLifecycle_CloneCommitPushSquashMerge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	before := getPull(t, e, 1)
	bare := e.sim.GitDir(e.repo)
	oldMain := git(t, bare, "rev-parse", "main")
	require.Equal(t, oldMain, before.Base.SHA)

	work := filepath.Join(t.TempDir(), "work")
	git(t, ".", "clone", "--quiet", "--branch", before.Head.Ref, before.Head.Repo.CloneURL, work)
	require.NoError(t, os.WriteFile(filepath.Join(work, "fix.txt"), []byte("fixed\n"), 0o644))
	git(t, work, "add", "fix.txt")
	git(t, work, "commit", "--quiet", "-m", "Address review")
	pushed := git(t, work, "rev-parse", "HEAD")
	e.sim.Advance(5 * time.Minute)
	git(t, work, "push", "--quiet", "origin", "HEAD:feature")

	after := getPull(t, e, 1)
	assert.Equal(t, pushed, after.Head.SHA, "the sim notices a direct push on the next read")
	assert.Equal(t, ghsim.DefaultStart.Add(5*time.Minute).Format(time.RFC3339), after.UpdatedAt)
	assert.Equal(t, "clean", after.MergeableState)

	// The sha guard protects against merging something unreviewed.
	r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, map[string]string{"sha": before.Head.SHA, "merge_method": "squash"})
	require.Equal(t, 409, r.StatusCode)

	e.sim.Advance(time.Minute)
	r = call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, map[string]string{
		"sha": pushed, "merge_method": "squash", "commit_title": "Add feature (#1)"})
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	var m struct {
		SHA     string
		Merged  bool
		Message string
	}
	r.json(t, &m)
	require.True(t, m.Merged)

	newMain := git(t, bare, "rev-parse", "main")
	assert.Equal(t, m.SHA, newMain)
	assert.Equal(t, oldMain, git(t, bare, "rev-parse", "main^"), "a squash adds exactly one commit, on the old tip")
	assert.Equal(t, "1", git(t, bare, "rev-list", "--count", oldMain+"..main"))
	assert.Equal(t, "Add feature (#1)", git(t, bare, "log", "-1", "--format=%s", "main"))
	assert.Equal(t, "alice", git(t, bare, "log", "-1", "--format=%an", "main"), "the squash is authored by the PR author")
	assert.Equal(t, fmt.Sprint(ghsim.DefaultStart.Add(6*time.Minute).Unix()), git(t, bare, "log", "-1", "--format=%ct", "main"))
	assert.Equal(t, "feature.txt\nfix.txt", git(t, bare, "diff", "--name-only", "main^", "main"), "the PR's whole diff")
	assert.Equal(t, "fixed", git(t, bare, "show", "main:fix.txt"))

	merged := getPull(t, e, 1)
	assert.True(t, merged.Merged)
	assert.Equal(t, "closed", merged.State)
	require.NotNil(t, merged.MergeCommitSHA)
	assert.Equal(t, newMain, *merged.MergeCommitSHA)
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.Equal(t, newMain, info.MergeCommitSHA)
	assert.Equal(t, 204, call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1/merge", tokBot, nil).StatusCode)
}

func TestMerge_Methods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		method  string
		parents int // of the new main tip
		added   int // commits added to main
	}{
		{name: "default is a merge commit", method: "", parents: 2, added: 3},
		{name: "merge", method: "merge", parents: 2, added: 3},
		{name: "squash", method: "squash", parents: 1, added: 1},
		{name: "rebase", method: "rebase", parents: 1, added: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ghsim.Options{})
			_, err := e.sim.PushCommit(e.repo, "feature", "alice", map[string]string{"more.txt": "more\n"}, "More")
			require.NoError(t, err)
			// main moves too, so rebase and merge have real work to do.
			_, err = e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"README.md": "# socket.io!\n"}, "Docs")
			require.NoError(t, err)
			bare := e.sim.GitDir(e.repo)
			oldMain := git(t, bare, "rev-parse", "main")
			body := map[string]string{}
			if tt.method != "" {
				body["merge_method"] = tt.method
			}
			r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, body)
			require.Equal(t, 200, r.StatusCode, "%s", r.body)
			parents := strings.Fields(git(t, bare, "log", "-1", "--format=%P", "main"))
			assert.Len(t, parents, tt.parents)
			assert.Equal(t, fmt.Sprint(tt.added), git(t, bare, "rev-list", "--count", oldMain+"..main"))
			assert.Equal(t, "one\ntwo\nthree", git(t, bare, "show", "main:feature.txt"))
			assert.Equal(t, "more", git(t, bare, "show", "main:more.txt"))
			assert.Equal(t, "# socket.io!", git(t, bare, "show", "main:README.md"))
			if tt.method == "rebase" {
				assert.Equal(t, "More\nAdd feature", git(t, bare, "log", "-2", "--format=%s", "main"))
				assert.Equal(t, "alice", git(t, bare, "log", "-1", "--format=%an", "main"))
			}
			assert.True(t, getPull(t, e, 1).Merged)
		})
	}
}

func TestUpdateBranch_MergesBaseIntoHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	// "behind" needs a base that requires branches to be up to date.
	require.NoError(t, e.sim.SetRuleset(e.repo, "main", ghsim.RequiredChecks{Strict: true}))
	mainSHA, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"other.txt": "x\n"}, "Other work")
	require.NoError(t, err)
	before := getPull(t, e, 1)
	require.Equal(t, mainSHA, before.Base.SHA)
	require.Equal(t, "behind", before.MergeableState)

	r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/update-branch", tokBot, map[string]string{"expected_head_sha": mainSHA})
	require.Equal(t, 422, r.StatusCode, "expected_head_sha guards the update")

	e.sim.Advance(time.Minute)
	r = call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/update-branch", tokBot, map[string]string{"expected_head_sha": before.Head.SHA})
	require.Equal(t, 202, r.StatusCode, "%s", r.body)
	assert.Equal(t, "Updating pull request branch.", r.obj(t)["message"])

	after := getPull(t, e, 1)
	bare := e.sim.GitDir(e.repo)
	assert.NotEqual(t, before.Head.SHA, after.Head.SHA)
	assert.Equal(t, git(t, bare, "rev-parse", "feature"), after.Head.SHA)
	assert.Equal(t, before.Head.SHA+" "+mainSHA, git(t, bare, "log", "-1", "--format=%P", "feature"), "a real merge of base into head")
	assert.Equal(t, "x", git(t, bare, "show", "feature:other.txt"))
	assert.Equal(t, "clean", after.MergeableState)
	assert.Equal(t, ghsim.DefaultStart.Add(time.Minute).Format(time.RFC3339), after.UpdatedAt)
}

func TestConflict_DirtyNotMergeable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	_, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"feature.txt": "something else\n"}, "Conflicting")
	require.NoError(t, err)
	p := getPull(t, e, 1)
	require.NotNil(t, p.Mergeable)
	assert.False(t, *p.Mergeable)
	assert.Equal(t, "dirty", p.MergeableState)

	r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, nil)
	require.Equal(t, 405, r.StatusCode)
	assert.Equal(t, "Pull Request is not mergeable", r.obj(t)["message"])
	r = call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/update-branch", tokBot, nil)
	assert.Equal(t, 422, r.StatusCode)
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.False(t, info.Merged)
	assert.Equal(t, p.Head.SHA, info.HeadSHA, "a failed update leaves the branch alone")
}

func TestMergeableState_DraftAndUnstable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	require.NoError(t, e.sim.SetCheckRun(e.repo, "feature", "test", "completed", "failure"))
	assert.Equal(t, "unstable", getPull(t, e, 1).MergeableState)
	_, err := e.sim.PushCommit(e.repo, "draft", "alice", map[string]string{"d.txt": "d\n"}, "Draft")
	require.NoError(t, err)
	_, err = e.sim.OpenPR(e.repo, ghsim.PRInput{Title: "WIP", Head: "draft", Author: "alice", Draft: true})
	require.NoError(t, err)
	assert.Equal(t, "draft", getPull(t, e, 2).MergeableState)
	assert.Equal(t, 405, call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/2/merge", tokBot, nil).StatusCode)
}

func TestDeleteRef_ClosesOpenPR(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	r := call(t, e.srv, "DELETE", "/repos/octo/socket.io/git/refs/heads/main", tokBot, nil)
	assert.Equal(t, 422, r.StatusCode, "the default branch stays")
	r = call(t, e.srv, "DELETE", "/repos/octo/socket.io/git/refs/heads/feature", tokBot, nil)
	require.Equal(t, 204, r.StatusCode, "%s", r.body)
	out := git(t, e.sim.GitDir(e.repo), "branch", "--list", "feature")
	assert.Empty(t, out)
	assert.Equal(t, "closed", getPull(t, e, 1).State, "GitHub closes a PR whose head branch is deleted")
	r = call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"state": "open"})
	assert.Equal(t, 422, r.StatusCode, "it cannot be reopened without its branch")
}

func TestOpenPRs_BulkAndPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	// How fast is measured by BenchmarkOpenPRs, not asserted here: a
	// wall-clock limit fails a correct build on a busy machine.
	prs, err := e.sim.OpenPRs(e.repo, 2000, "alice")
	require.NoError(t, err)
	require.Len(t, prs, 2000)
	assert.Equal(t, 2, prs[0].Number)
	assert.Equal(t, 2001, prs[1999].Number)

	for _, kind := range []string{"pulls", "issues"} {
		t.Run(kind, func(t *testing.T) {
			seen := map[int]bool{}
			next := "/repos/octo/socket.io/" + kind + "?per_page=100"
			pages := 0
			for next != "" {
				r := call(t, e.srv, "GET", next, tokBot, nil)
				require.Equal(t, 200, r.StatusCode)
				pages++
				for _, it := range r.list(t) {
					n := int(it["number"].(float64))
					require.False(t, seen[n], "PR %d listed twice", n)
					seen[n] = true
				}
				next = strings.TrimPrefix(links(t, r)["next"], e.srv.URL)
				require.LessOrEqual(t, pages, 21)
			}
			assert.Equal(t, 21, pages)
			assert.Len(t, seen, 2001)
		})
	}
	// A bulk PR is a real branch one commit ahead of main.
	info, err := e.sim.PRInfo(prs[10])
	require.NoError(t, err)
	bare := e.sim.GitDir(e.repo)
	assert.Equal(t, git(t, bare, "rev-parse", info.HeadRef), info.HeadSHA)
	assert.Equal(t, git(t, bare, "rev-parse", "main"), git(t, bare, "rev-parse", info.HeadSHA+"^"))
	p := getPull(t, e, prs[10].Number)
	assert.Equal(t, "clean", p.MergeableState)
}

// TestBranchesAndTree: what a simulated CI reads of a repository, every
// branch's commit (update-branch's new head included) and a commit's tree
// and files, agrees with git.
func TestBranchesAndTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	bare := e.sim.GitDir(e.repo)
	_, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"docs/other.txt": "x\n"}, "Other work")
	require.NoError(t, err)
	r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/update-branch", tokBot, map[string]string{"expected_head_sha": getPull(t, e, 1).Head.SHA})
	require.Equal(t, 202, r.StatusCode, "%s", r.body)

	branches, err := e.sim.Branches(e.repo)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"main": git(t, bare, "rev-parse", "main"), "feature": git(t, bare, "rev-parse", "feature"),
	}, branches)

	git(t, bare, "pack-refs", "--all")
	packed, err := e.sim.Branches(e.repo)
	require.NoError(t, err)
	assert.Equal(t, branches, packed, "packed refs are branches too")

	tree, files, err := e.sim.Tree(e.repo, "feature")
	require.NoError(t, err)
	assert.Equal(t, git(t, bare, "rev-parse", "feature^{tree}"), tree)
	assert.Equal(t, []string{"README.md", "docs/other.txt", "feature.txt", "main.go"}, files)

	_, _, err = e.sim.Tree(e.repo, "no-such-branch")
	require.Error(t, err)
	_, err = e.sim.Branches(ghref.Repo{Owner: "octo", Name: "missing"})
	require.Error(t, err)
}

// TestBranchMoves_RecordsWhatMovedABranchAndWhen: the simulator's record
// of the moves it made (a push, an update-branch, a merge), each with the
// clock right before it, and of every status with when it was set: what
// the chaos suite compares to say main only moved to a tree CI passed.
func TestBranchMoves_RecordsWhatMovedABranchAndWhen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	start := e.sim.Now()
	tip0 := git(t, e.sim.GitDir(e.repo), "rev-parse", "main")
	head0 := getPull(t, e, 1).Head.SHA
	e.sim.Advance(time.Minute)
	tip1, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"other.txt": "o\n"}, "Other")
	require.NoError(t, err)
	e.sim.Advance(time.Minute)
	require.Equal(t, 202, call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/update-branch", tokBot, nil).StatusCode)
	head1 := getPull(t, e, 1).Head.SHA
	e.sim.Advance(time.Minute)
	require.NoError(t, e.sim.SetStatus(e.repo, head1, "ci", "success"))
	e.sim.Advance(time.Minute)
	r := call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, map[string]string{"sha": head1, "merge_method": "squash"})
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	var m struct{ SHA string }
	r.json(t, &m)

	moves, err := e.sim.BranchMoves(e.repo, "main")
	require.NoError(t, err)
	assert.Equal(t, []ghsim.BranchMove{
		{Branch: "main", From: tip0, To: tip1, At: start.Add(time.Minute), Via: "push by octo"},
		{Branch: "main", From: tip1, To: m.SHA, At: start.Add(4 * time.Minute), Via: "merge of #1"},
	}, moves)
	moves, err = e.sim.BranchMoves(e.repo, "feature")
	require.NoError(t, err)
	require.Len(t, moves, 2, "the push that made it, its update")
	assert.Equal(t, ghsim.BranchMove{Branch: "feature", From: head0, To: head1, At: start.Add(2 * time.Minute), Via: "update-branch of #1"}, moves[1])

	sts, err := e.sim.Statuses(e.repo, "ci")
	require.NoError(t, err)
	assert.Equal(t, []ghsim.StatusRecord{{SHA: head1, Context: "ci", State: "success", Created: start.Add(3 * time.Minute)}}, sts)
}
