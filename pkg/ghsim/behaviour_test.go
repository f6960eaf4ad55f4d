package ghsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

func hdrInt(t *testing.T, r resp, k string) int {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get(k))
	require.NoError(t, err, "header %s=%q", k, r.Header.Get(k))
	return n
}

func TestETag_ConditionalRequestIs304AndNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	paths := []string{
		"/repos/octo/socket.io/pulls",
		"/repos/octo/socket.io/pulls/1",
		"/repos/octo/socket.io/issues",
		"/repos/octo/socket.io/issues/1/comments",
		"/repos/octo/socket.io",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			first := call(t, e.srv, "GET", p, tokAlice, nil)
			require.Equal(t, 200, first.StatusCode)
			etag := first.Header.Get("ETag")
			require.Regexp(t, `^"[0-9a-f]{32}"$`, etag)
			remaining := hdrInt(t, first, "X-RateLimit-Remaining")

			again := call(t, e.srv, "GET", p, tokAlice, nil)
			assert.Equal(t, etag, again.Header.Get("ETag"), "same body, same ETag")

			before := e.sim.Stats()
			cond := call(t, e.srv, "GET", p, tokAlice, nil, "If-None-Match", etag)
			require.Equal(t, 304, cond.StatusCode)
			assert.Empty(t, cond.body)
			assert.Equal(t, etag, cond.Header.Get("ETag"))
			assert.Equal(t, remaining-1, hdrInt(t, cond, "X-RateLimit-Remaining"), "the 304 must not use up the limit")
			assert.Equal(t, remaining-1, e.sim.RateRemaining(tokAlice))
			after := e.sim.Stats()
			assert.Equal(t, before.Counted, after.Counted)
			assert.Equal(t, before.NotCounted+1, after.NotCounted)

			stale := call(t, e.srv, "GET", p, tokAlice, nil, "If-None-Match", `"0000"`)
			assert.Equal(t, 200, stale.StatusCode)
		})
	}
}

func TestETag_DiffersPerTokenAndChangesWithReactions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	const p = "/repos/octo/socket.io/issues"
	a := call(t, e.srv, "GET", p, tokAlice, nil)
	b := call(t, e.srv, "GET", p, tokBot, nil)
	assert.Equal(t, a.body, b.body)
	assert.NotEqual(t, a.Header.Get("ETag"), b.Header.Get("ETag"), "GitHub's ETags are specific to the token")

	e.sim.Advance(time.Minute)
	_, err := e.sim.AddReaction(e.pr, "octo", "rocket")
	require.NoError(t, err)
	c := call(t, e.srv, "GET", p, tokAlice, nil, "If-None-Match", a.Header.Get("ETag"))
	require.Equal(t, 200, c.StatusCode, "the reaction rollup changed, so the list changed")
	l := c.list(t)
	assert.EqualValues(t, 1, l[0]["reactions"].(map[string]any)["rocket"])
	assert.Equal(t, a.list(t)[0]["updated_at"], l[0]["updated_at"], "reactions do not move updated_at")
}

func TestRateLimit_HeadersPerTokenAndExhaustion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{PrimaryLimit: 3})
	const p = "/repos/octo/socket.io/pulls"
	for i := 1; i <= 3; i++ {
		r := call(t, e.srv, "GET", p, tokAlice, nil)
		require.Equal(t, 200, r.StatusCode)
		assert.Equal(t, 3, hdrInt(t, r, "X-RateLimit-Limit"))
		assert.Equal(t, 3-i, hdrInt(t, r, "X-RateLimit-Remaining"))
		assert.Equal(t, i, hdrInt(t, r, "X-RateLimit-Used"))
		assert.Equal(t, "core", r.Header.Get("X-RateLimit-Resource"))
		assert.EqualValues(t, ghsim.DefaultStart.Add(time.Hour).Unix(), hdrInt(t, r, "X-RateLimit-Reset"))
	}
	// Another token has its own bucket; /rate_limit is free.
	other := call(t, e.srv, "GET", p, tokBot, nil)
	assert.Equal(t, 2, hdrInt(t, other, "X-RateLimit-Remaining"))
	rl := call(t, e.srv, "GET", "/rate_limit", tokAlice, nil)
	require.Equal(t, 200, rl.StatusCode)
	assert.Equal(t, 0, hdrInt(t, rl, "X-RateLimit-Remaining"))

	over := call(t, e.srv, "GET", p, tokAlice, nil)
	require.Equal(t, 403, over.StatusCode)
	assert.Equal(t, "0", over.Header.Get("X-RateLimit-Remaining"))
	assert.Regexp(t, `^API rate limit exceeded for user ID \d+\.$`, over.obj(t)["message"])
	assert.Equal(t, 0, e.sim.RateRemaining(tokAlice))

	e.sim.Advance(time.Hour)
	again := call(t, e.srv, "GET", p, tokAlice, nil)
	require.Equal(t, 200, again.StatusCode, "the window resets hourly on the sim clock")
	assert.Equal(t, 2, hdrInt(t, again, "X-RateLimit-Remaining"))
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	tests := []struct {
		name, method, auth string
		body               any
		status             int
		message            string
		limit              int
	}{
		{name: "anonymous read", method: "GET", status: 200, limit: 60},
		{name: "anonymous write", method: "POST", body: map[string]string{"body": "x"}, status: 401, message: "Requires authentication"},
		{name: "bad token", method: "GET", auth: "token nope", status: 401, message: "Bad credentials"},
		{name: "token scheme", method: "GET", auth: "token " + tokAlice, status: 200, limit: 5000},
		{name: "bearer scheme", method: "GET", auth: "Bearer " + tokAlice, status: 200, limit: 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			r := call(t, e.srv, tt.method, "/repos/octo/socket.io/issues/1/comments", "", tt.body, hdr...)
			require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
			if tt.message != "" {
				assert.Equal(t, tt.message, r.obj(t)["message"])
			}
			if tt.limit != 0 {
				assert.Equal(t, tt.limit, hdrInt(t, r, "X-RateLimit-Limit"))
			}
		})
	}
}

func TestSecondaryLimit_Switch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{SecondaryPerMinute: 3})
	const p = "/repos/octo/socket.io/pulls/1"
	for i := 0; i < 3; i++ {
		require.Equal(t, 200, call(t, e.srv, "GET", p, tokAlice, nil).StatusCode)
	}
	r := call(t, e.srv, "GET", p, tokAlice, nil)
	require.Equal(t, 403, r.StatusCode)
	assert.Contains(t, r.obj(t)["message"], "secondary rate limit")
	assert.Equal(t, "60", r.Header.Get("Retry-After"))
	assert.Positive(t, hdrInt(t, r, "X-RateLimit-Remaining"), "a secondary limit is not an exhausted primary limit")
	assert.Equal(t, 200, call(t, e.srv, "GET", p, tokBot, nil).StatusCode, "limits are per token")

	e.sim.Advance(61 * time.Second)
	assert.Equal(t, 200, call(t, e.srv, "GET", p, tokAlice, nil).StatusCode)
}

var linkRE = regexp.MustCompile(`<([^>]+)>; rel="(\w+)"`)

func links(t *testing.T, r resp) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range linkRE.FindAllStringSubmatch(r.Header.Get("Link"), -1) {
		out[m[2]] = m[1]
	}
	return out
}

func TestPagination_LinkHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	_, err := e.sim.OpenPRs(e.repo, 6, "alice") // 7 open PRs in all
	require.NoError(t, err)
	base := e.srv.URL + "/repos/octo/socket.io/pulls?"
	tests := []struct {
		name  string
		query string
		count int
		links map[string]string
	}{
		{name: "first page", query: "per_page=3", count: 3, links: map[string]string{
			"next": base + "page=2&per_page=3", "last": base + "page=3&per_page=3"}},
		{name: "middle page", query: "per_page=3&page=2", count: 3, links: map[string]string{
			"prev": base + "page=1&per_page=3", "next": base + "page=3&per_page=3",
			"last": base + "page=3&per_page=3", "first": base + "page=1&per_page=3"}},
		{name: "last page", query: "per_page=3&page=3", count: 1, links: map[string]string{
			"prev": base + "page=2&per_page=3", "first": base + "page=1&per_page=3"}},
		{name: "keeps filters", query: "state=open&per_page=5", count: 5, links: map[string]string{
			"next": base + "page=2&per_page=5&state=open", "last": base + "page=2&per_page=5&state=open"}},
		{name: "default 30", query: "", count: 7, links: map[string]string{}},
		{name: "max 100", query: "per_page=1000", count: 7, links: map[string]string{}},
		{name: "beyond the end", query: "per_page=3&page=9", count: 0, links: map[string]string{
			"prev": base + "page=3&per_page=3", "first": base + "page=1&per_page=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e.srv, "GET", "/repos/octo/socket.io/pulls?"+tt.query, tokAlice, nil)
			require.Equal(t, 200, r.StatusCode)
			assert.Len(t, r.list(t), tt.count)
			assert.Equal(t, tt.links, links(t, r))
		})
	}
}

// TestPagination_MaxPerPage: the cap clamps whatever per_page the client
// asks for, and a page whose items did not change answers 304 with the Link
// of the grown list, as GitHub does, so a client can see the new page.
func TestPagination_MaxPerPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{MaxPerPage: 3})
	for _, body := range []string{"one", "two", "three"} {
		_, err := e.sim.AddIssueComment(e.pr, "alice", body)
		require.NoError(t, err)
	}
	const path = "/repos/octo/socket.io/issues/1/comments?per_page=100"
	first := call(t, e.srv, "GET", path, tokAlice, nil)
	require.Equal(t, 200, first.StatusCode)
	assert.Len(t, first.list(t), 3, "a full page of 3")
	assert.Empty(t, links(t, first), "exactly one page")

	_, err := e.sim.AddIssueComment(e.pr, "alice", "four") // lands on page 2
	require.NoError(t, err)
	again := call(t, e.srv, "GET", path, tokAlice, nil, "If-None-Match", first.Header.Get("ETag"))
	require.Equal(t, 304, again.StatusCode, "page 1 holds the same 3 comments")
	base := e.srv.URL + "/repos/octo/socket.io/issues/1/comments?"
	assert.Equal(t, map[string]string{"next": base + "page=2&per_page=3", "last": base + "page=2&per_page=3"}, links(t, again),
		"the 304 carries the Link of the grown list")

	e.sim.SetMaxPerPage(0)
	all := call(t, e.srv, "GET", path, tokAlice, nil)
	assert.Len(t, all.list(t), 4, "0 restores GitHub's cap of 100")
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fault  ghsim.Fault
		status int
		check  func(t *testing.T, r resp)
	}{
		{name: "500", fault: ghsim.Fault{Kind: ghsim.FaultStatus500}, status: 500},
		{name: "502", fault: ghsim.Fault{Kind: ghsim.FaultStatus502}, status: 502,
			check: func(t *testing.T, r resp) { assert.Contains(t, r.Header.Get("Content-Type"), "text/html") }},
		{name: "429", fault: ghsim.Fault{Kind: ghsim.FaultStatus429, RetryAfter: 3 * time.Second}, status: 429,
			check: func(t *testing.T, r resp) { assert.Equal(t, "3", r.Header.Get("Retry-After")) }},
		{name: "secondary", fault: ghsim.Fault{Kind: ghsim.FaultSecondaryLimit}, status: 403,
			check: func(t *testing.T, r resp) {
				assert.Equal(t, "1", r.Header.Get("Retry-After"))
				assert.Positive(t, hdrInt(t, r, "X-RateLimit-Remaining"))
				assert.Contains(t, r.obj(t)["message"], "secondary rate limit")
			}},
		{name: "primary", fault: ghsim.Fault{Kind: ghsim.FaultPrimaryLimit}, status: 403,
			check: func(t *testing.T, r resp) {
				assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
				assert.NotEmpty(t, r.Header.Get("X-RateLimit-Reset"))
				assert.Contains(t, r.obj(t)["message"], "API rate limit exceeded")
			}},
		{name: "forbidden", fault: ghsim.Fault{Kind: ghsim.FaultForbidden}, status: 403,
			check: func(t *testing.T, r resp) {
				assert.Positive(t, hdrInt(t, r, "X-RateLimit-Remaining"))
				assert.Empty(t, r.Header.Get("Retry-After"))
			}},
		{name: "malformed json", fault: ghsim.Fault{Kind: ghsim.FaultMalformedJSON}, status: 200,
			check: func(t *testing.T, r resp) {
				var v any
				assert.Error(t, json.Unmarshal(r.body, &v))
			}},
		{name: "slow", fault: ghsim.Fault{Kind: ghsim.FaultTimeout, Delay: 20 * time.Millisecond}, status: 200},
		{name: "garbled json", fault: ghsim.Fault{Kind: ghsim.FaultGarbledJSON}, status: 200,
			check: func(t *testing.T, r resp) {
				var v any
				assert.Error(t, json.Unmarshal(r.body, &v))
				assert.Empty(t, r.Header.Get("ETag"), "no validator for a body the client cannot use")
			}},
		{name: "empty object", fault: ghsim.Fault{Kind: ghsim.FaultEmptyObject}, status: 200,
			check: func(t *testing.T, r resp) { assert.JSONEq(t, `{}`, string(r.body)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ghsim.Options{})
			f := tt.fault
			f.Method, f.Path, f.Times = "GET", `/pulls$`, 2
			e.sim.InjectFault(f)
			// Other routes and methods are unaffected.
			require.Equal(t, 200, call(t, e.srv, "GET", "/repos/octo/socket.io/issues", tokAlice, nil).StatusCode)
			for i := 0; i < 2; i++ {
				r := call(t, e.srv, "GET", "/repos/octo/socket.io/pulls", tokAlice, nil)
				require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
				if tt.check != nil {
					tt.check(t, r)
				}
			}
			r := call(t, e.srv, "GET", "/repos/octo/socket.io/pulls", tokAlice, nil)
			require.Equal(t, 200, r.StatusCode, "Times=2 fails two requests only")
			require.Len(t, r.list(t), 1)
			st := e.sim.Stats()
			route := "GET /repos/{owner}/{repo}/pulls"
			assert.Equal(t, 3, st.ByRoute[route])
			want := map[int]int{tt.status: 2}
			want[200]++
			assert.Equal(t, want, st.ByRouteStatus[route])
		})
	}
}

func TestFaults_TimeoutHangsUntilCancelledAndClear(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	e.sim.InjectFault(ghsim.Fault{Kind: ghsim.FaultTimeout, Times: 5})
	// Timed from before the deadline's clock starts (timing from after it
	// measured 49.8 ms on a loaded machine).
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/repos/octo/socket.io/pulls", nil)
	require.NoError(t, err)
	_, err = e.srv.Client().Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	e.sim.ClearFaults()
	assert.Equal(t, 200, call(t, e.srv, "GET", "/repos/octo/socket.io/pulls", tokAlice, nil).StatusCode)
}

func TestPermissions_ForbiddenWithoutRateLimitSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	e.sim.AddUser("ci[bot]", true)
	e.sim.AddToken("tok-ci", "ci[bot]")
	tests := []struct {
		name, method, path, token string
		body                      any
		message                   string
	}{
		{name: "reader merges", method: "PUT", path: "/pulls/1/merge", token: tokReader, message: "Must have admin rights to Repository."},
		{name: "bot without permission merges", method: "PUT", path: "/pulls/1/merge", token: "tok-ci", message: "Resource not accessible by integration"},
		{name: "reader labels", method: "POST", path: "/issues/1/labels", token: tokReader, body: []string{"x"}, message: "Must have admin rights to Repository."},
		{name: "reader deletes a branch", method: "DELETE", path: "/git/refs/heads/feature", token: tokReader, message: "Must have admin rights to Repository."},
		{name: "reader edits someone's PR", method: "PATCH", path: "/pulls/1", token: tokReader, body: map[string]string{"title": "x"}, message: "Must have admin rights to Repository."},
		{name: "reader updates the branch", method: "PUT", path: "/pulls/1/update-branch", token: tokReader, message: "Must have admin rights to Repository."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e.srv, tt.method, "/repos/octo/socket.io"+tt.path, tt.token, tt.body)
			require.Equal(t, 403, r.StatusCode, "%s", r.body)
			assert.Equal(t, tt.message, r.obj(t)["message"])
			assert.Positive(t, hdrInt(t, r, "X-RateLimit-Remaining"))
			assert.Empty(t, r.Header.Get("Retry-After"))
		})
	}
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	assert.False(t, info.Merged)
	assert.Equal(t, "Add feature", info.Title)
	assert.Empty(t, info.Labels)
	// Readers may still comment and react, as on a public repository.
	assert.Equal(t, 201, call(t, e.srv, "POST", "/repos/octo/socket.io/issues/1/comments", tokReader, map[string]string{"body": "+1"}).StatusCode)
	assert.Equal(t, 201, call(t, e.srv, "POST", "/repos/octo/socket.io/issues/1/reactions", tokReader, map[string]string{"content": "+1"}).StatusCode)
}

func TestUpdatedAt_MovesOnActivityButNotOnReactions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		act   func(t *testing.T, e *env)
		moves bool
	}{
		{name: "issue comment", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 201, call(t, e.srv, "POST", "/repos/octo/socket.io/issues/1/comments", tokBot, map[string]string{"body": "hi"}).StatusCode)
		}},
		{name: "review comment", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 201, call(t, e.srv, "POST", "/repos/octo/socket.io/pulls/1/comments", tokBot,
				map[string]any{"body": "nit", "path": "feature.txt", "line": 1}).StatusCode)
		}},
		{name: "review", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 200, call(t, e.srv, "POST", "/repos/octo/socket.io/pulls/1/reviews", tokBot, map[string]any{"event": "APPROVE"}).StatusCode)
		}},
		{name: "push", moves: true, act: func(t *testing.T, e *env) {
			_, err := e.sim.PushCommit(e.repo, "feature", "alice", map[string]string{"feature.txt": "changed\n"}, "Change")
			require.NoError(t, err)
		}},
		{name: "label added", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 200, call(t, e.srv, "POST", "/repos/octo/socket.io/issues/1/labels", tokBot, []string{"x"}).StatusCode)
		}},
		{name: "title edit", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 200, call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"title": "New"}).StatusCode)
		}},
		{name: "close", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 200, call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"state": "closed"}).StatusCode)
		}},
		{name: "merge", moves: true, act: func(t *testing.T, e *env) {
			require.Equal(t, 200, call(t, e.srv, "PUT", "/repos/octo/socket.io/pulls/1/merge", tokBot, nil).StatusCode)
		}},
		{name: "reaction via API", moves: false, act: func(t *testing.T, e *env) {
			require.Equal(t, 201, call(t, e.srv, "POST", "/repos/octo/socket.io/issues/1/reactions", tokBot, map[string]string{"content": "eyes"}).StatusCode)
		}},
		{name: "reaction removed", moves: false, act: func(t *testing.T, e *env) {
			id, err := e.sim.AddReaction(e.pr, "octo", "heart")
			require.NoError(t, err)
			require.NoError(t, e.sim.RemoveReaction(e.pr, id))
		}},
		{name: "commit status", moves: false, act: func(t *testing.T, e *env) {
			require.NoError(t, e.sim.SetStatus(e.repo, "feature", "ci", "failure"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ghsim.Options{})
			e.sim.Advance(10 * time.Minute)
			tt.act(t, e)
			want := ghsim.DefaultStart
			if tt.moves {
				want = want.Add(10 * time.Minute)
			}
			wantS := want.Format(time.RFC3339)
			assert.Equal(t, wantS, call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil).obj(t)["updated_at"])
			issues := call(t, e.srv, "GET", "/repos/octo/socket.io/issues?state=all", tokBot, nil).list(t)
			require.Len(t, issues, 1)
			assert.Equal(t, wantS, issues[0]["updated_at"])
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			assert.Equal(t, want, info.UpdatedAt)
		})
	}
}

func TestIssues_SinceAndLabelsFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	prs, err := e.sim.OpenPRs(e.repo, 3, "alice")
	require.NoError(t, err)
	e.sim.Advance(time.Hour)
	_, err = e.sim.AddIssueComment(prs[1], "octo", "ping")
	require.NoError(t, err)
	require.Equal(t, 200, call(t, e.srv, "POST", fmt.Sprintf("/repos/octo/socket.io/issues/%d/labels", prs[2].Number), tokBot, []string{"Ready", "bug"}).StatusCode)

	since := ghsim.DefaultStart.Add(30 * time.Minute).Format(time.RFC3339)
	l := call(t, e.srv, "GET", "/repos/octo/socket.io/issues?since="+since+"&sort=updated&direction=asc", tokBot, nil).list(t)
	require.Len(t, l, 2)
	assert.EqualValues(t, prs[1].Number, l[0]["number"])
	assert.EqualValues(t, prs[2].Number, l[1]["number"])

	l = call(t, e.srv, "GET", "/repos/octo/socket.io/issues?labels=ready,BUG", tokBot, nil).list(t)
	require.Len(t, l, 1)
	assert.EqualValues(t, prs[2].Number, l[0]["number"])

	r := call(t, e.srv, "GET", "/repos/octo/socket.io/issues?since=yesterday", tokBot, nil)
	assert.Equal(t, 422, r.StatusCode)
}

func TestErrors_Shapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	tests := []struct {
		name, method, path string
		body               any
		status             int
		message            string
	}{
		{name: "unknown route", method: "GET", path: "/repos/octo/socket.io/wiki", status: 404, message: "Not Found"},
		{name: "unknown method", method: "DELETE", path: "/repos/octo/socket.io/pulls/1", status: 404, message: "Not Found"},
		{name: "bad json", method: "POST", path: "/repos/octo/socket.io/issues/1/comments", body: "{not json", status: 400, message: "Problems parsing JSON"},
		{name: "empty comment", method: "POST", path: "/repos/octo/socket.io/issues/1/comments", body: map[string]string{}, status: 422, message: "Validation Failed"},
		{name: "bad state", method: "GET", path: "/repos/octo/socket.io/pulls?state=merged", status: 422, message: "Validation Failed"},
		{name: "case-insensitive repo", method: "GET", path: "/repos/OCTO/Socket.IO/pulls/1", status: 200},
		{name: "enterprise prefix", method: "GET", path: "/api/v3/repos/octo/socket.io/pulls/1", status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e.srv, tt.method, tt.path, tokBot, tt.body)
			require.Equal(t, tt.status, r.StatusCode, "%s", r.body)
			if tt.message != "" {
				m := r.obj(t)
				assert.Equal(t, tt.message, m["message"])
				assert.NotEmpty(t, m["documentation_url"])
			}
		})
	}
	st := e.sim.Stats()
	assert.Equal(t, 2, st.ByRoute["NOT_FOUND"])
	assert.Equal(t, 2, st.ByRouteStatus["GET /repos/{owner}/{repo}/pulls/{number}"][200])
}

// TestConcurrency runs readers, writers and pushes at once; it exists for
// the race detector.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	prs, err := e.sim.OpenPRs(e.repo, 20, "alice")
	require.NoError(t, err)
	do := func(method, path, token string, body string) (int, error) {
		req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "token "+token)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		return res.StatusCode, err
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				pr := prs[(w*7+i)%len(prs)]
				n := strconv.Itoa(pr.Number)
				var err error
				switch i % 5 {
				case 0:
					_, err = do("GET", "/repos/octo/socket.io/issues?per_page=100", tokBot, "")
				case 1:
					_, err = do("POST", "/repos/octo/socket.io/issues/"+n+"/comments", tokBot, `{"body":"x"}`)
				case 2:
					_, err = do("POST", "/repos/octo/socket.io/issues/"+n+"/reactions", tokBot, `{"content":"+1"}`)
				case 3:
					_, err = do("GET", "/repos/octo/socket.io/pulls/"+n, tokAlice, "")
				case 4:
					_, err = e.sim.PushCommit(e.repo, fmt.Sprintf("bulk/pr-%d", pr.Number), "alice", map[string]string{"c.txt": strconv.Itoa(i)}, "c")
				}
				assert.NoError(t, err)
				e.sim.Advance(time.Second)
			}
		}()
	}
	wg.Wait()
	st := e.sim.Stats()
	assert.Equal(t, 48, st.Total)
	assert.Equal(t, st.Total, st.ByStatus[200]+st.ByStatus[201], "every request succeeded: %v", st.ByStatus)
}

func TestHostileText_RoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	titles := []string{`"repo":-0.0e-7777`, `x","repo":-0.0e-7777,"y":"`, "<script>&amp;</script>", "emoji 🚀 and \u0000 nul", "-0.0e-7777"}
	for _, title := range titles {
		t.Run(title, func(t *testing.T) {
			r := call(t, e.srv, "PATCH", "/repos/octo/socket.io/pulls/1", tokAlice, map[string]string{"title": title, "body": title})
			require.Equal(t, 200, r.StatusCode, "%s", r.body)
			for _, p := range []string{"/repos/octo/socket.io/pulls/1", "/repos/octo/socket.io/pulls"} {
				r := call(t, e.srv, "GET", p, tokBot, nil)
				var m map[string]any
				if p == "/repos/octo/socket.io/pulls" {
					m = r.list(t)[0]
				} else {
					m = r.obj(t)
				}
				assert.Equal(t, title, m["title"])
				assert.Equal(t, title, m["body"])
				assert.Equal(t, "octo/socket.io", m["head"].(map[string]any)["repo"].(map[string]any)["full_name"])
			}
		})
	}
}

func TestCommitAndUser_ServeGitFacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	e.sim.Advance(90 * time.Minute)
	sha, err := e.sim.PushCommit(e.repo, "feature", "alice", map[string]string{"x.txt": "x\n"}, "Second commit\n\nwith a body")
	require.NoError(t, err)

	r := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/"+sha, tokAlice, nil)
	require.Equal(t, 200, r.StatusCode, string(r.body))
	var c gh.RepositoryCommit
	r.json(t, &c)
	assert.Equal(t, sha, c.GetSHA())
	assert.Equal(t, e.sim.Now().UTC().Truncate(time.Second), c.GetCommit().GetCommitter().GetDate().UTC(), "committer date follows the sim clock")
	assert.Equal(t, "Second commit\n\nwith a body", c.GetCommit().GetMessage())
	require.Len(t, c.Parents, 1)

	byBranch := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/feature", tokAlice, nil)
	assert.Equal(t, 200, byBranch.StatusCode)
	root := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/main", tokAlice, nil)
	require.Equal(t, 200, root.StatusCode)
	assert.Equal(t, []any{}, root.obj(t)["parents"], "the first commit's parents: an empty list, as on GitHub, not null")
	assert.Equal(t, 422, call(t, e.srv, "GET", "/repos/octo/socket.io/commits/nope", tokAlice, nil).StatusCode)

	me := call(t, e.srv, "GET", "/user", tokBot, nil)
	require.Equal(t, 200, me.StatusCode)
	assert.Equal(t, "prloop[bot]", me.obj(t)["login"])
	assert.Equal(t, "Bot", me.obj(t)["type"])
	assert.Equal(t, 401, call(t, e.srv, "GET", "/user", "", nil).StatusCode)
}

func TestBranchRules_RequiredChecksPerBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "main", "ci/build", "test"))
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "release/1.x", "ci/build"))
	tests := []struct {
		name, path string
		status     int
		want       []string
	}{
		{name: "branch with a rule", path: "/repos/octo/socket.io/rules/branches/main", status: 200, want: []string{"ci/build", "test"}},
		{name: "escaped slash in the branch", path: "/repos/octo/socket.io/rules/branches/release%2F1.x", status: 200, want: []string{"ci/build"}},
		{name: "branch without rules", path: "/repos/octo/socket.io/rules/branches/feature", status: 200, want: nil},
		{name: "unknown branch has none", path: "/repos/octo/socket.io/rules/branches/nope", status: 200, want: nil},
		{name: "unknown repository", path: "/repos/octo/nope/rules/branches/main", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { // not parallel: "cleared" below changes the rules
			r := call(t, e.srv, "GET", tt.path, tokReader, nil)
			require.Equal(t, tt.status, r.StatusCode, "read access suffices; body: %.300s", r.body)
			if tt.status != 200 {
				return
			}
			var rules []*gh.RepositoryRule
			r.json(t, &rules)
			var got []string
			for _, rule := range rules {
				require.Equal(t, "required_status_checks", rule.Type)
				var p gh.RequiredStatusChecksRuleParameters
				require.NoError(t, json.Unmarshal(*rule.Parameters, &p))
				for _, c := range p.RequiredStatusChecks {
					got = append(got, c.Context)
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("cleared", func(t *testing.T) {
		require.NoError(t, e.sim.SetRequiredChecks(e.repo, "main"))
		r := call(t, e.srv, "GET", "/repos/octo/socket.io/rules/branches/main", tokReader, nil)
		require.Equal(t, 200, r.StatusCode)
		assert.Empty(t, r.list(t))
	})
}

// TestSetStatuses_SetsEveryContextOrSaysWhy: the admin call behind tests
// whose CI finishes between two polls sets every context it is given, and
// refuses what GitHub would refuse.
func TestSetStatuses_SetsEveryContextOrSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	require.NoError(t, e.sim.SetStatuses(e.repo, "feature", "success", "ci", "lint"))
	m := call(t, e.srv, "GET", "/repos/octo/socket.io/commits/feature/status", tokBot, nil).obj(t)
	assert.Equal(t, "success", m["state"])
	assert.EqualValues(t, 2, m["total_count"])

	for _, tc := range []struct {
		name, ref, state string
		contexts         []string
		want             string
	}{
		{name: "unknown state", ref: "feature", state: "green", contexts: []string{"ci"}, want: `state "green"`},
		{name: "empty context", ref: "feature", state: "success", contexts: []string{"ci", ""}, want: "empty context"},
		{name: "unknown branch", ref: "nope", state: "success", contexts: []string{"ci"}, want: "No commit found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.sim.SetStatuses(e.repo, tc.ref, tc.state, tc.contexts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			h, err := e.sim.StatusHistory(e.repo, info.HeadSHA, "")
			require.NoError(t, err)
			assert.Len(t, h, 2, "a refused call sets nothing")
		})
	}
}
