package github

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveToken_Order(t *testing.T) {
	ghDir := t.TempDir()
	script := filepath.Join(ghDir, "gh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] || exit 3\necho '  gho_from_gh_cli  '\n"), 0o755))
	failing := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(failing, "gh"), []byte("#!/bin/sh\necho 'not logged in' >&2\nexit 1\n"), 0o755))
	empty := t.TempDir()

	tests := []struct {
		name       string
		githubTok  string
		ghTok      string
		path       string
		want       Secret
		wantSource string
		wantErr    []string
	}{
		{name: "GITHUB_TOKEN wins", githubTok: "tok_github", ghTok: "tok_gh", path: ghDir, want: "tok_github", wantSource: "GITHUB_TOKEN"},
		{name: "GH_TOKEN next", ghTok: "tok_gh", path: ghDir, want: "tok_gh", wantSource: "GH_TOKEN"},
		{name: "gh auth token last, trimmed", path: ghDir, want: "gho_from_gh_cli", wantSource: "gh auth token"},
		{name: "blank variables are unset", githubTok: "  ", ghTok: "", path: ghDir, want: "gho_from_gh_cli", wantSource: "gh auth token"},
		{name: "gh fails", path: failing, wantErr: []string{"GITHUB_TOKEN", "GH_TOKEN", "gh auth token", "exit status 1"}},
		{name: "gh missing", path: empty, wantErr: []string{"GITHUB_TOKEN", "GH_TOKEN", "gh auth token", "not on PATH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GITHUB_TOKEN", tt.githubTok)
			t.Setenv("GH_TOKEN", tt.ghTok)
			t.Setenv("PATH", tt.path)
			tok, src, err := ResolveToken(t.Context())
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, w := range tt.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				assert.NotContains(t, err.Error(), "not logged in", "gh's stderr is not echoed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, tok)
			assert.Equal(t, tt.wantSource, src)
		})
	}
}

func TestNew_ResolvesTokenFromEnvironment(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GH_TOKEN", "")
	t.Setenv("PATH", t.TempDir())
	_, err := New(t.Context(), Config{APIURL: "http://127.0.0.1:1/"}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GITHUB_TOKEN")

	t.Setenv("GH_TOKEN", "tok_env")
	c, err := New(t.Context(), Config{APIURL: "http://127.0.0.1:1/"}, Options{})
	require.NoError(t, err)
	assert.Equal(t, Secret("tok_env"), c.token)
}

func TestConfig_Validate(t *testing.T) {
	key := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(key, []byte("not really a key"), 0o600))
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{name: "defaults", cfg: Config{}},
		{name: "enterprise", cfg: Config{APIURL: "https://ghe.example.com/api/v3"}},
		{name: "full app", cfg: Config{AppID: 1, AppInstallationID: 2, AppPrivateKeyPath: key}},
		{name: "app id only", cfg: Config{AppID: 1}, wantErr: []string{envInstallationID, envKeyPath, "together"}},
		{name: "key only", cfg: Config{AppPrivateKeyPath: key}, wantErr: []string{envAppID + " and " + envInstallationID + " not set"}},
		{name: "installation missing", cfg: Config{AppID: 1, AppPrivateKeyPath: key}, wantErr: []string{envInstallationID + " not set"}},
		{name: "negative app id", cfg: Config{AppID: -1, AppInstallationID: 2, AppPrivateKeyPath: key}, wantErr: []string{envAppID, "positive"}},
		{name: "key file missing", cfg: Config{AppID: 1, AppInstallationID: 2, AppPrivateKeyPath: key + ".nope"}, wantErr: []string{envKeyPath, "no such file"}},
		{name: "key is a directory", cfg: Config{AppID: 1, AppInstallationID: 2, AppPrivateKeyPath: filepath.Dir(key)}, wantErr: []string{envKeyPath, "not a regular file"}},
		{name: "bad scheme", cfg: Config{APIURL: "ftp://x/"}, wantErr: []string{envAPIURL, "scheme"}},
		{name: "no host", cfg: Config{APIURL: "https:///api"}, wantErr: []string{envAPIURL, "no host"}},
		{name: "credentials in url", cfg: Config{APIURL: "https://user:s3cret@ghe.example.com/api/v3/"}, wantErr: []string{envAPIURL, "credentials"}},
		{name: "negative timeout", cfg: Config{RequestTimeout: -time.Second}, wantErr: []string{envTimeout, "negative"}},
		{name: "absurd retries", cfg: Config{MaxRetries: 50}, wantErr: []string{envMaxRetries}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestLoadConfig_FromEnvironment(t *testing.T) {
	t.Setenv("PRLOOP_GITHUB_API_URL", "https://ghe.example.com/api/v3")
	t.Setenv("PRLOOP_GITHUB_REQUEST_TIMEOUT", "5s")
	c, err := LoadConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://ghe.example.com/api/v3", c.APIURL)
	assert.Equal(t, 5*time.Second, c.RequestTimeout)
	assert.Equal(t, 5, c.MaxRetries)
	assert.Equal(t, 15*time.Minute, c.MaxRateLimitWait)
	assert.Equal(t, int64(64<<20), c.CacheMaxBytes)

	t.Setenv("PRLOOP_GITHUB_APP_ID", "12")
	_, err = LoadConfig()
	require.ErrorContains(t, err, envInstallationID)

	t.Setenv("PRLOOP_GITHUB_APP_ID", "twelve")
	_, err = LoadConfig()
	require.ErrorContains(t, err, "GITHUB_APP_ID")
}

func TestNew_AppAuthBadKeyNamesVariable(t *testing.T) {
	key := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(key, []byte("not a PEM key"), 0o600))
	_, err := New(t.Context(), Config{AppID: 1, AppInstallationID: 2, AppPrivateKeyPath: key}, Options{})
	require.ErrorContains(t, err, envKeyPath)
}

func TestSecret_NeverPrinted(t *testing.T) {
	const tok = "ghp_supersecretvalue123"
	cfg := Config{APIURL: "https://api.github.com/", Token: tok}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("config", "cfg", cfg, "token", cfg.Token)
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	c, err := New(t.Context(), cfg, Options{Logger: logger})
	require.NoError(t, err)
	for name, s := range map[string]string{
		"%v":    fmt.Sprintf("%v", cfg),
		"%+v":   fmt.Sprintf("%+v", cfg),
		"%#v":   fmt.Sprintf("%#v", cfg),
		"&%+v":  fmt.Sprintf("%+v", &cfg),
		"tok%s": fmt.Sprintf("%s %v %#v", cfg.Token, cfg.Token, cfg.Token),
		"json":  string(b),
		"slog":  logs.String(),
		"opts":  fmt.Sprintf("%+v", struct{ C Config }{cfg}),
		"c%v":   fmt.Sprintf("%v %+v %#v", c, c, c),
		"ttr":   fmt.Sprintf("%v", &tokenTransport{token: tok, host: "h"}),
	} {
		assert.NotContains(t, s, tok, name)
		assert.NotContains(t, s, "supersecret", name)
	}
	assert.Contains(t, fmt.Sprintf("%v", cfg), redacted)
	assert.True(t, strings.Contains(logs.String(), redacted))
	assert.Equal(t, tok, cfg.Token.Reveal())
}
