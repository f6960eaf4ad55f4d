package ghsim_test

import (
	"encoding/base64"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
)

// gitAs runs git with tok as the Basic auth password in an extraHeader set
// through the environment, as prloop's own git does; "" sends no
// credential.
func gitAs(t *testing.T, dir, tok string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if tok != "" {
		u := &url.URL{User: url.UserPassword("x-access-token", tok)}
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basicOf(u))
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func basicOf(u *url.URL) string {
	p, _ := u.User.Password()
	return base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p))
}

func prHead(t *testing.T, s *ghsim.Sim, pr ghref.PR) string {
	t.Helper()
	info, err := s.PRInfo(pr)
	require.NoError(t, err)
	return info.HeadSHA
}

func TestGitHTTP_TokenForEveryRequestWriteToPush(t *testing.T) {
	t.Parallel()
	w := simtest.Start(t, nil, simtest.GitHTTP())
	require.NoError(t, w.Sim.SetPermission(w.Repo, "reader", "read"))
	w.Sim.AddToken("tok-reader", "reader")
	head, err := w.Sim.PushCommit(w.Repo, "feature/x", "agent", map[string]string{"a.txt": "a\n"}, "Add a")
	require.NoError(t, err)
	pr, err := w.Sim.OpenPR(w.Repo, ghsim.PRInput{Title: "Add a", Head: "feature/x", Author: "agent"})
	require.NoError(t, err)
	remote := w.Sim.CloneURL(w.Repo)
	require.True(t, strings.HasPrefix(remote, w.Server.URL+"/git/"), "clone_url %s is served over HTTP", remote)

	dir := t.TempDir()
	out, err := gitAs(t, dir, "", "clone", "--quiet", remote, "anon")
	require.Error(t, err, "a clone without a token is refused: %s", out)
	out, err = gitAs(t, dir, "tok-unknown", "clone", "--quiet", remote, "unknown")
	require.Error(t, err, "a clone with an unknown token is refused: %s", out)

	work := filepath.Join(dir, "work")
	out, err = gitAs(t, dir, "tok-reader", "clone", "--quiet", "--branch", "feature/x", remote, work)
	require.NoError(t, err, out)
	got, err := gitAs(t, work, "", "rev-parse", "HEAD")
	require.NoError(t, err)
	require.Equal(t, head, got)

	require.NoError(t, os.WriteFile(filepath.Join(work, "b.txt"), []byte("b\n"), 0o644))
	_, err = gitAs(t, work, "", "add", "b.txt")
	require.NoError(t, err)
	_, err = gitAs(t, work, "", "-c", "user.name=r", "-c", "user.email=r@x", "commit", "--quiet", "-m", "Add b")
	require.NoError(t, err)
	pushed, err := gitAs(t, work, "", "rev-parse", "HEAD")
	require.NoError(t, err)

	out, err = gitAs(t, work, "tok-reader", "push", "--quiet", remote, "HEAD:refs/heads/feature/x")
	require.Error(t, err, "a reader cannot push: %s", out)
	require.Equal(t, head, prHead(t, w.Sim, pr), "a refused push moves nothing")

	out, err = gitAs(t, work, simtest.Token, "push", "--quiet", remote, "HEAD:refs/heads/feature/x")
	require.NoError(t, err, out)
	require.Equal(t, pushed, prHead(t, w.Sim, pr), "the PR's head follows a push over HTTP")
}
