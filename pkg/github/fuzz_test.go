package github

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// bodyTransport answers every first page with body and every later page
// with an empty list, without a network.
type bodyTransport struct{ body []byte }

func (b *bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body := b.body
	if r.URL.Query().Get("page") != "" {
		body = []byte("[]")
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    r,
	}, nil
}

// FuzzSummaries: the client decodes whatever GitHub answers a list of pull
// requests or issues with (truncated, malformed, odd types) without a
// panic: a body that is not a JSON list of summaries is an error, one that
// is gives exactly what encoding/json gives. arrayLen, which decides
// whether to ask for the next page without decoding, counts a JSON array's
// elements right, and a remembered (S2-compressed) body comes back
// byte-identical. Seeds: testdata/fuzz/FuzzSummaries; run with
// `go test -run '^$' -fuzz '^FuzzSummaries$' -fuzztime 3s .`.
func FuzzSummaries(f *testing.F) {
	f.Add([]byte(`[{"number":1,"state":"open","draft":false,"title":"t","created_at":"2026-01-02T03:04:05Z","user":{"login":"a","type":"Bot"},"head":{"sha":"abc","ref":"f"},"base":{"ref":"main"},"labels":[{"name":"x"}]}]`))
	f.Add([]byte(`[{"number":2,"updated_at":"2026-01-02T03:04:05Z","comments":3,"pull_request":{"url":"u"},"reactions":{"+1":1,"eyes":2}}]`))
	f.Add([]byte(`[{"number":1,"title":"a\"],[\\"}, {"number":2}]`))
	f.Add([]byte(`[{"number":1,"created_at":"not a time"}]`))
	f.Add([]byte(`[{"number":1,"sta`))
	f.Add([]byte(`{"message":"Not Found"}`))
	f.Add([]byte(` [ ] `))
	f.Add([]byte(`[1, "x", null]`))
	f.Add([]byte(`null`))
	f.Add([]byte("<html>502 Bad Gateway</html>"))
	tr := &bodyTransport{}
	c, err := New(context.Background(), Config{APIURL: "https://api.example.test", Token: "t"},
		Options{Transport: tr, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f, err)
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	f.Fuzz(func(t *testing.T, body []byte) {
		tr.body = body
		var raw []json.RawMessage
		isList := json.Unmarshal(body, &raw) == nil && raw != nil
		if isList {
			require.Equal(t, len(raw), arrayLen(body), "arrayLen of %q", body)
		}

		pulls, _, err := c.ListPullSummariesIfChanged(t.Context(), repo, "open", "")
		requireDecodedLike(t, body, pulls, err)
		issues, _, err := c.ListIssueSummariesIfChanged(t.Context(), repo, IssueListOptions{State: "open"}, "")
		requireDecodedLike(t, body, issues, err)

		h := http.Header{"Etag": {`"v"`}, "Content-Type": {"application/json"}}
		if e := newEntry("k", h, body); e != nil {
			got, err := (&lazySink{lazy: &cachedBody{compressed: e.body}}).Bytes()
			require.NoError(t, err)
			require.True(t, bytes.Equal(body, got), "remembered body changed")
			require.Equal(t, arrayLen(body), e.items)
		} else {
			require.False(t, json.Valid(body), "a valid JSON body was not remembered")
		}
	})
}

// requireDecodedLike fails unless the client's list decoded from body (got,
// err) is what encoding/json makes of body: an error for anything that is
// not a list of T, the same items otherwise.
func requireDecodedLike[T any](t *testing.T, body []byte, got []T, err error) {
	t.Helper()
	var want []T
	if json.Unmarshal(body, &want) != nil {
		require.Error(t, err, "decoded %q", body)
		return
	}
	if len(want) >= 30 { // a full page: the client asked for a next one
		return
	}
	require.NoError(t, err)
	require.Len(t, got, len(want))
	if len(want) > 0 {
		require.Equal(t, want, got)
	}
}
