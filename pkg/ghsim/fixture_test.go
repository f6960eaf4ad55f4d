package ghsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// Tokens of the standard environment.
const (
	tokOwner  = "tok-owner"  // octo: owns the repository (admin)
	tokBot    = "tok-bot"    // prloop[bot]: write
	tokAlice  = "tok-alice"  // alice: PR author, write
	tokReader = "tok-reader" // reader: read only
)

type env struct {
	sim  *ghsim.Sim
	srv  *httptest.Server
	repo ghref.Repo
	pr   ghref.PR
}

func newSim(t *testing.T, opts ghsim.Options) (*ghsim.Sim, *httptest.Server) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := ghsim.New(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, s.Close())
	})
	return s, srv
}

// newEnv builds a repository with a dotted name and one open PR from
// alice's "feature" branch.
func newEnv(t *testing.T, opts ghsim.Options) *env {
	t.Helper()
	s, srv := newSim(t, opts)
	s.AddToken(tokOwner, "octo")
	s.AddToken(tokAlice, "alice")
	s.AddToken(tokReader, "reader")
	s.AddUser("prloop[bot]", true)
	s.AddToken(tokBot, "prloop[bot]")
	repo, err := s.CreateRepo("octo", "socket.io", map[string]string{
		"README.md": "# socket.io\n",
		"main.go":   "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
	})
	require.NoError(t, err)
	require.NoError(t, s.SetPermission(repo, "alice", "write"))
	require.NoError(t, s.SetPermission(repo, "prloop[bot]", "write"))
	require.NoError(t, s.SetPermission(repo, "reader", "read"))
	_, err = s.PushCommit(repo, "feature", "alice", map[string]string{"feature.txt": "one\ntwo\nthree\n"}, "Add feature")
	require.NoError(t, err)
	pr, err := s.OpenPR(repo, ghsim.PRInput{Title: "Add feature", Body: "Please review.", Head: "feature", Author: "alice"})
	require.NoError(t, err)
	return &env{sim: s, srv: srv, repo: repo, pr: pr}
}

type resp struct {
	*http.Response
	body []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "decode %.300s", r.body)
}

func (r resp) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m
}

func (r resp) list(t *testing.T) []map[string]any {
	t.Helper()
	var l []map[string]any
	r.json(t, &l)
	return l
}

// call sends a request; body may be nil, a string (sent raw) or a value
// (sent as JSON). hdr holds extra header pairs.
func call(t *testing.T, srv *httptest.Server, method, path, token string, body any, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return resp{Response: res, body: b}
}

// git runs the git binary hermetically in dir.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + home + "/none",
		"GIT_AUTHOR_NAME=tester", "GIT_AUTHOR_EMAIL=tester@example.com",
		"GIT_COMMITTER_NAME=tester", "GIT_COMMITTER_EMAIL=tester@example.com", "GIT_TERMINAL_PROMPT=0",
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}
