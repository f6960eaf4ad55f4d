package feedback

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/github"
)

func TestGit_Environ(t *testing.T) {
	t.Parallel()
	const tok = "ghs_secret0123456789"
	g := &Git{Env: []string{"HOME=/h"}, Token: func(context.Context) (github.Secret, error) { return tok, nil }}
	header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok))
	tests := []struct {
		name    string
		remote  string
		wantKey string // the auth header's config key; "" for none
	}{
		{name: "local command gets no credentials", remote: ""},
		{name: "github.com, scoped to the host", remote: "https://github.com/acme/widgets.git", wantKey: "http.https://github.com/.extraHeader"},
		{name: "enterprise host", remote: "https://ghe.example.com/acme/widgets.git", wantKey: "http.https://ghe.example.com/.extraHeader"},
		{name: "file remote (simulator): scoped to itself, never used", remote: "file:///srv/acme/widgets.git", wantKey: "http.file:///srv/acme/widgets.git.extraHeader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, secrets, err := g.environ(t.Context(), tt.remote)
			require.NoError(t, err)
			cfg := map[string]string{}
			keys := map[string]string{}
			for _, kv := range env {
				name, value, _ := strings.Cut(kv, "=")
				if n, ok := strings.CutPrefix(name, "GIT_CONFIG_KEY_"); ok {
					keys[n] = value
				}
			}
			for _, kv := range env {
				name, value, _ := strings.Cut(kv, "=")
				if n, ok := strings.CutPrefix(name, "GIT_CONFIG_VALUE_"); ok {
					cfg[keys[n]] = value
				}
			}
			assert.Contains(t, env, "HOME=/h")
			assert.Contains(t, env, "GIT_TERMINAL_PROMPT=0")
			assert.Equal(t, "/dev/null", cfg["core.hooksPath"], "hooks never run")
			assert.Equal(t, "false", cfg["core.fsmonitor"])
			if tt.wantKey == "" {
				assert.Empty(t, secrets)
				for k, v := range cfg {
					assert.NotContains(t, k+v, "Authorization")
				}
				return
			}
			assert.Equal(t, header, cfg[tt.wantKey])
			assert.Equal(t, "", cfg["credential.helper"], "no credential helper adds its own")
			assert.Contains(t, secrets, tok, "redacted from git's error output")
		})
	}
}

func TestCheckRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		remote string
		ok     bool
	}{
		{remote: "https://github.com/acme/widgets.git", ok: true},
		{remote: "file:///tmp/sim/acme/widgets.git", ok: true},
		{remote: "-uploadpack=touch /tmp/x"},
		{remote: "ext::sh -c touch% /tmp/pwned"},
		{remote: ""},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			t.Parallel()
			err := checkRemote(tt.remote)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrUnusable)
			}
		})
	}
}
