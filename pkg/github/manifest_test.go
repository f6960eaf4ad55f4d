package github_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/github"
)

// TestAppPermissions: an App made for prloop gets each permission of
// github.Needs at the highest level a feature needs, and not a token's
// statuses: write (an App posts check runs).
func TestAppPermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		features []github.Feature
		want     map[string]string
	}{
		{name: "every feature", features: github.AllFeatures(), want: map[string]string{
			"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "write", "actions": "write"}},
		{name: "the feedback service", features: github.FeaturesOf("feedback"), want: map[string]string{
			"metadata": "read", "pull_requests": "write", "issues": "write", "contents": "write", "statuses": "read", "checks": "read", "actions": "write"}},
		{name: "the poller", features: github.FeaturesOf("poller"), want: map[string]string{
			"metadata": "read", "pull_requests": "read", "issues": "write", "contents": "read", "statuses": "read", "checks": "write"}},
		{name: "the escalator", features: github.FeaturesOf("escalator"), want: map[string]string{
			"metadata": "read", "pull_requests": "read", "issues": "write", "contents": "read", "statuses": "read", "checks": "read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := github.AppPermissions(tt.features)
			assert.Equal(t, tt.want, got)
			assert.Empty(t, github.MissingPermissions(got, tt.features), "an App with these permissions passes the start-up check")
		})
	}
}

// TestNewAppManifest: events only with a webhook, and every App
// permission of every feature.
func TestNewAppManifest(t *testing.T) {
	t.Parallel()
	m := github.NewAppManifest("prloop-acme", "http://127.0.0.1:1/callback", "https://prloop.example.com/webhook")
	assert.Equal(t, github.AppPermissions(github.AllFeatures()), m.DefaultPermissions)
	assert.Equal(t, github.WebhookEvents, m.DefaultEvents)
	require.NotNil(t, m.HookAttributes)
	assert.True(t, m.HookAttributes.Active)
	assert.False(t, m.Public, "an App for one organisation")
	assert.NotEmpty(t, m.URL, "GitHub requires url")

	bare := github.NewAppManifest("prloop-acme", "http://127.0.0.1:1/callback", "")
	assert.Nil(t, bare.HookAttributes)
	assert.Empty(t, bare.DefaultEvents, "GitHub delivers events only to a webhook")
}

// TestConvertAppManifest_CodeNeverInErrors: the code is a credential for an
// hour (it fetches the App's private key), so no error shows it, whether
// GitHub refuses it or cannot be reached.
func TestConvertAppManifest_CodeNeverInErrors(t *testing.T) {
	t.Parallel()
	const code = "a180b1a3d263c81bc6441d7b990bae27d4c10679"
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"Not Found"}`))
	}))
	t.Cleanup(refusing.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	tests := []struct {
		name, url, says string
	}{
		{name: "refused", url: refusing.URL, says: "unknown, used or more than an hour old"},
		{name: "unreachable", url: gone.URL, says: "convert the GitHub App manifest at 127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := github.ConvertAppManifest(t.Context(), http.DefaultClient, tt.url, code)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.says)
			assert.NotContains(t, err.Error(), code)
		})
	}
}
