package github

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

func TestRouteOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, base, path, want string
	}{
		{name: "repo", method: "GET", base: "/", path: "/repos/o/r", want: "GET /repos/{owner}/{repo}"},
		{name: "pulls", method: "GET", base: "/", path: "/repos/o/r/pulls", want: "GET /repos/{owner}/{repo}/pulls"},
		{name: "pull", method: "GET", base: "/", path: "/repos/o/r/pulls/12", want: "GET /repos/{owner}/{repo}/pulls/{pull_number}"},
		{name: "merge", method: "PUT", base: "/", path: "/repos/o/r/pulls/12/merge", want: "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"},
		{name: "update branch", method: "PUT", base: "/", path: "/repos/o/r/pulls/1/update-branch", want: "PUT /repos/{owner}/{repo}/pulls/{pull_number}/update-branch"},
		{name: "reaction", method: "DELETE", base: "/", path: "/repos/o/r/issues/3/reactions/99", want: "DELETE /repos/{owner}/{repo}/issues/{issue_number}/reactions/{reaction_id}"},
		{name: "label", method: "DELETE", base: "/", path: "/repos/o/r/issues/3/labels/needs%20review", want: "DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"},
		{name: "issue comments", method: "GET", base: "/", path: "/repos/o/r/issues/3/comments", want: "GET /repos/{owner}/{repo}/issues/{issue_number}/comments"},
		{name: "comment by id", method: "GET", base: "/", path: "/repos/o/r/issues/comments/5", want: "GET /repos/{owner}/{repo}/issues/comments/{comment_id}"},
		{name: "status", method: "GET", base: "/", path: "/repos/o/r/commits/abc/status", want: "GET /repos/{owner}/{repo}/commits/{ref}/status"},
		{name: "check runs", method: "GET", base: "/", path: "/repos/o/r/commits/abc/check-runs", want: "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"},
		{name: "branch rules", method: "GET", base: "/", path: "/repos/o/r/rules/branches/release/1.x", want: "GET /repos/{owner}/{repo}/rules/branches/{branch}"},
		{name: "compare", method: "GET", base: "/", path: "/repos/o/r/compare/main...feature/x", want: "GET /repos/{owner}/{repo}/compare/{basehead}"},
		{name: "contents", method: "GET", base: "/", path: "/repos/o/r/contents/.github/prloop.yml", want: "GET /repos/{owner}/{repo}/contents/{path}"},
		{name: "team membership", method: "GET", base: "/", path: "/orgs/acme/teams/core/memberships/alice", want: "GET /orgs/{org}/teams/{team_slug}/memberships/{username}"},
		{name: "permission", method: "GET", base: "/", path: "/repos/o/r/collaborators/bob/permission", want: "GET /repos/{owner}/{repo}/collaborators/{username}/permission"},
		{name: "ref", method: "DELETE", base: "/", path: "/repos/o/r/git/refs/heads/feature/x", want: "DELETE /repos/{owner}/{repo}/git/refs/{ref}"},
		{name: "enterprise prefix", method: "GET", base: "/api/v3/", path: "/api/v3/repos/o/r/pulls", want: "GET /repos/{owner}/{repo}/pulls"},
		{name: "user", method: "GET", base: "/", path: "/user", want: "GET /user"},
		{name: "root", method: "GET", base: "/", path: "/", want: "GET /"},
		{name: "repositories id", method: "GET", base: "/", path: "/repositories/515435940/issues", want: "GET /repositories/{repository_id}/issues"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, routeOf(tt.method, tt.base, tt.path))
		})
	}
}

func TestDefaultBackoff_Ranges(t *testing.T) {
	t.Parallel()
	for n, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := DefaultBackoff(n + 1)
			require.GreaterOrEqual(t, d, base, "retry %d", n+1)
			require.LessOrEqual(t, d, base+base/4, "retry %d", n+1)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 1, "retry %d has jitter", n+1)
	}
}

func TestLRU_EvictsOldestByBytes(t *testing.T) {
	t.Parallel()
	c := newLRU(300)
	mk := func(k string, n int) *cacheEntry {
		return &cacheEntry{key: k, etag: `"x"`, body: make([]byte, n), size: int64(n)}
	}
	c.put(mk("a", 100))
	c.put(mk("b", 100))
	c.put(mk("c", 100))
	require.NotNil(t, c.get("a")) // a is now most recent; b is oldest
	c.put(mk("d", 100))
	assert.Nil(t, c.get("b"), "least recently used evicted")
	assert.NotNil(t, c.get("a"))
	assert.NotNil(t, c.get("c"))
	assert.NotNil(t, c.get("d"))
	n, size := c.stats()
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(300), size)
	c.put(mk("huge", 1000))
	assert.Nil(t, c.get("huge"), "an entry larger than the cache is not kept")
	n, _ = c.stats()
	assert.Equal(t, 3, n, "and evicts nothing")
}

func TestCacheKey_VariesOnAcceptAndCredential(t *testing.T) {
	t.Parallel()
	req := func(accept, auth string) *http.Request {
		r := httptest.NewRequest("GET", "https://api.github.com/repos/o/r", nil)
		r.Header.Set("Accept", accept)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	a := cacheKey(req("application/json", "Bearer one"))
	assert.NotEqual(t, a, cacheKey(req("application/json", "Bearer two")))
	assert.NotEqual(t, a, cacheKey(req("application/vnd.github.raw", "Bearer one")))
	assert.Equal(t, a, cacheKey(req("application/json", "Bearer one")))
	assert.NotContains(t, a, "one", "the key holds a hash of the credential, not the credential")
}

// TestConditional_HeaderSequence checks the exact validators sent and that a
// 304 comes back as the remembered body with the 304's rate-limit headers.
func TestConditional_HeaderSequence(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("If-None-Match")+"|"+r.Header.Get("If-Modified-Since"))
		n := len(seen)
		mu.Unlock()
		w.Header().Set("Cache-Control", "private, max-age=3600")
		w.Header().Set("X-RateLimit-Remaining", fmt.Sprint(100-n))
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Resource", "core")
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": 7, "full_name": "o/r"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	for i := range 3 {
		r, err := c.GetRepo(t.Context(), ghref.Repo{Owner: "o", Name: "r"})
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, int64(7), r.GetID())
		assert.Equal(t, "o/r", r.GetFullName())
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"|",
		`"v1"|Mon, 02 Jan 2006 15:04:05 GMT`,
		`"v1"|Mon, 02 Jan 2006 15:04:05 GMT`,
	}, seen, "max-age is never trusted: every call asks the server, with validators after the first")
	st := c.Stats()
	assert.Equal(t, int64(3), st.Requests)
	assert.Equal(t, int64(2), st.NotModified)
	assert.Equal(t, int64(2), st.Routes[RouteOutcome{"GET /repos/{owner}/{repo}", OutcomeNotModified}])
	assert.Equal(t, int64(1), st.Routes[RouteOutcome{"GET /repos/{owner}/{repo}", OutcomeOK}])
	assert.Equal(t, 97, c.RateLimits()["core"].Remaining, "rate limits come from the 304, not the cached 200")
}

func TestConditional_WritesAndErrorsNotCached(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var inm []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inm = append(inm, r.Method+" "+r.Header.Get("If-None-Match"))
		mu.Unlock()
		w.Header().Set("ETag", `"e"`)
		if r.Method == "GET" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":1,"body":"hi"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	pr := ghref.PR{Owner: "o", Repo: "r", Number: 1}
	for range 2 {
		_, err := c.CreateIssueComment(t.Context(), pr, "hi")
		require.NoError(t, err)
		_, err = c.GetPull(t.Context(), pr)
		require.ErrorIs(t, err, ErrNotFound)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"POST ", "GET ", "POST ", "GET "}, inm)
}

func TestErrors_TypedAndNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		sentinel error
		contains []string
	}{
		{name: "401", status: 401, body: `{"message":"Bad credentials"}`, sentinel: ErrUnauthorized, contains: []string{"GET /repos/o/r/pulls/1", "401", "Bad credentials"}},
		{name: "403 permission", status: 403, body: `{"message":"Resource not accessible by integration"}`, sentinel: ErrForbidden, contains: []string{"403 forbidden"}},
		{name: "404", status: 404, body: `{"message":"Not Found"}`, sentinel: ErrNotFound, contains: []string{"404 not found"}},
		{name: "405", status: 405, body: `{"message":"Pull Request is not mergeable"}`, sentinel: ErrNotMergeable},
		{name: "409", status: 409, body: `{"message":"Head branch was modified"}`, sentinel: ErrConflict},
		{name: "422", status: 422, body: `{"message":"Validation Failed","errors":[{"resource":"Label","code":"invalid","field":"color"}]}`, sentinel: ErrValidation, contains: []string{"Label color invalid"}},
		{name: "501 not retried", status: 501, body: `{"message":"nope"}`, sentinel: ErrServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits int
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-RateLimit-Remaining", "4000")
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c, rec := newTestClient(t, srv.URL, "tok", Config{}, Options{})
			_, err := c.GetPull(t.Context(), ghref.PR{Owner: "o", Repo: "r", Number: 1})
			require.ErrorIs(t, err, tt.sentinel)
			for _, s := range tt.contains {
				assert.Contains(t, err.Error(), s)
			}
			var ae *APIError
			var ve *ValidationError
			if tt.status == 422 {
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, "Validation Failed", ve.Message)
				require.Len(t, ve.Errors, 1)
				assert.Equal(t, "color", ve.Errors[0].Field)
			} else {
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, tt.status, ae.Status)
				assert.Equal(t, "GET", ae.Method)
			}
			assert.False(t, errors.Is(err, ErrRateLimited))
			mu.Lock()
			assert.Equal(t, 1, hits, "4xx are not retried")
			mu.Unlock()
			assert.Empty(t, rec.got())
			assert.Zero(t, c.Stats().Retries)
		})
	}
}

func TestPagination_RefusesForeignHost(t *testing.T) {
	t.Parallel()
	var evilHits int
	var mu sync.Mutex
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		evilHits++
		mu.Unlock()
		fmt.Fprint(w, `[]`)
	}))
	t.Cleanup(evil.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", `<`+evil.URL+`/repos/o/r/pulls?page=2>; rel="next"`)
		fmt.Fprint(w, `[{"number":1}]`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	_, err := c.ListPulls(t.Context(), ghref.Repo{Owner: "o", Name: "r"}, "open")
	require.ErrorContains(t, err, "leaves the API host")
	mu.Lock()
	assert.Zero(t, evilHits)
	mu.Unlock()
}

func TestToken_NotSentToOtherHosts(t *testing.T) {
	t.Parallel()
	var otherAuth string
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherAuth = r.Header.Get("Authorization")
		mu.Unlock()
		fmt.Fprint(w, `{"id":1}`)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok_main" {
			w.WriteHeader(401)
			return
		}
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok_main", Config{}, Options{})
	_, err := c.GetRepo(t.Context(), ghref.Repo{Owner: "o", Name: "r"})
	require.NoError(t, err)
	mu.Lock()
	assert.Empty(t, otherAuth)
	mu.Unlock()
}

func TestErrors_ScrubEchoedToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(422)
		fmt.Fprintf(w, `{"message":"bad header %s","errors":[{"message":"%s"}]}`, r.Header.Get("Authorization"), r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "ghp_echoedtoken", Config{}, Options{})
	_, err := c.EditPull(t.Context(), ghref.PR{Owner: "o", Repo: "r", Number: 2}, PullEdit{})
	require.ErrorIs(t, err, ErrValidation)
	assert.NotContains(t, err.Error(), "ghp_echoedtoken")
	assert.Contains(t, err.Error(), redacted)
}

func TestBadInput_ClearErrorsNoRequest(t *testing.T) {
	t.Parallel()
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	ctx := t.Context()
	_, err := c.GetPull(ctx, ghref.PR{Owner: "o", Repo: "../etc", Number: 1})
	require.ErrorIs(t, err, ghref.ErrInvalid)
	_, err = c.GetPull(ctx, ghref.PR{Owner: "o", Repo: "r"})
	require.ErrorIs(t, err, ghref.ErrInvalid)
	_, err = c.Merge(ctx, ghref.PR{Owner: "o", Repo: "r", Number: 1}, MergeOptions{Method: "fast-forward"})
	require.ErrorContains(t, err, "want merge, squash or rebase")
	err = c.DeleteBranch(ctx, ghref.Repo{Owner: "o", Name: "r"}, "")
	require.ErrorContains(t, err, "empty branch")
	mu.Lock()
	assert.Zero(t, hits)
	mu.Unlock()
}

func TestWebURL(t *testing.T) {
	t.Parallel()
	for api, web := range map[string]string{
		"https://api.github.com/":         "https://github.com",
		"https://ghe.example.com/api/v3":  "https://ghe.example.com",
		"http://127.0.0.1:8080":           "http://127.0.0.1:8080",
		"https://ghe.example.com/api/v3/": "https://ghe.example.com",
	} {
		c, _ := newTestClient(t, api, "tok", Config{}, Options{})
		assert.Equal(t, web, c.WebURL(), api)
		assert.True(t, strings.HasSuffix(c.BaseURL(), "/"), api)
	}
}

func TestListIssues_Query(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.URL.RawQuery
		mu.Unlock()
		fmt.Fprint(w, `[{"number":1,"reactions":{"total_count":3,"+1":2,"eyes":1},"pull_request":{"url":"x"}}]`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	is, err := c.ListIssues(t.Context(), ghref.Repo{Owner: "o", Name: "r"}, IssueListOptions{State: "all", Since: since, Labels: []string{"a b", "c"}})
	require.NoError(t, err)
	require.Len(t, is, 1)
	assert.True(t, is[0].IsPull())
	assert.Equal(t, 2, is[0].ReactionCounts().GetPlusOne())
	assert.Equal(t, 3, is[0].ReactionCounts().GetTotalCount())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "labels=a+b%2Cc&per_page=100&since=2026-01-02T02%3A04%3A05Z&state=all", got)
}

func TestRateLimit_PermissionTextNotMistaken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		header     map[string]string
		limited    bool
	}{
		{name: "abuse-blocked repo", body: `{"message":"Repository access blocked due to abuse"}`},
		{name: "integration", body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`},
		{name: "remaining nonzero", body: `{"message":"Must have admin rights"}`, header: map[string]string{"X-RateLimit-Remaining": "4999", "Retry-After": "5"}},
		{name: "secondary by doc url", body: `{"message":"You have triggered an abuse detection mechanism.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"}`, limited: true},
		{name: "primary", body: `{"message":"API rate limit exceeded"}`, header: map[string]string{"X-RateLimit-Remaining": "0"}, limited: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(403)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c, rec := newTestClient(t, srv.URL, "tok", Config{MaxRateLimitWait: -1}, Options{})
			_, err := c.GetRepo(t.Context(), ghref.Repo{Owner: "o", Name: "r"})
			require.Error(t, err)
			assert.Equal(t, tt.limited, errors.Is(err, ErrRateLimited), err.Error())
			assert.Equal(t, !tt.limited, errors.Is(err, ErrForbidden), err.Error())
			assert.Empty(t, rec.got())
			assert.Equal(t, int64(1), c.Stats().Requests)
		})
	}
}

func TestRateLimitError_RetryAt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	reset := at.Add(40 * time.Minute)
	for _, tc := range []struct {
		name string
		err  RateLimitError
		want time.Time
	}{
		{name: "primary: a second past the reset", err: RateLimitError{Reset: reset, Wait: time.Minute, At: at}, want: reset.Add(time.Second)},
		{name: "secondary: Retry-After from when it was met", err: RateLimitError{Secondary: true, Reset: reset, Wait: 42 * time.Second, At: at}, want: at.Add(42 * time.Second)},
		{name: "primary without a reset: the wait", err: RateLimitError{Wait: time.Minute, At: at}, want: at.Add(time.Minute)},
		{name: "nothing known", err: RateLimitError{Secondary: true}, want: time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.err.RetryAt())
		})
	}
}

// TestMerge_OnceIsNotSentAgain: a merge with Once is one attempt, whatever
// GitHub answers (a 5xx, a rate limit), because the caller judged the base
// tip right before it and GitHub's merge call does not guard the tip; a
// merge without Once is retried as before (it guards the head).
func TestMerge_OnceIsNotSentAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		header   map[string]string
		once     bool
		wantHits int
	}{
		{name: "a 502 with Once is not retried", status: 502, once: true, wantHits: 1},
		{name: "a 429 with Once is not waited on", status: 429, header: map[string]string{"Retry-After": "1"}, once: true, wantHits: 1},
		{name: "a 502 without Once is retried", status: 502, wantHits: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			hits := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				n := hits
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-RateLimit-Remaining", "4000")
				if r.Method == http.MethodPut && n == 1 {
					for k, v := range tt.header {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tt.status)
					fmt.Fprint(w, `{"message":"try later"}`)
					return
				}
				fmt.Fprint(w, `{"merged":true,"sha":"abc"}`)
			}))
			t.Cleanup(srv.Close)
			c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
			_, err := c.Merge(t.Context(), ghref.PR{Owner: "o", Repo: "r", Number: 1}, MergeOptions{SHA: "h", Once: tt.once})
			if tt.once {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, tt.wantHits, hits)
		})
	}
}
