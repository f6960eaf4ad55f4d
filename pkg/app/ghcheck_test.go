package app_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
)

// TestJudgeAccess: what stops a start, and what is only a warning, for
// each kind of credentials.
func TestJudgeAccess(t *testing.T) {
	t.Parallel()
	all := github.AllFeatures()
	full := map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "write", "actions": "write"}
	noChecks := map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "read", "actions": "write"}
	noRerun := map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "write", "actions": "read"}
	tests := []struct {
		name               string
		access             github.Access
		features           []github.Feature
		problems, warnings []string
	}{
		{name: "classic token with repo", access: github.Access{Classic: true, Scopes: []string{"repo"}}, features: all},
		{name: "classic token with public_repo", access: github.Access{Classic: true, Scopes: []string{"public_repo", "workflow"}}, features: all},
		{name: "classic token without a repository scope", access: github.Access{Classic: true, Scopes: []string{"gist"}}, features: all,
			problems: []string{"the classic token lacks the scope public_repo (or repo, for private repositories too); it has gist: create a token with the repo scope"}},
		{name: "classic token with no scope at all", access: github.Access{Classic: true}, features: all,
			problems: []string{"the classic token lacks the scope public_repo (or repo, for private repositories too); it has none: create a token with the repo scope"}},
		{name: "fine-grained token: GitHub does not tell", access: github.Access{}, features: all},
		{name: "App with what prloop needs", access: github.Access{App: true, Permissions: full}, features: all},
		{name: "App without checks write: a warning naming the setting", access: github.Access{App: true, Permissions: noChecks}, features: all,
			warnings: []string{"the GitHub App installation lacks the permission checks: write (post its status (PRLOOP_POST_STATUS)): grant it, or set PRLOOP_POST_STATUS=false"}},
		{name: "App without actions write: re-runs are a warning", access: github.Access{App: true, Permissions: noRerun}, features: all,
			warnings: []string{"the GitHub App installation lacks the permission actions: write (hand failing checks to the agent): grant it, or set PRLOOP_RERUN_FAILED_CHECKS=false"}},
		{name: "App with read-only contents", access: github.Access{App: true, Permissions: map[string]string{"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "read", "statuses": "read", "checks": "write", "actions": "write"}}, features: all,
			problems: []string{"the GitHub App installation lacks the permissions contents: write (push fixes and open PRs, merge): grant them in the App's settings (Permissions & events), then accept them for the installation"}},
		{name: "the escalator needs no contents write", access: github.Access{App: true, Permissions: map[string]string{"metadata": "read", "pull_requests": "read", "issues": "write", "contents": "read", "statuses": "read", "checks": "read"}},
			features: github.FeaturesOf("escalator")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			problems, warnings := app.JudgeAccess(tt.access, tt.features)
			assert.Equal(t, tt.problems, problems)
			assert.Equal(t, tt.warnings, warnings)
		})
	}
}

// TestNewGitHub_RefusesWhatCannotWork: NewGitHub refuses credentials
// GitHub refuses or that lack a repository scope, and CheckRepos a
// repository GitHub does not show; each error wraps ErrCredentials and
// says the fix.
func TestNewGitHub_RefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	w := simtest.Start(t, nil)
	w.Sim.AddToken("tok-gist", "prloop")
	w.Sim.SetTokenScopes("tok-gist", "gist")
	w.Sim.AddToken("tok-repo", "prloop")
	w.Sim.SetTokenScopes("tok-repo", "repo")
	tests := []struct {
		name, token string
		repos       []ghref.Repo
		want        string
	}{
		{name: "refused token", token: "tok-revoked", want: "refused the credentials from config (401)"},
		{name: "no repository scope", token: "tok-gist", want: "the credentials from config cannot work: the classic token lacks the scope public_repo"},
		{name: "unknown repository", token: "tok-repo", repos: []ghref.Repo{w.Repo, {Owner: "acme", Name: "nosuch"}},
			want: "PRLOOP_REPOS names acme/nosuch, which GitHub does not show to the credentials from config (404)"},
		{name: "all well", token: "tok-repo", repos: []ghref.Repo{w.Repo}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := start(t)
			c, err := rt.NewGitHub(t.Context(), github.Config{APIURL: w.Server.URL, Token: github.Secret(tt.token)})
			if err == nil {
				err = rt.CheckRepos(t.Context(), c, tt.repos)
			}
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, github.ErrCredentials)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), tt.token)
		})
	}
}
