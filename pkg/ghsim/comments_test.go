package ghsim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_CommentReactionsAndEdits holds the simulator to GitHub's
// documented behaviour of a conversation comment's own endpoints:
//
//   - "REST API endpoints for reactions", Create reaction for an issue
//     comment (https://docs.github.com/en/rest/reactions/reactions#create-reaction-for-an-issue-comment):
//     201 for a new reaction, 200 with the existing one when the user
//     already reacted with that content; List reactions for an issue
//     comment, filterable by content; 422 for an unknown content.
//   - "REST API endpoints for issue comments", Update an issue comment
//     (https://docs.github.com/en/rest/issues/comments#update-an-issue-comment):
//     200 with the comment, whose body and updated_at change; 404 for an
//     unknown comment; the author or a writer may edit, a reader may not.
func TestContract_CommentReactionsAndEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	id, err := e.sim.AddIssueComment(e.pr, "alice", "/prloop explain")
	require.NoError(t, err)
	c := fmt.Sprintf("/repos/octo/socket.io/issues/comments/%d", id)

	r := call(t, e.srv, "POST", c+"/reactions", tokBot, map[string]string{"content": "eyes"})
	require.Equal(t, 201, r.StatusCode, "%s", r.body)
	first := r.obj(t)["id"]
	r = call(t, e.srv, "POST", c+"/reactions", tokBot, map[string]string{"content": "eyes"})
	require.Equal(t, 200, r.StatusCode, "an existing reaction is answered, not doubled")
	assert.Equal(t, first, r.obj(t)["id"])
	r = call(t, e.srv, "POST", c+"/reactions", tokBot, map[string]string{"content": "confused"})
	require.Equal(t, 201, r.StatusCode)
	r = call(t, e.srv, "POST", c+"/reactions", tokBot, map[string]string{"content": "shrug"})
	assert.Equal(t, 422, r.StatusCode)

	r = call(t, e.srv, "GET", c+"/reactions", tokBot, nil)
	require.Equal(t, 200, r.StatusCode)
	assert.Len(t, r.list(t), 2)
	r = call(t, e.srv, "GET", c+"/reactions?content=eyes", tokBot, nil)
	require.Equal(t, 200, r.StatusCode)
	l := r.list(t)
	require.Len(t, l, 1)
	assert.Equal(t, "prloop[bot]", l[0]["user"].(map[string]any)["login"])

	// The comment in the PR's list carries its reactions' rollup.
	r = call(t, e.srv, "GET", fmt.Sprintf("/repos/octo/socket.io/issues/%d/comments", e.pr.Number), tokBot, nil)
	require.Equal(t, 200, r.StatusCode)
	rollup := r.list(t)[0]["reactions"].(map[string]any)
	assert.EqualValues(t, 2, rollup["total_count"])
	assert.EqualValues(t, 1, rollup["eyes"])
	assert.EqualValues(t, 1, rollup["confused"])

	bot, err := e.sim.AddIssueComment(e.pr, "prloop[bot]", "first answer")
	require.NoError(t, err)
	b := fmt.Sprintf("/repos/octo/socket.io/issues/comments/%d", bot)
	before, err := e.sim.IssueComments(e.pr)
	require.NoError(t, err)
	e.sim.Advance(2 * time.Second)
	r = call(t, e.srv, "PATCH", b, tokBot, map[string]string{"body": "second answer"})
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	assert.Equal(t, "second answer", r.obj(t)["body"])
	after, err := e.sim.IssueComments(e.pr)
	require.NoError(t, err)
	require.Len(t, after, 2)
	assert.Equal(t, "second answer", after[1].Body)
	assert.True(t, after[1].Updated.After(before[1].Updated), "an edit moves updated_at")
	assert.Equal(t, before[1].Created, after[1].Created)
	assert.Equal(t, []string{"prloop[bot]:eyes", "prloop[bot]:confused"}, after[0].Reactions)

	r = call(t, e.srv, "PATCH", b, tokReader, map[string]string{"body": "hijacked"})
	assert.Equal(t, 403, r.StatusCode, "a reader may not edit another's comment")
	r = call(t, e.srv, "PATCH", b, tokBot, map[string]string{"body": ""})
	assert.Equal(t, 422, r.StatusCode)
	r = call(t, e.srv, "PATCH", "/repos/octo/socket.io/issues/comments/999999", tokBot, map[string]string{"body": "x"})
	assert.Equal(t, 404, r.StatusCode)
}
