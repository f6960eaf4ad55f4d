package github

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// recorded is one exchange of an @octokit/fixtures raw-fixture.json.
type recorded struct {
	Method     string          `json:"method"`
	Path       string          `json:"path"`
	Status     int             `json:"status"`
	Response   json.RawMessage `json:"response"`
	RawHeaders []string        `json:"rawHeaders"`
}

func (r recorded) header() http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(r.RawHeaders); i += 2 {
		h.Add(r.RawHeaders[i], r.RawHeaders[i+1])
	}
	return h
}

func loadFixture(t *testing.T, scenario string) []recorded {
	t.Helper()
	p := filepath.Join("testdata", "fixtures", scenario, "raw-fixture.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err, "recorded GitHub exchanges for scenario %q", scenario)
	var rs []recorded
	require.NoError(t, json.Unmarshal(b, &rs), p)
	require.NotEmpty(t, rs, p)
	return rs
}

// replayServer answers with the recorded exchanges, matching method, path
// and the page parameter (the client asks per_page=100 where the recording
// asked 3, so per_page is ignored). Links to api.github.com point back here.
type replayServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newReplay(t *testing.T, rs []recorded) *replayServer {
	t.Helper()
	s := &replayServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		for _, rec := range rs {
			path, query, _ := strings.Cut(rec.Path, "?")
			if !strings.EqualFold(rec.Method, r.Method) || path != r.URL.Path {
				continue
			}
			q := parseQuery(query)
			if q.Get("page") != r.URL.Query().Get("page") {
				continue
			}
			for k, vs := range rec.header() {
				switch strings.ToLower(k) {
				case "content-length", "connection", "transfer-encoding":
					continue
				}
				for _, v := range vs {
					w.Header().Add(k, strings.ReplaceAll(v, "https://api.github.com", s.URL))
				}
			}
			w.WriteHeader(rec.Status)
			if len(rec.Response) > 0 && string(rec.Response) != `""` {
				_, _ = w.Write(rec.Response)
			}
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(s.Close)
	return s
}

func parseQuery(q string) interface{ Get(string) string } {
	req, _ := http.NewRequest("GET", "/?"+q, nil)
	return req.URL.Query()
}

func TestFixtures_PaginateIssues(t *testing.T) {
	t.Parallel()
	rs := loadFixture(t, "paginate-issues")
	var gets []recorded
	for _, r := range rs {
		if r.Method == "get" {
			gets = append(gets, r)
		}
	}
	require.Len(t, gets, 5, "the recording pages 13 issues by 3")
	first := strings.Split(strings.TrimPrefix(gets[0].Path, "/repos/"), "/")
	repo := ghref.Repo{Owner: first[0], Name: first[1]}

	srv := newReplay(t, rs)
	c, _ := newTestClient(t, srv.URL, "0000000000000000000000000000000000000001", Config{}, Options{})
	issues, err := c.ListIssues(t.Context(), repo, IssueListOptions{})
	require.NoError(t, err)
	require.Len(t, issues, 13)
	for i, is := range issues {
		assert.Equal(t, 13-i, is.GetNumber(), "issues in recorded order")
		assert.False(t, is.IsPull())
		assert.NotNil(t, is.Reactions, "the reactions rollup decodes")
		assert.Equal(t, 0, is.ReactionCounts().GetTotalCount())
	}
	srv.mu.Lock()
	hits := append([]string(nil), srv.hits...)
	srv.mu.Unlock()
	require.Len(t, hits, 5, "one request per page, following Link rel=next")
	assert.Contains(t, hits[0], "per_page=100")
	assert.Contains(t, hits[1], "/repositories/515435940/issues?per_page=3&page=2", "the Link URL is followed as given")
	assert.Contains(t, hits[4], "page=5")

	last := gets[len(gets)-1].header()
	rl := c.RateLimits()["core"]
	assert.Equal(t, last.Get("X-RateLimit-Remaining"), strconv.Itoa(rl.Remaining))
	assert.Equal(t, last.Get("X-RateLimit-Limit"), strconv.Itoa(rl.Limit))
	assert.Equal(t, last.Get("X-RateLimit-Used"), strconv.Itoa(rl.Used))
	assert.Equal(t, last.Get("X-RateLimit-Reset"), strconv.FormatInt(rl.Reset.Unix(), 10))
	assert.Equal(t, "core", rl.Resource)
	assert.Equal(t, int64(5), c.Stats().Requests)
}

func TestFixtures_Errors(t *testing.T) {
	t.Parallel()
	rs := append(loadFixture(t, "errors"), loadFixture(t, "branch-protection")...)
	srv := newReplay(t, rs)
	c, rec := newTestClient(t, srv.URL, "0000000000000000000000000000000000000001", Config{}, Options{})

	var labelPath string
	for _, r := range rs {
		if r.Status == 422 {
			labelPath = r.Path
		}
	}
	require.NotEmpty(t, labelPath, "errors scenario records a 422")
	_, _, err := doJSON[map[string]any](t.Context(), c, http.MethodPost, strings.TrimPrefix(labelPath, "/"), map[string]string{"name": "foo", "color": "invalid"}, false)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, ErrValidation)
	assert.Equal(t, "Validation Failed", ve.Message)
	require.Len(t, ve.Errors, 1)
	assert.Equal(t, "Label", ve.Errors[0].Resource)
	assert.Equal(t, "color", ve.Errors[0].Field)
	assert.Equal(t, "invalid", ve.Errors[0].Code)
	assert.Contains(t, err.Error(), "POST "+labelPath)
	assert.NotContains(t, err.Error(), "0000000000000000000000000000000000000001")

	var protPath, protRemaining string
	for _, r := range rs {
		if r.Status == 404 {
			protPath, protRemaining = r.Path, r.header().Get("X-RateLimit-Remaining")
		}
	}
	require.NotEmpty(t, protPath)
	_, _, err = doJSON[map[string]any](t.Context(), c, http.MethodGet, strings.TrimPrefix(protPath, "/"), nil, true)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "Branch not protected")
	assert.Contains(t, err.Error(), "GET "+protPath)

	assert.Empty(t, rec.got(), "no waits or retries for 4xx")
	assert.Zero(t, c.Stats().Retries)
	assert.Equal(t, protRemaining, strconv.Itoa(c.RateLimits()["core"].Remaining), "rate limits are read from error responses too")
}
