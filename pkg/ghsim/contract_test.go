package ghsim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_EveryEndpoint drives each endpoint and validates status and
// body against GitHub's OpenAPI description of the operation. The steps
// run in order on one repository, since later ones depend on earlier ones.
func TestContract_EveryEndpoint(t *testing.T) {
	e := newEnv(t, ghsim.Options{})
	s, repo := e.sim, e.repo
	// Data for the read endpoints.
	_, err := s.AddReaction(e.pr, "octo", "heart")
	require.NoError(t, err)
	_, err = s.AddIssueComment(e.pr, "octo", "Looks good")
	require.NoError(t, err)
	_, err = s.AddReview(e.pr, ghsim.ReviewInput{Login: "octo", State: "COMMENTED", Body: "Some notes",
		Comments: []ghsim.ReviewCommentInput{{Path: "feature.txt", Line: 2, Body: "Why two?"}}})
	require.NoError(t, err)
	info, err := s.PRInfo(e.pr)
	require.NoError(t, err)
	require.NoError(t, s.SetStatus(repo, info.HeadSHA, "ci/build", "success"))
	require.NoError(t, s.SetCheckRun(repo, info.HeadSHA, "test", "completed", "success"))
	require.NoError(t, s.SetCheckRun(repo, info.HeadSHA, "lint", "in_progress", ""))
	// A second PR to merge and one to update.
	_, err = s.PushCommit(repo, "second", "alice", map[string]string{"second.txt": "2\n"}, "Second")
	require.NoError(t, err)
	second, err := s.OpenPR(repo, ghsim.PRInput{Title: "Second", Head: "second", Author: "alice"})
	require.NoError(t, err)
	_, err = s.PushCommit(repo, "third", "alice", map[string]string{"third.txt": "3\n"}, "Third")
	require.NoError(t, err)
	third, err := s.OpenPR(repo, ghsim.PRInput{Title: "Third", Head: "third", Author: "alice"})
	require.NoError(t, err)
	_, err = s.PushCommit(repo, "fourth", "alice", map[string]string{"fourth.txt": "4\n"}, "Fourth")
	require.NoError(t, err)

	// main requires branches to be up to date, so that the behind PR below
	// is "behind" (without that rule GitHub calls it clean).
	require.NoError(t, s.SetRuleset(repo, "main", ghsim.RequiredChecks{Strict: true}))

	rp := "/repos/octo/socket.io"
	n := fmt.Sprint(e.pr.Number)
	var reactionID, inlineID int64
	steps := []struct {
		name, method, path, tmpl, token string
		body                            any
		status                          int
		check                           func(t *testing.T, r resp)
	}{
		{name: "get repo", method: "GET", path: rp, tmpl: "/repos/{owner}/{repo}", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, "octo/socket.io", m["full_name"])
				assert.Equal(t, s.CloneURL(repo), m["clone_url"])
				assert.Equal(t, "main", m["default_branch"])
			}},
		{name: "list pulls", method: "GET", path: rp + "/pulls?state=all", tmpl: "/repos/{owner}/{repo}/pulls", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 3) }},
		{name: "get pull", method: "GET", path: rp + "/pulls/" + n, tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, true, m["mergeable"])
				assert.Equal(t, "clean", m["mergeable_state"])
				assert.Equal(t, info.HeadSHA, m["head"].(map[string]any)["sha"])
				assert.Equal(t, s.CloneURL(repo), m["head"].(map[string]any)["repo"].(map[string]any)["clone_url"])
				assert.Equal(t, "alice", m["user"].(map[string]any)["login"])
				assert.Equal(t, "COLLABORATOR", m["author_association"])
				assert.EqualValues(t, 1, m["comments"])
				assert.EqualValues(t, 1, m["review_comments"])
			}},
		{name: "create pull", method: "POST", path: rp + "/pulls", tmpl: "/repos/{owner}/{repo}/pulls", token: tokAlice,
			body: map[string]any{"title": "Fourth", "head": "octo:fourth", "base": "main", "draft": true}, status: 201,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.EqualValues(t, 4, m["number"])
				assert.Equal(t, "draft", m["mergeable_state"])
			}},
		{name: "create duplicate pull", method: "POST", path: rp + "/pulls", tmpl: "/repos/{owner}/{repo}/pulls", token: tokAlice,
			body: map[string]any{"title": "Third again", "head": "octo:third", "base": "main"}, status: 422,
			check: func(t *testing.T, r resp) {
				// GitHub's words, which clients look for (github.PullExists).
				errs := r.obj(t)["errors"].([]any)
				require.NotEmpty(t, errs)
				assert.Equal(t, "A pull request already exists for octo:third.", errs[0].(map[string]any)["message"])
			}},
		{name: "list pulls by head and base", method: "GET", path: rp + "/pulls?head=octo:third&base=main", tmpl: "/repos/{owner}/{repo}/pulls", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				l := r.list(t)
				require.Len(t, l, 1)
				assert.Equal(t, "third", l[0]["head"].(map[string]any)["ref"])
			}},
		{name: "patch pull", method: "PATCH", path: rp + "/pulls/" + n, tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}", token: tokAlice,
			body: map[string]any{"title": "Add feature (v2)", "body": "Updated."}, status: 200,
			check: func(t *testing.T, r resp) { assert.Equal(t, "Add feature (v2)", r.obj(t)["title"]) }},
		{name: "list issues", method: "GET", path: rp + "/issues", tmpl: "/repos/{owner}/{repo}/issues", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				l := r.list(t)
				require.Len(t, l, 4)
				first := l[len(l)-1] // oldest last: sort=created desc
				assert.Contains(t, first, "pull_request")
				assert.EqualValues(t, 1, first["reactions"].(map[string]any)["heart"])
				assert.EqualValues(t, 1, first["comments"])
			}},
		{name: "list reactions", method: "GET", path: rp + "/issues/" + n + "/reactions", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/reactions", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 1) }},
		{name: "create reaction", method: "POST", path: rp + "/issues/" + n + "/reactions", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/reactions", token: tokBot,
			body: map[string]string{"content": "eyes"}, status: 201,
			check: func(t *testing.T, r resp) {
				var x struct{ ID int64 }
				r.json(t, &x)
				reactionID = x.ID
			}},
		{name: "create same reaction again", method: "POST", path: rp + "/issues/" + n + "/reactions", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/reactions", token: tokBot,
			body: map[string]string{"content": "eyes"}, status: 200,
			check: func(t *testing.T, r resp) {
				var x struct{ ID int64 }
				r.json(t, &x)
				assert.Equal(t, reactionID, x.ID)
			}},
		{name: "invalid reaction", method: "POST", path: rp + "/issues/" + n + "/reactions", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/reactions", token: tokBot,
			body: map[string]string{"content": "thumbsup"}, status: 422},
		{name: "list issue comments", method: "GET", path: rp + "/issues/" + n + "/comments", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/comments", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 1) }},
		{name: "create issue comment", method: "POST", path: rp + "/issues/" + n + "/comments", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/comments", token: tokBot,
			body: map[string]string{"body": "prloop: on it"}, status: 201,
			check: func(t *testing.T, r resp) { assert.Equal(t, "Bot", r.obj(t)["user"].(map[string]any)["type"]) }},
		{name: "list repo issue comments", method: "GET", path: rp + "/issues/comments?since=2025-01-01T00:00:00Z", tmpl: "/repos/{owner}/{repo}/issues/comments", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 2) }},
		{name: "list review comments", method: "GET", path: rp + "/pulls/" + n + "/comments", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/comments", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				l := r.list(t)
				require.Len(t, l, 1)
				assert.Equal(t, "feature.txt", l[0]["path"])
				assert.EqualValues(t, 2, l[0]["line"])
				assert.Contains(t, l[0]["diff_hunk"], "+two")
				assert.NotNil(t, l[0]["pull_request_review_id"])
			}},
		{name: "create review comment", method: "POST", path: rp + "/pulls/" + n + "/comments", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/comments", token: tokBot,
			body: map[string]any{"body": "nit", "path": "feature.txt", "line": 1, "commit_id": info.HeadSHA}, status: 201,
			check: func(t *testing.T, r resp) {
				var x struct{ ID int64 }
				r.json(t, &x)
				inlineID = x.ID
			}},
		{name: "list repo review comments", method: "GET", path: rp + "/pulls/comments", tmpl: "/repos/{owner}/{repo}/pulls/comments", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 2) }},
		{name: "reply to review comment", method: "POST", path: "" /* the created comment's, below */, tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies", token: tokBot,
			body: map[string]any{"body": "addressed in a1b2c3d"}, status: 201,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.EqualValues(t, inlineID, m["in_reply_to_id"])
				assert.Equal(t, "feature.txt", m["path"])
			}},
		{name: "reply to a missing comment", method: "POST", path: rp + "/pulls/" + n + "/comments/999999/replies", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies", token: tokBot,
			body: map[string]any{"body": "nowhere"}, status: 404},
		{name: "create review", method: "POST", path: rp + "/pulls/" + n + "/reviews", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", token: tokBot,
			body: map[string]any{"event": "REQUEST_CHANGES", "body": "Please fix", "comments": []map[string]any{{"path": "feature.txt", "line": 3, "body": "three?"}}}, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, "CHANGES_REQUESTED", m["state"])
				assert.Equal(t, info.HeadSHA, m["commit_id"])
			}},
		{name: "approve own PR", method: "POST", path: rp + "/pulls/" + n + "/reviews", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", token: tokAlice,
			body: map[string]any{"event": "APPROVE"}, status: 422},
		{name: "list reviews", method: "GET", path: rp + "/pulls/" + n + "/reviews", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 4) }}, // COMMENTED, the single comment's, the reply's, CHANGES_REQUESTED
		{name: "add labels object", method: "POST", path: rp + "/issues/" + n + "/labels", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/labels", token: tokBot,
			body: map[string]any{"labels": []string{"prloop:working", "bug"}}, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 2) }},
		{name: "add labels array", method: "POST", path: rp + "/issues/" + n + "/labels", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/labels", token: tokBot,
			body: []string{"bug", "ready"}, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 3) }},
		{name: "list labels", method: "GET", path: rp + "/issues/" + n + "/labels", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/labels", token: tokBot, status: 200},
		{name: "remove label", method: "DELETE", path: rp + "/issues/" + n + "/labels/prloop:working", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, r.list(t), 2) }},
		{name: "remove absent label", method: "DELETE", path: rp + "/issues/" + n + "/labels/nope", tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", token: tokBot, status: 404},
		{name: "combined status by sha", method: "GET", path: rp + "/commits/" + info.HeadSHA + "/status", tmpl: "/repos/{owner}/{repo}/commits/{ref}/status", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, "success", m["state"])
				assert.EqualValues(t, 1, m["total_count"])
			}},
		{name: "combined status by branch without statuses", method: "GET", path: rp + "/commits/main/status", tmpl: "/repos/{owner}/{repo}/commits/{ref}/status", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, "pending", m["state"])
				assert.EqualValues(t, 0, m["total_count"])
			}},
		{name: "check runs by branch", method: "GET", path: rp + "/commits/feature/check-runs", tmpl: "/repos/{owner}/{repo}/commits/{ref}/check-runs", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.EqualValues(t, 2, m["total_count"])
				runs := m["check_runs"].([]any)
				assert.Equal(t, "success", runs[0].(map[string]any)["conclusion"])
				assert.Nil(t, runs[1].(map[string]any)["conclusion"])
			}},
		{name: "permission write", method: "GET", path: rp + "/collaborators/alice/permission", tmpl: "/repos/{owner}/{repo}/collaborators/{username}/permission", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, "write", m["permission"])
				assert.Equal(t, "write", m["role_name"])
			}},
		{name: "permission admin", method: "GET", path: rp + "/collaborators/OCTO/permission", tmpl: "/repos/{owner}/{repo}/collaborators/{username}/permission", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Equal(t, "admin", r.obj(t)["permission"]) }},
		{name: "permission unknown user", method: "GET", path: rp + "/collaborators/ghost/permission", tmpl: "/repos/{owner}/{repo}/collaborators/{username}/permission", token: tokBot, status: 404},
		{name: "request reviewers", method: "POST", path: rp + "/pulls/" + n + "/requested_reviewers", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", token: tokBot,
			body: map[string]any{"reviewers": []string{"octo"}}, status: 201,
			check: func(t *testing.T, r resp) { assert.Len(t, r.obj(t)["requested_reviewers"], 1) }},
		{name: "request review from a non-collaborator", method: "POST", path: rp + "/pulls/" + n + "/requested_reviewers", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", token: tokBot,
			body: map[string]any{"reviewers": []string{"stranger"}}, status: 422},
		{name: "update branch not behind", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/update-branch", third.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/update-branch", token: tokBot, status: 422},
		{name: "merge with stale sha", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokBot,
			body: map[string]any{"sha": info.HeadSHA}, status: 409,
			check: func(t *testing.T, r resp) {
				assert.Equal(t, "Head branch was modified. Review and try the merge again.", r.obj(t)["message"])
			}},
		{name: "merge by reader", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokReader, status: 403},
		{name: "check merged before", method: "GET", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokBot, status: 404},
		{name: "merge", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokBot,
			body: map[string]any{"merge_method": "squash"}, status: 200,
			check: func(t *testing.T, r resp) { assert.Equal(t, true, r.obj(t)["merged"]) }},
		{name: "check merged after", method: "GET", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokBot, status: 204},
		{name: "merge again", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/merge", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", token: tokBot, status: 405},
		{name: "merged pull", method: "GET", path: rp + fmt.Sprintf("/pulls/%d", second.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.Equal(t, true, m["merged"])
				assert.Equal(t, "closed", m["state"])
				assert.NotNil(t, m["merge_commit_sha"])
				assert.Equal(t, "prloop[bot]", m["merged_by"].(map[string]any)["login"])
			}},
		{name: "behind pull", method: "GET", path: rp + fmt.Sprintf("/pulls/%d", third.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) { assert.Equal(t, "behind", r.obj(t)["mergeable_state"]) }},
		{name: "update branch", method: "PUT", path: rp + fmt.Sprintf("/pulls/%d/update-branch", third.Number), tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}/update-branch", token: tokBot,
			body: map[string]any{}, status: 202},
		{name: "delete ref", method: "DELETE", path: rp + "/git/refs/heads/second", tmpl: "/repos/{owner}/{repo}/git/refs/{ref}", token: tokBot, status: 204},
		{name: "delete absent ref", method: "DELETE", path: rp + "/git/refs/heads/second", tmpl: "/repos/{owner}/{repo}/git/refs/{ref}", token: tokBot, status: 422,
			check: func(t *testing.T, r resp) { assert.Equal(t, "Reference does not exist", r.obj(t)["message"]) }},
		{name: "delete reaction", method: "DELETE", path: rp + fmt.Sprintf("/issues/%s/reactions/%d", n, reactionID), tmpl: "/repos/{owner}/{repo}/issues/{issue_number}/reactions/{reaction_id}", token: tokBot, status: 204},
		{name: "rate limit", method: "GET", path: "/rate_limit", tmpl: "/rate_limit", token: tokBot, status: 200,
			check: func(t *testing.T, r resp) {
				var rl struct{ Resources github.RateLimits }
				r.json(t, &rl)
				require.NotNil(t, rl.Resources.Core)
				assert.Equal(t, 5000, rl.Resources.Core.Limit)
			}},
		{name: "unknown pull", method: "GET", path: rp + "/pulls/999", tmpl: "/repos/{owner}/{repo}/pulls/{pull_number}", token: tokBot, status: 404},
		{name: "unknown repo", method: "GET", path: "/repos/octo/nope", tmpl: "/repos/{owner}/{repo}", token: tokBot, status: 404},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			path := st.path
			if st.name == "delete reaction" {
				path = rp + fmt.Sprintf("/issues/%s/reactions/%d", n, reactionID)
			}
			if st.name == "reply to review comment" {
				path = rp + fmt.Sprintf("/pulls/%s/comments/%d/replies", n, inlineID)
			}
			r := call(t, e.srv, st.method, path, st.token, st.body)
			require.Equal(t, st.status, r.StatusCode, "body: %.500s", r.body)
			checkContract(t, st.method, st.tmpl, r.StatusCode, r.body)
			if st.check != nil {
				st.check(t, r)
			}
		})
	}
}

// TestContract_DecodesIntoGoGitHub checks that go-github, which the client
// uses, decodes the sim's bodies with the fields prloop reads populated.
func TestContract_DecodesIntoGoGitHub(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	_, err := e.sim.AddReaction(e.pr, "octo", "+1")
	require.NoError(t, err)
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)

	var pr github.PullRequest
	call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil).json(t, &pr)
	assert.Equal(t, info.HeadSHA, pr.GetHead().GetSHA())
	assert.Equal(t, "feature", pr.GetHead().GetRef())
	assert.Equal(t, "main", pr.GetBase().GetRef())
	assert.Equal(t, e.sim.CloneURL(e.repo), pr.GetHead().GetRepo().GetCloneURL())
	assert.Equal(t, "alice", pr.GetUser().GetLogin())
	assert.True(t, pr.GetMergeable())
	assert.Equal(t, "clean", pr.GetMergeableState())
	assert.Equal(t, ghsim.DefaultStart, pr.GetUpdatedAt().Time)

	var issues []*github.Issue
	call(t, e.srv, "GET", "/repos/octo/socket.io/issues", tokBot, nil).json(t, &issues)
	require.Len(t, issues, 1)
	assert.True(t, issues[0].IsPullRequest())
	assert.Equal(t, 1, issues[0].GetReactions().GetPlusOne())

	var perm github.RepositoryPermissionLevel
	call(t, e.srv, "GET", "/repos/octo/socket.io/collaborators/alice/permission", tokBot, nil).json(t, &perm)
	assert.Equal(t, "write", perm.GetPermission())
	assert.Equal(t, "alice", perm.GetUser().GetLogin())
}

// TestContract_CheckRuns drives a check run's life through the API, as an
// App writes one: created, updated, found by name with filter=latest, and
// the refusals GitHub gives. Documented answers are validated against the
// OpenAPI description; the refusals GitHub documents without a body are
// checked for its error object.
func TestContract_CheckRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	require.NoError(t, e.sim.SetCheckRun(e.repo, info.HeadSHA, "build", "completed", "success"))
	const (
		rp      = "/repos/octo/socket.io"
		create  = "/repos/{owner}/{repo}/check-runs"
		update  = "/repos/{owner}/{repo}/check-runs/{check_run_id}"
		listFor = "/repos/{owner}/{repo}/commits/{ref}/check-runs"
	)
	byName := rp + "/commits/" + info.HeadSHA + "/check-runs?check_name=prloop"
	var first, second int64
	runID := func(id *int64) func(t *testing.T, r resp) {
		return func(t *testing.T, r resp) {
			var x struct{ ID int64 }
			r.json(t, &x)
			require.NotZero(t, x.ID)
			*id = x.ID
		}
	}
	names := func(t *testing.T, r resp) []string {
		var out []string
		for _, cr := range r.obj(t)["check_runs"].([]any) {
			m := cr.(map[string]any)
			out = append(out, fmt.Sprint(m["name"], " ", m["status"], " ", m["conclusion"], " ", m["output"].(map[string]any)["title"]))
		}
		return out
	}
	steps := []struct {
		name, method, tmpl string
		path               func() string
		body               any
		status             int
		check              func(t *testing.T, r resp)
	}{
		{name: "create in progress", method: "POST", tmpl: create, path: func() string { return rp + "/check-runs" }, status: 201,
			body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA, "status": "in_progress",
				"output": map[string]string{"title": "waiting for review", "summary": "The pull request is open."}},
			check: func(t *testing.T, r resp) {
				runID(&first)(t, r)
				m := r.obj(t)
				assert.Equal(t, "in_progress", m["status"])
				assert.Nil(t, m["conclusion"])
				assert.Equal(t, "waiting for review", m["output"].(map[string]any)["title"])
				assert.Len(t, m["pull_requests"], 1)
			}},
		{name: "find by name", method: "GET", tmpl: listFor, path: func() string { return byName }, status: 200,
			check: func(t *testing.T, r resp) {
				assert.Equal(t, []string{"prloop in_progress <nil> waiting for review"}, names(t, r))
			}},
		{name: "update", method: "PATCH", tmpl: update, path: func() string { return fmt.Sprintf("%s/check-runs/%d", rp, first) }, status: 200,
			body: map[string]any{"conclusion": "success", "output": map[string]string{"title": "approved by alice", "summary": "Approved."}},
			check: func(t *testing.T, r resp) {
				m := r.obj(t)
				assert.EqualValues(t, first, m["id"])
				assert.Equal(t, "completed", m["status"], "a conclusion completes the run")
				assert.Equal(t, "success", m["conclusion"])
				assert.NotNil(t, m["completed_at"])
			}},
		{name: "create again", method: "POST", tmpl: create, path: func() string { return rp + "/check-runs" }, status: 201,
			body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA, "status": "completed", "conclusion": "action_required",
				"output": map[string]string{"title": "needs a human", "summary": "Escalated."}},
			check: runID(&second)},
		{name: "latest only", method: "GET", tmpl: listFor, path: func() string { return byName + "&filter=latest" }, status: 200,
			check: func(t *testing.T, r resp) {
				assert.Equal(t, []string{"prloop completed action_required needs a human"}, names(t, r))
				assert.EqualValues(t, second, r.obj(t)["check_runs"].([]any)[0].(map[string]any)["id"])
			}},
		{name: "all", method: "GET", tmpl: listFor, path: func() string { return byName + "&filter=all" }, status: 200,
			check: func(t *testing.T, r resp) { assert.Len(t, names(t, r), 2) }},
		{name: "every name", method: "GET", tmpl: listFor, path: func() string { return rp + "/commits/feature/check-runs" }, status: 200,
			check: func(t *testing.T, r resp) {
				assert.ElementsMatch(t, []string{"build completed success <nil>", "prloop completed action_required needs a human"}, names(t, r))
			}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := call(t, e.srv, st.method, st.path(), tokBot, st.body)
			require.Equal(t, st.status, r.StatusCode, "body: %.500s", r.body)
			checkContract(t, st.method, st.tmpl, r.StatusCode, r.body)
			st.check(t, r)
		})
	}
}

// TestCheckRuns_Refusals: what GitHub refuses about check runs, with its
// status and error object.
func TestCheckRuns_Refusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	out := map[string]string{"title": "t", "summary": "s"}
	tests := []struct {
		name, method, path string
		body               any
		status             int
		message            string
	}{
		{name: "no name", method: "POST", path: "/repos/octo/socket.io/check-runs", body: map[string]any{"head_sha": info.HeadSHA},
			status: 422, message: "Invalid request.\n\n\"name\" wasn't supplied."},
		{name: "no head_sha", method: "POST", path: "/repos/octo/socket.io/check-runs", body: map[string]any{"name": "prloop"},
			status: 422, message: "Invalid request.\n\n\"head_sha\" wasn't supplied."},
		{name: "head_sha not a commit", method: "POST", path: "/repos/octo/socket.io/check-runs", body: map[string]any{"name": "prloop", "head_sha": "feature"},
			status: 422, message: "Invalid request.\n\nNo commit found for SHA: feature"},
		{name: "completed without conclusion", method: "POST", path: "/repos/octo/socket.io/check-runs",
			body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA, "status": "completed", "output": out}, status: 422},
		{name: "output without summary", method: "POST", path: "/repos/octo/socket.io/check-runs",
			body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA, "output": map[string]string{"title": "t"}}, status: 422},
		{name: "summary too long", method: "POST", path: "/repos/octo/socket.io/check-runs",
			body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA, "output": map[string]string{"title": "t", "summary": strings.Repeat("x", 65536)}}, status: 422},
		{name: "unknown repository", method: "POST", path: "/repos/octo/nope/check-runs", body: map[string]any{"name": "prloop", "head_sha": info.HeadSHA},
			status: 404, message: "Not Found"},
		{name: "update unknown run", method: "PATCH", path: "/repos/octo/socket.io/check-runs/424242", body: map[string]any{"status": "in_progress"},
			status: 404, message: "Not Found"},
		{name: "list on unknown ref", method: "GET", path: "/repos/octo/socket.io/commits/nope/check-runs", status: 404},
		{name: "list with unknown filter", method: "GET", path: "/repos/octo/socket.io/commits/feature/check-runs?filter=newest", status: 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, e.srv, tt.method, tt.path, tokBot, tt.body)
			require.Equal(t, tt.status, r.StatusCode, "body: %.500s", r.body)
			msg, _ := r.obj(t)["message"].(string)
			require.NotEmpty(t, msg, "GitHub's error object")
			if tt.message != "" {
				assert.Equal(t, tt.message, msg)
			}
		})
	}
	runs, err := e.sim.CheckRunHistory(e.repo, info.HeadSHA, "")
	require.NoError(t, err)
	assert.Empty(t, runs, "nothing refused was written")
}

// TestContract_DeletedHeadRepo: once the repository a PR's head lives in
// is deleted (a fork its owner removed), GitHub answers head.repo null in
// both the PR and the list form, and keeps the PR open at its last head.
// GitHub's OpenAPI description long said otherwise; the issues
// "[Schema Inaccuracy] pull-request.head.repo is not required"
// (github/rest-api-description #161, fixed by #424) and "Pull Request
// Simple head.repo object may be null" (#1811) record the real answers.
func TestContract_DeletedHeadRepo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	require.NoError(t, e.sim.DeleteHeadRepo(e.pr))

	raw := call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil).obj(t)
	head := raw["head"].(map[string]any)
	assert.Contains(t, head, "repo")
	assert.Nil(t, head["repo"], "head.repo is null")
	var pr github.PullRequest
	call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil).json(t, &pr)
	assert.Nil(t, pr.GetHead().GetRepo())
	assert.Equal(t, "open", pr.GetState())
	assert.Equal(t, info.HeadSHA, pr.GetHead().GetSHA(), "the head stays")
	assert.NotNil(t, pr.GetBase().GetRepo(), "the base repository is still there")

	var list []*github.PullRequest
	call(t, e.srv, "GET", "/repos/octo/socket.io/pulls", tokBot, nil).json(t, &list)
	require.Len(t, list, 1)
	assert.Nil(t, list[0].GetHead().GetRepo())
}

// TestContract_RetargetPull changes a PR's base as GitHub's "Update a pull
// request" documents (https://docs.github.com/rest/pulls/pulls#update-a-pull-request:
// `base` is "the name of the branch you want your changes pulled into. This
// should be an existing branch on the current repository"): the PR's
// base.ref and base.sha follow the new branch, updated_at moves (an edit,
// which pollers see), and a branch that does not exist is refused with
// 422. prloop relies on it: an approval is for a head on a base, and a
// retarget withdraws it.
func TestContract_RetargetPull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	release, err := e.sim.PushCommit(e.repo, "release", "octo", map[string]string{"RELEASE": "1\n"}, "Cut a release")
	require.NoError(t, err)
	const tmpl = "/repos/{owner}/{repo}/pulls/{pull_number}"
	e.sim.Advance(time.Minute)

	r := call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"base": "release"})
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	checkContract(t, "PATCH", tmpl, 200, r.body)
	var pr github.PullRequest
	r.json(t, &pr)
	assert.Equal(t, "release", pr.GetBase().GetRef())
	assert.Equal(t, release, pr.GetBase().GetSHA())
	assert.Equal(t, ghsim.DefaultStart.Add(time.Minute), pr.GetUpdatedAt().Time, "a retarget is an edit: updated_at moves")

	call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil).json(t, &pr)
	assert.Equal(t, "release", pr.GetBase().GetRef(), "the PR stays retargeted")

	r = call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"base": "no-such-branch"})
	assert.Equal(t, 422, r.StatusCode, "%s", r.body)
	checkContract(t, "PATCH", tmpl, 422, r.body)
}
