package ghsim_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_OAuthScopesHeader: GitHub answers a classic token with the
// scopes it has in X-OAuth-Scopes, on every response, /rate_limit included
// ("Scopes for OAuth apps",
// https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps:
// "X-OAuth-Scopes lists the scopes your token has authorized"); a
// fine-grained token, an App token and a refused one get no such header.
func TestContract_OAuthScopesHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	e.sim.AddToken("tok-classic", "alice")
	e.sim.SetTokenScopes("tok-classic", "repo", "user")
	e.sim.AddToken("tok-noscopes", "alice")
	e.sim.SetTokenScopes("tok-noscopes")
	tests := []struct {
		name, token, path string
		status            int
		scopes            string
		present           bool
	}{
		{name: "classic token, rate limit", token: "tok-classic", path: "/rate_limit", status: 200, scopes: "repo, user", present: true},
		{name: "classic token, repository", token: "tok-classic", path: "/repos/octo/socket.io", status: 200, scopes: "repo, user", present: true},
		{name: "classic token without scopes", token: "tok-noscopes", path: "/rate_limit", status: 200, scopes: "", present: true},
		{name: "fine-grained token", token: tokAlice, path: "/rate_limit", status: 200},
		{name: "refused token", token: "nope", path: "/rate_limit", status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, e.srv, "GET", tt.path, "", nil, "Authorization", "token "+tt.token)
			require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
			v, ok := r.Header[http.CanonicalHeaderKey("X-OAuth-Scopes")]
			require.Equal(t, tt.present, ok, "X-OAuth-Scopes present: %v", v)
			if tt.present {
				assert.Equal(t, tt.scopes, r.Header.Get("X-OAuth-Scopes"))
			}
		})
	}
}
