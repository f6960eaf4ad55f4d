package ghsim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// listSubject is one PR of TestContract_ListsHoldOnlyTheirOwnItems, named
// by key; every item seeded on it carries the key.
type listSubject struct {
	key  string
	repo ghref.Repo
	pr   ghref.PR
	sha  string
	file string // a file of the head commit, for inline comments
	// reaction and reviewer differ per subject: their content and login
	// are what the lists show.
	reaction, reviewer string
}

// newListSubjects builds a (socket.io #1), b (socket.io #2) and c (a
// second repository's #1), each with its own head commit.
func newListSubjects(t *testing.T) (*env, []listSubject) {
	t.Helper()
	e := newEnv(t, ghsim.Options{})
	s := e.sim
	_, err := s.PushCommit(e.repo, "second", "alice", map[string]string{"second.txt": "2\n"}, "Second")
	require.NoError(t, err)
	b, err := s.OpenPR(e.repo, ghsim.PRInput{Title: "Second", Head: "second", Author: "alice"})
	require.NoError(t, err)
	other, err := s.CreateRepo("octo", "other", map[string]string{"README.md": "# other\n"})
	require.NoError(t, err)
	require.NoError(t, s.SetPermission(other, "alice", "write"))
	// Reviews may be requested only from collaborators.
	require.NoError(t, s.SetPermission(other, "prloop[bot]", "write"))
	_, err = s.PushCommit(other, "third", "alice", map[string]string{"third.txt": "3\n"}, "Third")
	require.NoError(t, err)
	c, err := s.OpenPR(other, ghsim.PRInput{Title: "Third", Head: "third", Author: "alice"})
	require.NoError(t, err)
	subs := []listSubject{
		{key: "a", repo: e.repo, pr: e.pr, file: "feature.txt", reaction: "heart", reviewer: "octo"},
		{key: "b", repo: e.repo, pr: b, file: "second.txt", reaction: "rocket", reviewer: "reader"},
		{key: "c", repo: other, pr: c, file: "third.txt", reaction: "eyes", reviewer: "prloop[bot]"},
	}
	for i := range subs {
		info, err := s.PRInfo(subs[i].pr)
		require.NoError(t, err)
		subs[i].sha = info.HeadSHA
	}
	return e, subs
}

// seed puts one item of every kind on sub, through the admin API or the
// REST API where the sim has no admin call.
func (sub listSubject) seed(t *testing.T, e *env) {
	t.Helper()
	s, k := e.sim, sub.key
	_, err := s.AddIssueComment(sub.pr, "octo", "comment "+k)
	require.NoError(t, err)
	_, err = s.AddReaction(sub.pr, "octo", sub.reaction)
	require.NoError(t, err)
	_, err = s.AddReview(sub.pr, ghsim.ReviewInput{Login: "octo", State: "COMMENTED", Body: "review " + k,
		Comments: []ghsim.ReviewCommentInput{{Path: sub.file, Line: 1, Body: "inline " + k}}})
	require.NoError(t, err)
	require.NoError(t, s.SetStatus(sub.repo, sub.sha, "ci/"+k, "success"))
	require.NoError(t, s.SetCheckRun(sub.repo, sub.sha, "check "+k, "completed", "success"))
	rp := "/repos/" + sub.repo.String()
	n := fmt.Sprint(sub.pr.Number)
	r := call(t, e.srv, "POST", rp+"/issues/"+n+"/labels", tokOwner, map[string]any{"labels": []string{"label-" + k}})
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	r = call(t, e.srv, "POST", rp+"/pulls/"+n+"/requested_reviewers", tokOwner, map[string]any{"reviewers": []string{sub.reviewer}})
	require.Equal(t, 201, r.StatusCode, "%s", r.body)
}

// fields returns field of each object, as strings.
func fields(l []any, field string) []string {
	var out []string
	for _, x := range l {
		out = append(out, fmt.Sprint(x.(map[string]any)[field]))
	}
	return out
}

// times repeats item n times: a count in a body stands for that many items.
func times(item string, n any) []string {
	var out []string
	for range int(n.(float64)) {
		out = append(out, item)
	}
	return out
}

// TestContract_ListsHoldOnlyTheirOwnItems checks that every list the sim
// serves, and every list or count inside an object, holds the items of the
// PR, issue, commit or repository asked for and no others: an empty list
// must not fall back to another scope's items.
func TestContract_ListsHoldOnlyTheirOwnItems(t *testing.T) {
	t.Parallel()
	type list struct {
		name, path, tmpl string // path: {n} is the number, {sha} the head sha
		// repoWide lists hold the items of every PR of the repository.
		repoWide bool
		// item is the marker of the item seeded on a subject.
		item func(s listSubject) string
		// got returns the markers the response holds for subject s.
		got func(t *testing.T, r resp, s listSubject) []string
	}
	const (
		issueT  = "/repos/{owner}/{repo}/issues/{issue_number}"
		pullT   = "/repos/{owner}/{repo}/pulls/{pull_number}"
		commitT = "/repos/{owner}/{repo}/commits/{ref}"
	)
	listOf := func(field string) func(*testing.T, resp, listSubject) []string {
		return func(t *testing.T, r resp, _ listSubject) []string {
			var l []any
			r.json(t, &l)
			return fields(l, field)
		}
	}
	// own finds the subject's entry in a list of issues or pulls.
	own := func(t *testing.T, r resp, s listSubject) map[string]any {
		var l []map[string]any
		r.json(t, &l)
		i := slices.IndexFunc(l, func(m map[string]any) bool { return m["number"] == float64(s.pr.Number) })
		require.GreaterOrEqual(t, i, 0, "%s in the list", s.pr)
		return l[i]
	}
	comment := func(s listSubject) string { return "comment " + s.key }
	inline := func(s listSubject) string { return "inline " + s.key }
	label := func(s listSubject) string { return "label-" + s.key }
	lists := []list{
		{name: "issue comments", path: "/issues/{n}/comments", tmpl: issueT + "/comments", item: comment, got: listOf("body")},
		{name: "reactions", path: "/issues/{n}/reactions", tmpl: issueT + "/reactions",
			item: func(s listSubject) string { return s.reaction }, got: listOf("content")},
		{name: "labels", path: "/issues/{n}/labels", tmpl: issueT + "/labels", item: label, got: listOf("name")},
		{name: "reviews", path: "/pulls/{n}/reviews", tmpl: pullT + "/reviews",
			item: func(s listSubject) string { return "review " + s.key }, got: listOf("body")},
		{name: "review comments", path: "/pulls/{n}/comments", tmpl: pullT + "/comments", item: inline, got: listOf("body")},
		{name: "pull requested reviewers", path: "/pulls/{n}", tmpl: pullT, item: func(s listSubject) string { return s.reviewer },
			got: func(t *testing.T, r resp, _ listSubject) []string {
				return fields(r.obj(t)["requested_reviewers"].([]any), "login")
			}},
		{name: "pull labels", path: "/pulls/{n}", tmpl: pullT, item: label,
			got: func(t *testing.T, r resp, _ listSubject) []string { return fields(r.obj(t)["labels"].([]any), "name") }},
		{name: "pull comments count", path: "/pulls/{n}", tmpl: pullT, item: comment,
			got: func(t *testing.T, r resp, s listSubject) []string { return times(comment(s), r.obj(t)["comments"]) }},
		{name: "pull review comments count", path: "/pulls/{n}", tmpl: pullT, item: inline,
			got: func(t *testing.T, r resp, s listSubject) []string {
				return times(inline(s), r.obj(t)["review_comments"])
			}},
		{name: "pulls list requested reviewers", path: "/pulls?state=all", tmpl: "/repos/{owner}/{repo}/pulls",
			item: func(s listSubject) string { return s.reviewer },
			got: func(t *testing.T, r resp, s listSubject) []string {
				return fields(own(t, r, s)["requested_reviewers"].([]any), "login")
			}},
		{name: "issues list labels", path: "/issues?state=all", tmpl: "/repos/{owner}/{repo}/issues", item: label,
			got: func(t *testing.T, r resp, s listSubject) []string {
				return fields(own(t, r, s)["labels"].([]any), "name")
			}},
		{name: "issues list comments count", path: "/issues?state=all", tmpl: "/repos/{owner}/{repo}/issues", item: comment,
			got: func(t *testing.T, r resp, s listSubject) []string { return times(comment(s), own(t, r, s)["comments"]) }},
		{name: "issues list reactions rollup", path: "/issues?state=all", tmpl: "/repos/{owner}/{repo}/issues",
			item: func(s listSubject) string { return s.reaction },
			got: func(t *testing.T, r resp, s listSubject) []string {
				roll := own(t, r, s)["reactions"].(map[string]any)
				return times(s.reaction, roll["total_count"])
			}},
		{name: "combined status", path: "/commits/{sha}/status", tmpl: commitT + "/status",
			item: func(s listSubject) string { return "ci/" + s.key },
			got: func(t *testing.T, r resp, _ listSubject) []string {
				return fields(r.obj(t)["statuses"].([]any), "context")
			}},
		{name: "check runs", path: "/commits/{sha}/check-runs", tmpl: commitT + "/check-runs",
			item: func(s listSubject) string { return "check " + s.key },
			got: func(t *testing.T, r resp, _ listSubject) []string {
				return fields(r.obj(t)["check_runs"].([]any), "name")
			}},
		{name: "check runs' pull requests", path: "/commits/{sha}/check-runs", tmpl: commitT + "/check-runs",
			item: func(s listSubject) string { return fmt.Sprint(s.pr.Number) },
			got: func(t *testing.T, r resp, _ listSubject) []string {
				var out []string
				for _, cr := range r.obj(t)["check_runs"].([]any) {
					out = append(out, fields(cr.(map[string]any)["pull_requests"].([]any), "number")...)
				}
				return out
			}},
		{name: "repository issue comments", path: "/issues/comments", tmpl: "/repos/{owner}/{repo}/issues/comments", repoWide: true,
			item: comment, got: listOf("body")},
		{name: "repository review comments", path: "/pulls/comments", tmpl: "/repos/{owner}/{repo}/pulls/comments", repoWide: true,
			item: inline, got: listOf("body")},
	}
	scenarios := []struct {
		name   string
		seeded []string // keys of the subjects that get items
	}{
		{name: "items on a only", seeded: []string{"a"}},
		{name: "items on b only", seeded: []string{"b"}},
		{name: "items on every PR", seeded: []string{"a", "b", "c"}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			e, subs := newListSubjects(t)
			for _, s := range subs {
				if slices.Contains(sc.seeded, s.key) {
					s.seed(t, e)
				}
			}
			for _, l := range lists {
				for _, s := range subs {
					t.Run(l.name+"/"+s.key, func(t *testing.T) {
						want := []string{}
						for _, o := range subs {
							mine := o.key == s.key || l.repoWide && o.repo == s.repo
							if mine && slices.Contains(sc.seeded, o.key) {
								want = append(want, l.item(o))
							}
						}
						path := strings.NewReplacer("{n}", fmt.Sprint(s.pr.Number), "{sha}", s.sha).Replace(l.path)
						r := call(t, e.srv, "GET", "/repos/"+s.repo.String()+path, tokBot, nil)
						require.Equal(t, 200, r.StatusCode, "body: %.300s", r.body)
						checkContract(t, "GET", l.tmpl, r.StatusCode, r.body)
						assert.ElementsMatch(t, want, l.got(t, r, s))
					})
				}
			}
		})
	}
}
