package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/proctest"
)

var (
	appPageRE   = regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	formActRE   = regexp.MustCompile(`action="([^"]+)"`)
	formValueRE = regexp.MustCompile(`name="manifest" value="([^"]+)"`)
)

// appCreateRun is prloop app create running against the simulator, and
// the form its page would post.
type appCreateRun struct {
	p              *proctest.Process
	page           string
	action         *url.URL
	manifest       string
	parsedManifest github.AppManifest
}

// startAppCreate runs the real binary's app create against the simulator
// at apiURL and reads the page it serves as a browser would.
func startAppCreate(t *testing.T, apiURL, dataDir string, args ...string) appCreateRun {
	t.Helper()
	env := []string{"PRLOOP_GITHUB_API_URL=" + apiURL, "PRLOOP_DATA_DIR=" + dataDir}
	p := proctest.Start(t, proctest.Build(t, "./cmd/prloop"), env, append([]string{"app", "create", "-open=false", "-wait", "2m"}, args...)...)
	var page string
	require.Eventually(t, func() bool {
		page = appPageRE.FindString(p.Stdout.String())
		return page != "" || p.Exited()
	}, 30*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, page, "no page address:\n%s%s", p.Stdout, p.Stderr)
	res, err := http.Get(page)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	act, val := formActRE.FindSubmatch(body), formValueRE.FindSubmatch(body)
	require.True(t, act != nil && val != nil, "no manifest form in the page:\n%s", body)
	action, err := url.Parse(html.UnescapeString(string(act[1])))
	require.NoError(t, err)
	r := appCreateRun{p: p, page: page, action: action, manifest: html.UnescapeString(string(val[1]))}
	require.NoError(t, json.Unmarshal([]byte(r.manifest), &r.parsedManifest), "the manifest is JSON")
	return r
}

// TestAppCreate_ManifestFlowAgainstTheSimulator runs prloop app create
// against the simulator end to end, as GitHub's manifest flow goes
// (https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// the local page posts a manifest with exactly the permissions and events
// prloop needs to the organisation's "new App" page; the simulator
// registers the App and redirects back with a code; prloop converts it and
// keeps the App's key, webhook secret and id in the data directory, mode
// 0600, and says what to set, without printing a credential or the code.
func TestAppCreate_ManifestFlowAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	var sim *ghsim.Sim
	env := startTestSim(t, func(s *ghsim.Sim) { sim = s; s.SetWebUser("alice") })
	data := t.TempDir()
	run := startAppCreate(t, env.url, data, "-org", "acme", "-webhook-url", "https://prloop.example.com/webhook")

	// The page: the organisation's "new App" page of the simulator's web
	// address, the manifest of github.Needs and the poller's events.
	assert.Equal(t, env.url+"/organizations/acme/settings/apps/new", run.action.Scheme+"://"+run.action.Host+run.action.Path)
	state := run.action.Query().Get("state")
	assert.Len(t, state, 32, "an unguessable state")
	m := run.parsedManifest
	assert.Equal(t, github.AppPermissions(github.AllFeatures()), m.DefaultPermissions, "exactly what prloop's features need")
	assert.Equal(t, github.WebhookEvents, m.DefaultEvents, "exactly the events the poller acts on")
	assert.Equal(t, "prloop-acme", m.Name)
	assert.Equal(t, run.page+"callback", m.RedirectURL)
	require.NotNil(t, m.HookAttributes)
	assert.Equal(t, "https://prloop.example.com/webhook", m.HookAttributes.URL)

	// A redirect that does not carry the page's state is refused.
	res, err := http.Get(run.page + "callback?code=x&state=forged")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)

	// The browser posts the form; GitHub answers with the redirect back.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = noFollow.PostForm(run.action.String(), url.Values{"manifest": {run.manifest}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	back := res.Header.Get("Location")
	require.True(t, strings.HasPrefix(back, run.page+"callback?"), back)
	backURL, err := url.Parse(back)
	require.NoError(t, err)
	code := backURL.Query().Get("code")
	res, err = http.Get(back)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode, "%s", body)

	exited, err := run.p.Wait(30 * time.Second)
	require.True(t, exited, "still waiting:\n%s", run.p.Stdout)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", run.p.Stdout, run.p.Stderr)

	apps := sim.Apps()
	require.Len(t, apps, 1)
	app := apps[0]
	assert.Equal(t, "acme", app.Owner)
	dir := filepath.Join(data, appDirName)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), dir)
	for name, want := range map[string]string{appKeyFile: app.PEM, appSecretFile: app.WebhookSecret} {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), path)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), path)
	}
	var info struct {
		ID   int64  `json:"id"`
		Slug string `json:"slug"`
	}
	b, err := os.ReadFile(filepath.Join(dir, appInfoFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, app.ID, info.ID)
	st, err = os.Stat(filepath.Join(dir, appInfoFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.NotContains(t, string(b), app.ClientSecret, "prloop does not keep the client secret")

	out := run.p.Stdout.String() + run.p.Stderr.String() + string(body)
	for what, secret := range map[string]string{"private key": strings.TrimSpace(strings.Split(app.PEM, "\n")[1]), "webhook secret": app.WebhookSecret,
		"client secret": app.ClientSecret, "code": code} {
		assert.NotContains(t, out, secret, "the %s is printed", what)
	}
	for _, want := range []string{
		"PRLOOP_GITHUB_APP_ID=" + strconv.FormatInt(app.ID, 10),
		"PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH=" + filepath.Join(dir, appKeyFile),
		`PRLOOP_WEBHOOK_SECRET="$(cat ` + filepath.Join(dir, appSecretFile) + `)"`,
		env.url + "/apps/prloop-acme/installations/new",
	} {
		assert.Contains(t, run.p.Stdout.String(), want)
	}

	// A second run keeps the App it made.
	again := proctest.Start(t, proctest.Build(t, "./cmd/prloop"), []string{"PRLOOP_GITHUB_API_URL=" + env.url, "PRLOOP_DATA_DIR=" + data}, "app", "create", "-open=false")
	exited, err = again.Wait(30 * time.Second)
	require.True(t, exited)
	require.Error(t, err)
	assert.Contains(t, again.Stderr.String(), "already holds a GitHub App")
}

// TestAppCreate_RefusedCodeFails: a code GitHub does not convert (used,
// expired) ends app create non-zero, saying why, without the code and
// without files.
func TestAppCreate_RefusedCodeFails(t *testing.T) {
	t.Parallel()
	env := startTestSim(t, func(s *ghsim.Sim) { s.SetWebUser("alice") })
	data := t.TempDir()
	run := startAppCreate(t, env.url, data)
	assert.Equal(t, env.url+"/settings/apps/new", run.action.Scheme+"://"+run.action.Host+run.action.Path, "the user's own App without -org")
	assert.Empty(t, run.parsedManifest.DefaultEvents, "no webhook, no events")

	const code = "0123456789abcdef0123456789abcdef01234567"
	res, err := http.Get(run.page + "callback?" + url.Values{"code": {code}, "state": {run.action.Query().Get("state")}}.Encode())
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	exited, err := run.p.Wait(30 * time.Second)
	require.True(t, exited)
	require.Error(t, err)
	assert.Contains(t, run.p.Stderr.String(), "unknown, used or more than an hour old")
	assert.NotContains(t, run.p.Stdout.String()+run.p.Stderr.String(), code)
	_, err = os.Stat(filepath.Join(data, appDirName))
	assert.True(t, os.IsNotExist(err), "nothing kept")
}
