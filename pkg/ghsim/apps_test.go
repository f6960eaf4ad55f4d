package ghsim_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
)

const conversionsPath = "/app-manifests/{code}/conversions"

// postManifest submits the manifest form as a browser does, without
// following GitHub's redirect, and returns the answer.
func postManifest(t *testing.T, base, path string, manifest any) *http.Response {
	t.Helper()
	b, err := json.Marshal(manifest)
	require.NoError(t, err)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(base+path, url.Values{"manifest": {string(b)}})
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// TestContract_AppFromManifest follows GitHub's manifest flow
// ("Registering a GitHub App from a manifest",
// https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// the form posted to /organizations/ORG/settings/apps/new redirects to the
// manifest's redirect_url with a code and the state; POST
// /app-manifests/{code}/conversions, without authentication, answers 201
// with the App and its credentials (checked against GitHub's OpenAPI
// description of apps/create-from-manifest), once.
func TestContract_AppFromManifest(t *testing.T) {
	t.Parallel()
	s, srv := newSim(t, ghsim.Options{})
	s.SetWebUser("octo")
	m := github.NewAppManifest("prloop-acme", "http://127.0.0.1:9/callback", "https://prloop.example.com/webhook")

	res := postManifest(t, srv.URL, "/organizations/acme/settings/apps/new?state=s3cr3t", m)
	require.Equal(t, http.StatusFound, res.StatusCode)
	loc, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9", loc.Host)
	assert.Equal(t, "/callback", loc.Path)
	assert.Equal(t, "s3cr3t", loc.Query().Get("state"), "GitHub passes the state back")
	code := loc.Query().Get("code")
	require.NotEmpty(t, code)

	r := call(t, srv, "POST", "/app-manifests/"+code+"/conversions", "", nil)
	require.Equal(t, http.StatusCreated, r.StatusCode, "%s", r.body)
	checkContract(t, "POST", conversionsPath, r.StatusCode, r.body)
	got := r.obj(t)
	apps := s.Apps()
	require.Len(t, apps, 1)
	a := apps[0]
	assert.EqualValues(t, a.ID, got["id"])
	assert.Equal(t, "prloop-acme", got["slug"])
	assert.Equal(t, srv.URL+"/apps/prloop-acme", got["html_url"])
	assert.Equal(t, "acme", got["owner"].(map[string]any)["login"])
	assert.Equal(t, "Organization", got["owner"].(map[string]any)["type"])
	assert.Equal(t, github.HomepageURL, got["external_url"])
	assert.Equal(t, a.WebhookSecret, got["webhook_secret"])
	assert.Equal(t, "https://prloop.example.com/webhook", a.WebhookURL)
	assert.Equal(t, m.DefaultPermissions, a.Permissions)
	assert.Equal(t, github.WebhookEvents, a.Events)
	block, _ := pem.Decode([]byte(got["pem"].(string)))
	require.NotNil(t, block, "pem")
	_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	require.NoError(t, err, "the App's private key, as GitHub hands it out")

	again := call(t, srv, "POST", "/app-manifests/"+code+"/conversions", "", nil)
	assert.Equal(t, http.StatusNotFound, again.StatusCode, "a code converts once")
	checkContract(t, "POST", conversionsPath, again.StatusCode, again.body)

	// pkg/github's client of the endpoint reads the same answer.
	res = postManifest(t, srv.URL, "/settings/apps/new?state=x", github.NewAppManifest("prloop-octo", "http://127.0.0.1:9/callback", ""))
	require.Equal(t, http.StatusFound, res.StatusCode)
	loc, err = url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	conv, err := github.ConvertAppManifest(t.Context(), srv.Client(), srv.URL, loc.Query().Get("code"))
	require.NoError(t, err)
	assert.Equal(t, "octo", conv.Owner.Login, "the signed-in user's App")
	assert.Equal(t, "User", conv.Owner.Type)
	assert.Empty(t, conv.Events, "no webhook, no events")
	assert.Empty(t, github.MissingAppGrants(github.NewAppManifest("", "", ""), conv))
	assert.NotContains(t, strings.Join([]string{conv.PEM.String(), conv.WebhookSecret.String(), conv.ClientSecret.String()}, ""), "PRIVATE KEY", "credentials print redacted")
}

// TestAppFromManifest_Refusals: what GitHub refuses in the flow.
func TestAppFromManifest_Refusals(t *testing.T) {
	t.Parallel()
	good := github.NewAppManifest("prloop-x", "http://127.0.0.1:9/cb", "https://example.com/hook")
	tests := []struct {
		name     string
		signedIn bool
		manifest any
		want     int
		says     string
	}{
		{name: "not signed in", manifest: good, want: http.StatusUnauthorized, says: "Sign in"},
		{name: "no homepage url", signedIn: true, manifest: map[string]any{"name": "x", "redirect_url": "http://127.0.0.1:9/cb"}, want: http.StatusUnprocessableEntity, says: "url is required"},
		{name: "event without its permission", signedIn: true, manifest: map[string]any{"name": "x", "url": "https://example.com",
			"hook_attributes": map[string]any{"url": "https://example.com/hook"}, "default_events": []string{"check_suite"},
			"default_permissions": map[string]string{"pull_requests": "read"}}, want: http.StatusUnprocessableEntity, says: "check_suite needs the permission checks"},
		{name: "hook without url", signedIn: true, manifest: map[string]any{"name": "x", "url": "https://example.com", "hook_attributes": map[string]any{"active": true}},
			want: http.StatusUnprocessableEntity, says: "hook_attributes: url is required"},
		{name: "name too long", signedIn: true, manifest: github.NewAppManifest(strings.Repeat("p", 35), "http://127.0.0.1:9/cb", ""), want: http.StatusUnprocessableEntity, says: "too long"},
		{name: "not JSON", signedIn: true, manifest: "{", want: http.StatusUnprocessableEntity, says: "Invalid GitHub App manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, srv := newSim(t, ghsim.Options{})
			if tt.signedIn {
				s.SetWebUser("octo")
			}
			var res *http.Response
			if raw, ok := tt.manifest.(string); ok {
				var err error
				res, err = http.PostForm(srv.URL+"/settings/apps/new", url.Values{"manifest": {raw}})
				require.NoError(t, err)
				defer res.Body.Close()
			} else {
				res = postManifest(t, srv.URL, "/settings/apps/new", tt.manifest)
			}
			assert.Equal(t, tt.want, res.StatusCode)
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			assert.Contains(t, string(body), tt.says)
			assert.Empty(t, s.Apps())
		})
	}

	t.Run("taken name, unknown and expired codes", func(t *testing.T) {
		t.Parallel()
		s, srv := newSim(t, ghsim.Options{}) // fake clock
		s.SetWebUser("octo")
		res := postManifest(t, srv.URL, "/settings/apps/new", good)
		require.Equal(t, http.StatusFound, res.StatusCode)
		loc, err := url.Parse(res.Header.Get("Location"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnprocessableEntity, postManifest(t, srv.URL, "/settings/apps/new", good).StatusCode, "App names are unique")

		r := call(t, srv, "POST", "/app-manifests/0123456789abcdef/conversions", "", nil)
		assert.Equal(t, http.StatusNotFound, r.StatusCode)
		s.Advance(time.Hour + time.Second)
		r = call(t, srv, "POST", "/app-manifests/"+loc.Query().Get("code")+"/conversions", "", nil)
		assert.Equal(t, http.StatusNotFound, r.StatusCode, "a code is good for an hour")
		checkContract(t, "POST", conversionsPath, r.StatusCode, r.body)
	})
}
