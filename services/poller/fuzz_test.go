package poller

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// kickLog records kicks; a fuzz iteration runs on one goroutine.
type kickLog struct{ n int }

func (k *kickLog) Kick(ghref.PR)               { k.n++ }
func (k *kickLog) KickHead(ghref.Repo, string) { k.n++ }

// FuzzWebhook: a body signed with the secret verifies, and changing any one
// byte of the body, the secret or the MAC fails; a header that verifies
// carries exactly the MAC; an unsigned or wrongly signed delivery is a 401
// that kicks nothing; a signed one kicks only valid PRs or heads and
// answers 400 for a malformed payload of an event prloop reads. Seeds:
// testdata/fuzz/FuzzWebhook; run with
// `go test -run '^$' -fuzz '^FuzzWebhook$' -fuzztime 3s .`.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte("s3cret"), []byte(`{"repository":{"name":"widgets","owner":{"login":"acme"}},"pull_request":{"number":42}}`), "pull_request", uint(0), byte(1), "sha256=00")
	f.Add([]byte("k"), []byte(`{"repository":{"name":"w","owner":{"login":"a"}},"issue":{"number":3,"pull_request":{}}}`), "issue_comment", uint(5), byte(0x80), "")
	f.Add([]byte("k"), []byte(`{"repository":{"name":"w","owner":{"login":"a"}},"check_suite":{"head_sha":"abc","pull_requests":[]}}`), "check_suite", uint(9), byte(0xff), "sha1=00")
	f.Add([]byte("k"), []byte(`{"repository":{"name":"..","owner":{"login":"-"}},"sha":"abc"}`), "status", uint(1), byte(2), "sha256=ZZ")
	f.Add([]byte(""), []byte(`{}`), "ping", uint(0), byte(1), "sha256=")
	f.Add([]byte("k"), []byte(`{"repository":{"name":"w","owner":{"login":"a"}},"pull_req`), "pull_request_review", uint(7), byte(3), "sha256=")
	f.Fuzz(func(t *testing.T, secret, body []byte, event string, pos uint, delta byte, header string) {
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		sum := mac.Sum(nil)
		sig := "sha256=" + hex.EncodeToString(sum)

		if len(secret) == 0 {
			require.False(t, validSignature(secret, body, sig), "an empty secret verified a delivery")
		} else {
			require.True(t, validSignature(secret, body, sig))
			if delta != 0 {
				if len(body) > 0 {
					b := bytes.Clone(body)
					b[pos%uint(len(b))] ^= delta
					require.False(t, validSignature(secret, b, sig), "a changed body verified")
				}
				s := bytes.Clone(secret)
				s[pos%uint(len(s))] ^= delta
				require.False(t, validSignature(s, body, sig), "a changed secret verified")
				m := bytes.Clone(sum)
				m[pos%uint(len(m))] ^= delta
				require.False(t, validSignature(secret, body, "sha256="+hex.EncodeToString(m)), "a changed MAC verified")
			}
		}
		if validSignature(secret, body, header) {
			got, err := hex.DecodeString(header[len("sha256="):])
			require.NoError(t, err)
			require.Equal(t, sum, got, "header %q verified without carrying the MAC", header)
		}

		targets, err := webhookTargets(event, body)
		for _, tg := range targets {
			require.NoError(t, tg.repo.Validate())
			require.True(t, tg.number > 0 || tg.sha != "", "target %+v names no PR or head", tg)
		}
		if err == nil && len(targets) > 0 {
			require.True(t, json.Valid(body))
		}

		for _, tc := range []struct {
			header string
			signed bool
		}{{sig, len(secret) > 0}, {header, validSignature(secret, body, header)}} {
			k := &kickLog{}
			h := WebhookHandler(secret, k, slog.New(slog.DiscardHandler))
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", event)
			req.Header.Set("X-Hub-Signature-256", tc.header)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			switch {
			case !tc.signed:
				require.Equal(t, http.StatusUnauthorized, rec.Code)
				require.Zero(t, k.n, "an unsigned delivery kicked")
			case err != nil:
				require.Equal(t, http.StatusBadRequest, rec.Code)
				require.Zero(t, k.n)
			default:
				require.Equal(t, http.StatusAccepted, rec.Code)
				require.Equal(t, len(targets), k.n)
			}
		}
	})
}
