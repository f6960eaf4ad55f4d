package ghsim_test

import (
	"encoding/base64"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_Contents checks GET /repos/{owner}/{repo}/contents/{path}
// as GitHub documents it ("Get repository content",
// https://docs.github.com/en/rest/repos/contents#get-repository-content):
// a file is type "file", encoding "base64" with the content in lines,
// sha the blob's git sha, read at the commit, branch or tag named by ref
// (the default branch without it); a missing path or ref is 404; an
// unchanged answer is 304 to a conditional request (the ETag).
func TestContract_Contents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	const policyV1 = "version: 1\nmerge:\n  method: rebase\n# " + "a long comment line so that the base64 text spans more than one of GitHub's sixty-character lines\n"
	sha1, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{".github/prloop.yml": policyV1}, "policy")
	require.NoError(t, err)
	sha2, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{".github/prloop.yml": "version: 1\n"}, "policy 2")
	require.NoError(t, err)
	rp := "/repos/octo/socket.io/contents/.github/prloop.yml"

	tests := []struct {
		name   string
		path   string
		status int
		want   string // the content, or the 404's message
	}{
		{name: "at an older commit", path: rp + "?ref=" + sha1, status: 200, want: policyV1},
		{name: "at the newest commit", path: rp + "?ref=" + sha2, status: 200, want: "version: 1\n"},
		{name: "on a branch", path: rp + "?ref=main", status: 200, want: "version: 1\n"},
		{name: "default branch without ref", path: rp, status: 200, want: "version: 1\n"},
		{name: "missing file", path: "/repos/octo/socket.io/contents/.github/none.yml?ref=" + sha2, status: 404, want: "Not Found"},
		{name: "before the file existed", path: rp + "?ref=feature", status: 404, want: "Not Found"},
		{name: "unknown ref", path: rp + "?ref=nope", status: 404, want: "No commit found for the ref nope"},
		{name: "unknown repository", path: "/repos/octo/nope/contents/x", status: 404, want: "Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e.srv, "GET", tt.path, tokBot, nil)
			require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
			if tt.status != 200 {
				assert.Equal(t, tt.want, r.obj(t)["message"])
				return
			}
			m := r.obj(t)
			assert.Equal(t, "file", m["type"])
			assert.Equal(t, "base64", m["encoding"])
			assert.Equal(t, "prloop.yml", m["name"])
			assert.Equal(t, ".github/prloop.yml", m["path"])
			assert.EqualValues(t, len(tt.want), m["size"])
			content := m["content"].(string)
			for _, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
				assert.LessOrEqual(t, len(line), 60, "GitHub wraps base64 at 60 characters")
			}
			data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(content, "\n", ""))
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(data))
			out, err := exec.Command("sh", "-c", "printf %s \"$0\" | git hash-object --stdin", tt.want).Output()
			require.NoError(t, err)
			assert.Equal(t, strings.TrimSpace(string(out)), m["sha"], "sha is the blob's git sha")

			again := call(t, e.srv, "GET", tt.path, tokBot, nil, "If-None-Match", r.Header.Get("ETag"))
			assert.Equal(t, http.StatusNotModified, again.StatusCode)
		})
	}
}

// TestContract_TeamMembership checks GET
// /orgs/{org}/teams/{team_slug}/memberships/{username} as GitHub documents
// it ("Get team membership for a user",
// https://docs.github.com/en/rest/teams/members#get-team-membership-for-a-user):
// 200 with state "active" for a member, "pending" for an invitation not
// yet accepted, 404 for anyone else and for an unknown team.
func TestContract_TeamMembership(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	require.NoError(t, e.sim.SetTeamMember("acme", "core", "alice", "active"))
	require.NoError(t, e.sim.SetTeamMember("acme", "core", "bob", "pending"))
	require.NoError(t, e.sim.SetTeamMember("acme", "core", "carol", "active"))
	require.NoError(t, e.sim.SetTeamMember("acme", "core", "carol", ""))
	require.Error(t, e.sim.SetTeamMember("acme", "core", "dave", "member"))
	tests := []struct {
		name   string
		path   string
		status int
		state  string
	}{
		{name: "active member", path: "/orgs/acme/teams/core/memberships/alice", status: 200, state: "active"},
		{name: "logins are case-insensitive", path: "/orgs/ACME/teams/core/memberships/Alice", status: 200, state: "active"},
		{name: "invited", path: "/orgs/acme/teams/core/memberships/bob", status: 200, state: "pending"},
		{name: "removed", path: "/orgs/acme/teams/core/memberships/carol", status: 404},
		{name: "not a member", path: "/orgs/acme/teams/core/memberships/octo", status: 404},
		{name: "unknown team", path: "/orgs/acme/teams/nope/memberships/alice", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e.srv, "GET", tt.path, tokBot, nil)
			require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
			if tt.status == 200 {
				m := r.obj(t)
				assert.Equal(t, tt.state, m["state"])
				assert.Equal(t, "member", m["role"])
			}
		})
	}
}

// TestContract_CommitOfASlashedBranch checks GET
// /repos/{owner}/{repo}/commits/{ref} ("Get a commit",
// https://docs.github.com/en/rest/commits/commits#get-a-commit) for a
// branch whose name holds a slash: ref is a commit SHA, a branch or a tag
// name, and a release/1 branch resolves to its tip like main does.
func TestContract_CommitOfASlashedBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	sha, err := e.sim.PushCommit(e.repo, "release/1", "octo", map[string]string{"r.txt": "r\n"}, "release")
	require.NoError(t, err)
	r := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/release/1", tokBot, nil)
	require.Equal(t, 200, r.StatusCode, "%s", r.body)
	assert.Equal(t, sha, r.obj(t)["sha"])
	status := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/"+sha+"/status", tokBot, nil)
	assert.Equal(t, 200, status.StatusCode, "the status route still wins for a SHA")
}
