package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

func TestNew_AppInstallationAuth(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPath := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))

	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+strings.SplitN(auth, " ", 2)[0])
		mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/v3/app/installations/77/access_tokens":
			if !strings.HasPrefix(auth, "Bearer ") {
				w.WriteHeader(401)
				return
			}
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"token":"ghs_installation_token","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		case r.URL.Path == "/api/v3/repos/o/r" && auth == "token ghs_installation_token":
			fmt.Fprint(w, `{"id":1,"full_name":"o/r"}`)
		default:
			w.WriteHeader(401)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
		}
	}))
	t.Cleanup(srv.Close)

	cfg := Config{APIURL: srv.URL + "/api/v3", AppID: 5, AppInstallationID: 77, AppPrivateKeyPath: keyPath}
	c, err := New(t.Context(), cfg, Options{Logger: bufferLogger(&syncBuffer{})})
	require.NoError(t, err)
	assert.True(t, c.IsApp(), "an App installation may write check runs")
	r, err := c.GetRepo(t.Context(), ghref.Repo{Owner: "o", Name: "r"})
	require.NoError(t, err)
	assert.Equal(t, "o/r", r.GetFullName())
	_, err = c.GetRepo(t.Context(), ghref.Repo{Owner: "o", Name: "r"})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"POST /api/v3/app/installations/77/access_tokens Bearer",
		"GET /api/v3/repos/o/r token",
		"GET /api/v3/repos/o/r token",
	}, seen, "one installation token, reused")
}

// TestAccess_AppInstallation: an App's permissions are those GitHub
// returns with the installation token ("Create an installation access
// token for an app",
// https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app:
// the response's "permissions"); an installation GitHub refuses to mint a
// token for is ErrUnauthorized.
func TestAccess_AppInstallation(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPath := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/app/installations/77/access_tokens":
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"token":"ghs_t","expires_at":%q,"permissions":{"contents":"read","pull_requests":"write","metadata":"read"}}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		case r.Method == "POST" && r.URL.Path == "/app/installations/78/access_tokens":
			w.WriteHeader(401)
			fmt.Fprint(w, `{"message":"A JSON web token could not be decoded"}`)
		case r.URL.Path == "/rate_limit" && r.Header.Get("Authorization") == "token ghs_t":
			fmt.Fprint(w, `{"resources":{}}`)
		default:
			w.WriteHeader(401)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name         string
		installation int64
		want         Access
		err          error
	}{
		{name: "installation", installation: 77, want: Access{App: true, Permissions: map[string]string{"contents": "read", "pull_requests": "write", "metadata": "read"}}},
		{name: "refused installation", installation: 78, err: ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(t.Context(), Config{APIURL: srv.URL, AppID: 5, AppInstallationID: tt.installation, AppPrivateKeyPath: keyPath}, Options{Logger: bufferLogger(&syncBuffer{})})
			require.NoError(t, err)
			got, err := c.Access(t.Context())
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, "GitHub App", got.Kind())
		})
	}
}
