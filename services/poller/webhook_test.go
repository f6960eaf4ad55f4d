package poller

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

type kicks struct {
	mu    sync.Mutex
	prs   []string
	heads []string
}

func (k *kicks) Kick(pr ghref.PR) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.prs = append(k.prs, pr.String())
}

func (k *kicks) KickHead(repo ghref.Repo, sha string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.heads = append(k.heads, repo.String()+"@"+sha)
}

func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestWebhook_Signature(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret-webhook")
	body := []byte(`{"action":"created","repository":{"name":"socket.io","owner":{"login":"acme"}},"issue":{"number":4,"pull_request":{"url":"x"}}}`)
	tests := []struct {
		name     string
		sig      string
		want     int
		wantKick []string
	}{
		{name: "valid", sig: sign(secret, body), want: http.StatusAccepted, wantKick: []string{"acme/socket.io#4"}},
		{name: "missing", sig: "", want: http.StatusUnauthorized},
		{name: "wrong secret", sig: sign([]byte("other"), body), want: http.StatusUnauthorized},
		{name: "sha1 form", sig: "sha1=" + hex.EncodeToString(make([]byte, 20)), want: http.StatusUnauthorized},
		{name: "not hex", sig: "sha256=zz", want: http.StatusUnauthorized},
		{name: "signature of other body", sig: sign(secret, append(body, ' ')), want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := &kicks{}
			h := WebhookHandler(secret, k, quietLog())
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			if tt.sig != "" {
				req.Header.Set("X-Hub-Signature-256", tt.sig)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tt.want, rec.Code)
			assert.Equal(t, tt.wantKick, k.prs, "nothing changes without a valid signature")
		})
	}
}

// TestWebhook_Payloads replays GitHub's own example payloads from the
// webhook schemas and checks which PR each one triggers.
func TestWebhook_Payloads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, event, body string
		wantPRs           []string
		wantHeads         []string
	}{
		{name: "pull_request", event: "pull_request", body: `{"action":"synchronize","number":7,"pull_request":{"number":7},"repository":{"name":"w","owner":{"login":"acme"}}}`, wantPRs: []string{"acme/w#7"}},
		{name: "review", event: "pull_request_review", body: `{"action":"submitted","pull_request":{"number":8},"repository":{"name":"w","owner":{"login":"acme"}}}`, wantPRs: []string{"acme/w#8"}},
		{name: "review comment", event: "pull_request_review_comment", body: `{"pull_request":{"number":9},"repository":{"name":"w","owner":{"login":"acme"}}}`, wantPRs: []string{"acme/w#9"}},
		{name: "comment on an issue is ignored", event: "issue_comment", body: `{"issue":{"number":3},"repository":{"name":"w","owner":{"login":"acme"}}}`},
		{name: "check suite", event: "check_suite", body: `{"check_suite":{"head_sha":"abc","pull_requests":[{"number":2}]},"repository":{"name":"w","owner":{"login":"acme"}}}`, wantPRs: []string{"acme/w#2"}},
		{name: "check suite without PRs", event: "check_suite", body: `{"check_suite":{"head_sha":"abc","pull_requests":[]},"repository":{"name":"w","owner":{"login":"acme"}}}`, wantHeads: []string{"acme/w@abc"}},
		{name: "status", event: "status", body: `{"sha":"def","repository":{"name":"w","owner":{"login":"acme"}}}`, wantHeads: []string{"acme/w@def"}},
		{name: "other event", event: "push", body: `{"ref":"refs/heads/main"}`},
	}
	secret := []byte("k")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := &kicks{}
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader([]byte(tt.body)))
			req.Header.Set("X-GitHub-Event", tt.event)
			req.Header.Set("X-Hub-Signature-256", sign(secret, []byte(tt.body)))
			rec := httptest.NewRecorder()
			WebhookHandler(secret, k, quietLog()).ServeHTTP(rec, req)
			assert.Equal(t, http.StatusAccepted, rec.Code)
			assert.Equal(t, tt.wantPRs, k.prs)
			assert.Equal(t, tt.wantHeads, k.heads)
		})
	}
}

func TestWebhook_MalformedAndHostile(t *testing.T) {
	t.Parallel()
	secret := []byte("k")
	for _, body := range []string{`{"pull_request":`, `{"pull_request":{"number":1},"repository":{"name":"../../etc","owner":{"login":"a b"}}}`} {
		k := &kicks{}
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader([]byte(body)))
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-Hub-Signature-256", sign(secret, []byte(body)))
		rec := httptest.NewRecorder()
		WebhookHandler(secret, k, quietLog()).ServeHTTP(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code, body)
		assert.Empty(t, k.prs)
	}
}

// TestWebhook_PayloadFieldsMatchGitHubSchemas checks, against GitHub's
// published webhook schemas, that every field the receiver reads exists in
// each accepted event with the type it is decoded as.
func TestWebhook_PayloadFieldsMatchGitHubSchemas(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "webhooks-openapi.json"))
	require.NoError(t, err, "GitHub's webhook schemas (testdata/README.md says where they come from)")
	var doc struct {
		Webhooks map[string]struct {
			Post struct {
				RequestBody struct {
					Content map[string]struct {
						Schema map[string]any `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			} `json:"post"`
		} `json:"webhooks"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	common := map[string]string{"repository.name": "string", "repository.owner.login": "string"}
	read := map[string]map[string]string{
		"pull-request-opened":                 {"pull_request.number": "integer"},
		"pull-request-synchronize":            {"pull_request.number": "integer"},
		"pull-request-closed":                 {"pull_request.number": "integer"},
		"pull-request-reopened":               {"pull_request.number": "integer"},
		"pull-request-review-submitted":       {"pull_request.number": "integer"},
		"pull-request-review-comment-created": {"pull_request.number": "integer"},
		"issue-comment-created":               {"issue.number": "integer", "issue.pull_request": "object"},
		"check-suite-completed":               {"check_suite.head_sha": "string", "check_suite.pull_requests[].number": "integer"},
		"status":                              {"sha": "string"},
	}
	for hook, fields := range read {
		schema := doc.Webhooks[hook].Post.RequestBody.Content["application/json"].Schema
		require.NotNil(t, schema, "webhook %s missing from the schemas", hook)
		for path, typ := range fields {
			assert.Contains(t, schemaTypes(schema, strings.Split(path, ".")), typ, "%s: %s", hook, path)
		}
		for path, typ := range common {
			assert.Contains(t, schemaTypes(schema, strings.Split(path, ".")), typ, "%s: %s", hook, path)
		}
	}
}

// schemaTypes returns the types a dotted path can have in a JSON schema,
// following properties, array items ("x[]") and allOf/anyOf/oneOf.
func schemaTypes(s map[string]any, path []string) []string {
	var out []string
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := s[key].([]any); ok {
			for _, sub := range subs {
				if m, ok := sub.(map[string]any); ok {
					out = append(out, schemaTypes(m, path)...)
				}
			}
		}
	}
	if len(path) == 0 {
		switch t := s["type"].(type) {
		case string:
			out = append(out, t)
		case []any:
			for _, x := range t {
				out = append(out, fmt.Sprint(x))
			}
		}
		return out
	}
	name, isArray := strings.CutSuffix(path[0], "[]")
	props, _ := s["properties"].(map[string]any)
	child, ok := props[name].(map[string]any)
	if !ok {
		return out
	}
	if isArray {
		items, ok := child["items"].(map[string]any)
		if !ok {
			return out
		}
		child = items
	}
	return append(out, schemaTypes(child, path[1:])...)
}
