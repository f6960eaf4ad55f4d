package gitx

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/github"
)

func TestRunner_Environ(t *testing.T) {
	t.Parallel()
	const tok = "ghs_secret0123456789"
	g := &Runner{Env: []string{"HOME=/h"}, Token: func(context.Context) (github.Secret, error) { return tok, nil }}
	header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok))
	tests := []struct {
		name    string
		remote  string
		wantKey string // the auth header's config key; "" for none
	}{
		{name: "local command gets no credentials", remote: ""},
		{name: "github.com, scoped to the host", remote: "https://github.com/acme/widgets.git", wantKey: "http.https://github.com/.extraHeader"},
		{name: "http remote (simulator over HTTP), scoped to the host", remote: "http://127.0.0.1:8080/acme/widgets.git", wantKey: "http.http://127.0.0.1:8080/.extraHeader"},
		{name: "enterprise host", remote: "https://ghe.example.com/acme/widgets.git", wantKey: "http.https://ghe.example.com/.extraHeader"},
		{name: "file remote (simulator): scoped to itself, never used", remote: "file:///srv/acme/widgets.git", wantKey: "http.file:///srv/acme/widgets.git.extraHeader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, secrets, err := g.Environ(t.Context(), tt.remote)
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

// TestRunner_Command: the credential reaches only a command that talks to
// a remote, and only through its environment: never its argv, which
// /proc/<pid>/cmdline shows to everyone on the host.
func TestRunner_Command(t *testing.T) {
	t.Parallel()
	const tok = "ghs_app_installation_token"
	r := &Runner{Bin: "git", Token: func(context.Context) (github.Secret, error) { return tok, nil }}
	header := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))
	tests := []struct {
		name     string
		cmd      Cmd
		wantArgs []string
		wantDir  string
		wantAuth bool
	}{
		{
			name:     "push to an https remote",
			cmd:      Cmd{Args: []string{"push", "-q", "https://github.com/acme/widgets.git", "HEAD:refs/heads/b"}, Dir: "/tmp/x", Remote: "https://github.com/acme/widgets.git"},
			wantArgs: []string{"git", "push", "-q", "https://github.com/acme/widgets.git", "HEAD:refs/heads/b"},
			wantDir:  "/tmp/x", wantAuth: true,
		},
		{
			name:     "local command in a bare repository",
			cmd:      Cmd{Args: []string{"rev-parse", "HEAD"}, GitDir: "/srv/m.git"},
			wantArgs: []string{"git", "--git-dir=/srv/m.git", "rev-parse", "HEAD"},
			wantDir:  "/srv/m.git",
		},
		{
			name:     "no directory",
			cmd:      Cmd{Args: []string{"check-ref-format", "refs/heads/x"}},
			wantArgs: []string{"git", "check-ref-format", "refs/heads/x"},
			wantDir:  "/",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd, secrets, cancel, err := r.command(t.Context(), tt.cmd)
			require.NoError(t, err)
			defer cancel()
			assert.Equal(t, tt.wantArgs, cmd.Args)
			assert.Equal(t, tt.wantDir, cmd.Dir)
			for _, a := range cmd.Args {
				assert.NotContains(t, a, tok)
				assert.NotContains(t, a, header)
			}
			env := strings.Join(cmd.Env, "\n")
			if tt.wantAuth {
				assert.Contains(t, env, "Authorization: Basic "+header)
				assert.Contains(t, secrets, tok)
			} else {
				assert.NotContains(t, env, "Authorization")
				assert.Empty(t, secrets)
			}
		})
	}
}

// TestRunner_Run: a git that fails is an error wrapping ErrGit, with its
// exit status and stderr.
func TestRunner_Run(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := &Runner{}
	_, err := r.Run(t.Context(), Cmd{Args: []string{"init", "-q", "--bare"}, Dir: dir})
	require.NoError(t, err)
	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantExit int
	}{
		{name: "works", args: []string{"rev-parse", "--is-bare-repository"}, wantOut: "true"},
		{name: "fails", args: []string{"rev-parse", "--verify", "-q", "nope"}, wantExit: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := r.Run(t.Context(), Cmd{Args: tt.args, GitDir: dir})
			if tt.wantExit == 0 {
				require.NoError(t, err)
				assert.Equal(t, tt.wantOut, out)
				return
			}
			require.ErrorIs(t, err, ErrGit)
			assert.Equal(t, tt.wantExit, ExitCode(err))
			assert.Contains(t, err.Error(), "git rev-parse --verify -q nope")
		})
	}
}
