package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestAccess_ReadsTheCredentials: Access tells a classic token (with its
// X-OAuth-Scopes, "Scopes for OAuth apps") from a token without the
// header, and a token GitHub refuses is ErrUnauthorized.
func TestAccess_ReadsTheCredentials(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	e.sim.AddToken("tok-classic", "alice")
	e.sim.SetTokenScopes("tok-classic", "public_repo", "read:org")
	tests := []struct {
		name, token string
		want        Access
		kind        string
		err         error
	}{
		{name: "classic token", token: "tok-classic", want: Access{Classic: true, Scopes: []string{"public_repo", "read:org"}}, kind: "classic token"},
		{name: "fine-grained token", token: simToken, want: Access{}, kind: "fine-grained token"},
		{name: "refused token", token: "tok-revoked", err: ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(t.Context(), Config{APIURL: e.srv.URL, Token: Secret(tt.token)}, Options{Logger: bufferLogger(&syncBuffer{})})
			require.NoError(t, err)
			got, err := c.Access(t.Context())
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				assert.NotContains(t, err.Error(), tt.token, "the token stays out of errors")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.kind, got.Kind())
		})
	}
}

func TestMissingScope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		scopes  []string
		private bool
		want    string
	}{
		{name: "repo covers a private repository", scopes: []string{"repo"}, private: true, want: ""},
		{name: "repo covers a public repository", scopes: []string{"repo", "user"}, want: ""},
		{name: "public_repo covers a public repository", scopes: []string{"public_repo"}, want: ""},
		{name: "public_repo does not cover a private one", scopes: []string{"public_repo"}, private: true, want: "repo"},
		{name: "no scopes, public", want: "public_repo"},
		{name: "no scopes, private", scopes: []string{"read:org"}, private: true, want: "repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, MissingScope(tt.scopes, tt.private))
		})
	}
}

func TestMissingPermissions(t *testing.T) {
	t.Parallel()
	all := []Feature{FeatureWatch, FeatureStatus, FeatureFix, FeatureMerge, FeatureEscalate}
	full := map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "write", "checks": "write"}
	tests := []struct {
		name     string
		perms    map[string]string
		features []Feature
		want     string
	}{
		{name: "everything granted", perms: full, features: all, want: ""},
		{name: "admin grants write", perms: map[string]string{"metadata": "read", "pull_requests": "admin", "issues": "write", "contents": "write", "statuses": "write", "checks": "write"}, features: all, want: ""},
		{name: "read-only contents", perms: map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "read", "statuses": "write", "checks": "write"}, features: all,
			want: "contents: write (push fixes and open PRs, merge)"},
		{name: "a watcher needs reads only", perms: map[string]string{"metadata": "read", "pull_requests": "read", "issues": "read", "contents": "read", "statuses": "read", "checks": "read"}, features: []Feature{FeatureWatch}, want: ""},
		{name: "the App writes check runs, not statuses", perms: map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "read"}, features: all,
			want: "checks: write (post its status (PRLOOP_POST_STATUS))"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, DescribeNeeds(MissingPermissions(tt.perms, tt.features)))
		})
	}
}
