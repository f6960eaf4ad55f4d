package github

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_ListGrowsPastAPageBoundary: with the simulator at 3 items a
// page, a list of exactly 3 is read, a 4th lands on page 2, and the next
// read returns 4. Page 1 revalidates as a 304 (its items did not change);
// only its Link says there is a page 2 now.
func TestClient_ListGrowsPastAPageBoundary(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{MaxPerPage: 3}, Config{}, Options{})
	for _, login := range []string{"bob", "carol", "dave", "erin"} {
		require.NoError(t, e.sim.SetPermission(e.repo, login, "write"))
	}
	logins := []string{"bob", "carol", "dave", "erin"}
	tests := []struct {
		name string
		add  func(pr ghref.PR, i int) error
		list func(pr ghref.PR) (int, error)
	}{
		{name: "reactions",
			add: func(pr ghref.PR, i int) error {
				_, err := e.sim.AddReaction(pr, logins[i], "+1")
				return err
			},
			list: func(pr ghref.PR) (int, error) {
				rs, err := e.client.ListReactions(t.Context(), pr)
				return len(rs), err
			}},
		{name: "issue comments",
			add: func(pr ghref.PR, i int) error {
				_, err := e.sim.AddIssueComment(pr, logins[i], "comment "+strconv.Itoa(i))
				return err
			},
			list: func(pr ghref.PR) (int, error) {
				cs, err := e.client.ListIssueComments(t.Context(), pr, time.Time{})
				return len(cs), err
			}},
		{name: "reviews",
			add: func(pr ghref.PR, i int) error {
				_, err := e.sim.AddReview(pr, ghsim.ReviewInput{Login: logins[i], State: "COMMENTED", Body: "review " + strconv.Itoa(i)})
				return err
			},
			list: func(pr ghref.PR) (int, error) {
				rs, err := e.client.ListReviews(t.Context(), pr)
				return len(rs), err
			}},
		{name: "inline review comments",
			add: func(pr ghref.PR, i int) error {
				_, err := e.sim.AddReviewComment(pr, ghsim.ReviewCommentInput{Login: logins[i], Path: "lines.txt", Line: i + 1, Body: "inline " + strconv.Itoa(i)})
				return err
			},
			list: func(pr ghref.PR) (int, error) {
				cs, err := e.client.ListReviewComments(t.Context(), pr)
				return len(cs), err
			}},
	}
	for i, tt := range tests {
		branch := "grow-" + strconv.Itoa(i)
		_, err := e.sim.PushCommit(e.repo, branch, "alice", map[string]string{"lines.txt": "1\n2\n3\n4\n5\n"}, "Lines")
		require.NoError(t, err)
		pr, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: tt.name, Head: branch, Author: "alice"})
		require.NoError(t, err)
		t.Run(tt.name, func(t *testing.T) {
			for i := range 3 {
				e.sim.Advance(time.Second)
				require.NoError(t, tt.add(pr, i))
			}
			n, err := tt.list(pr)
			require.NoError(t, err)
			require.Equal(t, 3, n, "one full page")
			n, err = tt.list(pr)
			require.NoError(t, err)
			require.Equal(t, 3, n, "unchanged")

			e.sim.Advance(time.Second)
			require.NoError(t, tt.add(pr, 3))
			n, err = tt.list(pr)
			require.NoError(t, err)
			assert.Equal(t, 4, n, "the 4th, on page 2, is read")
		})
	}
}

// linklessServer serves /repos/o/r/issues/1/{reactions,comments} and
// /repos/o/r/issues (the poller's summary list) from a list of n items,
// pages of per_page (default 30, max 100) with strong ETags over the page's
// body, and Link on a 200 only: a 304 carries no Link, so the stored one
// goes stale when the list grows past a page boundary. It records each
// request's page.
type linklessServer struct {
	mu    sync.Mutex
	n     int
	pages []string
}

func (s *linklessServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	s.mu.Lock()
	n := s.n
	s.pages = append(s.pages, strconv.Itoa(page))
	s.mu.Unlock()
	items := []map[string]any{}
	for i := (page - 1) * per; i < min(page*per, n); i++ {
		items = append(items, map[string]any{"id": i + 1, "number": i + 1, "content": "+1"})
	}
	body, _ := json.Marshal(items)
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if page*per < n {
		next := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.RequestURI()))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (s *linklessServer) set(n int) {
	s.mu.Lock()
	s.n, s.pages = n, nil
	s.mu.Unlock()
}

func (s *linklessServer) requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pages...)
}

// TestClient_FullPageWithoutLinkAsksForTheNext: against a server whose 304s
// carry no Link, a page that came back full is not taken as the last, on
// every kind of list (listAll, the summary lists of listIfChanged): the
// next page is asked for, conditionally, so an item that lands there is
// seen. A short page ends the walk without a further request.
func TestClient_FullPageWithoutLinkAsksForTheNext(t *testing.T) {
	t.Parallel()
	pr := ghref.Repo{Owner: "o", Name: "r"}.PR(1)
	tests := []struct {
		name string
		list func(c *Client) (int, error)
	}{
		{name: "reactions (listAll)", list: func(c *Client) (int, error) {
			rs, err := c.ListReactions(t.Context(), pr)
			return len(rs), err
		}},
		{name: "issue summaries (listIfChanged)", list: func(c *Client) (int, error) {
			is, _, err := c.ListIssueSummariesIfChanged(t.Context(), pr.RepoRef(), IssueListOptions{}, "")
			return len(is), err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &linklessServer{}
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})

			s.set(99)
			n, err := tt.list(c)
			require.NoError(t, err)
			assert.Equal(t, 99, n)
			assert.Equal(t, []string{"1"}, s.requested(), "a short page is the last")

			s.set(100)
			n, err = tt.list(c)
			require.NoError(t, err)
			assert.Equal(t, 100, n)
			assert.Equal(t, []string{"1", "2"}, s.requested(), "a full page without a next link: page 2 is asked for")

			s.set(101)
			n, err = tt.list(c)
			require.NoError(t, err)
			assert.Equal(t, 101, n, "page 1 is a 304 without Link, page 2 holds the new item")
			assert.Equal(t, []string{"1", "2"}, s.requested())

			st := c.Stats()
			assert.Positive(t, st.NotModified, "page 1 revalidated")
		})
	}
}

// TestCacheEntry_TakesLinkFrom304: a 304's Link replaces the remembered one
// (RFC 9111 §4.3.4) and is remembered for the next 304 that carries none.
func TestCacheEntry_TakesLinkFrom304(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	link := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		l := link
		mu.Unlock()
		w.Header().Set("ETag", `"same"`)
		if r.Header.Get("If-None-Match") == `"same"` {
			if l != "" {
				w.Header().Set("Link", l)
			}
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"id":1}]`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	get := func() string {
		_, resp, err := doJSON[[]map[string]any](t.Context(), c, http.MethodGet, "repos/o/r/issues/1/comments?per_page=100", nil, true)
		require.NoError(t, err)
		return resp.Header.Get("Link")
	}
	assert.Empty(t, get())
	mu.Lock()
	link = `<` + srv.URL + `/repos/o/r/issues/1/comments?page=2&per_page=100>; rel="next"`
	mu.Unlock()
	assert.Equal(t, link, get(), "the 304's Link wins")
	want := link
	mu.Lock()
	link = ""
	mu.Unlock()
	assert.Equal(t, want, get(), "a 304 without Link keeps the freshened one")
}
