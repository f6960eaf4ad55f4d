package web

import (
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// Hostile values as a PR's author or reviewer could write them: in a
// branch name, a login, a check's name, an escalation's detail.
const (
	hostileScript = `<script>window.pwned=1;document.title="pwned"</script>`
	hostileAttr   = `"><img src=x onerror=alert(1)>`
)

// fakeBoard is a follower's board without the stream: the test applies
// events itself.
type fakeBoard struct {
	b      *prstatus.Board
	caught chan struct{}
}

func (f *fakeBoard) View(fn func(b *prstatus.Board)) { fn(f.b) }
func (f *fakeBoard) CaughtUp() <-chan struct{}       { return f.caught }

var (
	t0   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pr1  = ghref.PR{Owner: "acme", Repo: "widgets", Number: 1, URL: "https://github.example/acme/widgets/pull/1"}
	pr2  = ghref.PR{Owner: "acme", Repo: "widgets", Number: 2}
	pr3  = ghref.PR{Owner: "acme", Repo: "widgets", Number: 3}
	head = "0123456789abcdef0123456789abcdef01234567"
)

type applied struct {
	d  events.Data
	at time.Time
}

func render(t *testing.T, caughtUp bool, err error, evs ...applied) string {
	t.Helper()
	rec := httptest.NewRecorder()
	newTestPage(t, caughtUp, err, evs...).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assertPageHeaders(t, rec)
	return rec.Body.String()
}

// assertPageHeaders checks the headers every page has.
func assertPageHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'none'", "no script runs, whatever slips through")
}

// newTestPage is the page of a board the events evs were applied to.
func newTestPage(t *testing.T, caughtUp bool, err error, evs ...applied) *Page {
	t.Helper()
	fb := &fakeBoard{b: prstatus.NewBoard(), caught: make(chan struct{})}
	if caughtUp {
		close(fb.caught)
	}
	feed := newFeed(fb, 0)
	for _, e := range evs {
		fb.b.Apply(e.d, e.at)
		feed.onApply(e.d.Ref())
	}
	if err != nil {
		feed.Fail(err)
	}
	return NewPage(feed, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{
		Line: prstatus.Options{MaxFixCycles: 2, Label: "human-review-required"},
		Now:  func() time.Time { return t0.Add(5 * time.Minute) },
	})
}

func b(pr ghref.PR) events.Base { return events.Base{PR: pr, HeadSHA: head} }

func TestPage_Renders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		caughtUp bool
		err      error
		events   []applied
		want     []string
		wantNot  []string
	}{
		{
			name: "loading before the follower caught up", events: nil,
			want:    []string{`id="loading"`, "catching up", "No PR is watched yet.", `<meta http-equiv="refresh" content="5">`},
			wantNot: []string{`id="error"`},
		},
		{
			name: "why it is not following, while it starts over", err: errors.New("follow the event stream: permissions violation"),
			want: []string{`id="loading"`, `id="error"`, "permissions violation"},
		},
		{
			name: "the error is gone once caught up", caughtUp: true, err: errors.New("permissions violation"),
			wantNot: []string{`id="loading"`, `id="error"`},
		},
		{
			name: "lines, links, queue in order with waits, escalations", caughtUp: true,
			events: []applied{
				{&events.ReviewApproved{Base: b(pr2), Status: events.StatusApproved, Approvers: []string{"bob"}}, t0},
				{&events.MergeQueued{Base: b(pr2), BaseBranch: "main"}, t0},
				{&events.ReviewApproved{Base: b(pr1), Status: events.StatusApproved, Approvers: []string{"alice"}}, t0.Add(time.Minute)},
				{&events.MergeQueued{Base: b(pr1), BaseBranch: "main"}, t0.Add(time.Minute)},
				{&events.ReviewTimeout{Base: b(pr3), Reason: events.ReasonReviewTimeout}, t0.Add(2 * time.Minute)},
				{&events.Escalated{Base: b(pr3), Reason: events.ReasonReviewTimeout, Actions: []string{"label"}}, t0.Add(2 * time.Minute)},
			},
			want: []string{
				`href="https://github.example/acme/widgets/pull/1"`, // the URL the events carry
				`href="https://github.com/acme/widgets/pull/2"`,     // else GitHub's
				"approved by bob — 1st in the merge queue for main",
				"approved by alice — 2nd in the merge queue for main",
				`<code>acme/widgets</code> into <code>main</code>`,
				"acme/widgets#2</a> — waiting 5m0s",
				"acme/widgets#1</a> — waiting 4m0s",
				`<span class="badge error">error</span>`,
				"needs a human: review timeout (label human-review-required)",
				`<tr class="escalation">`, "3m0s ago", "review timeout",
				"<code>0123456</code>",
				`<a class="runs" href="pr/acme/widgets/1">agent runs</a>`,
			},
			wantNot: []string{`id="loading"`, "Every merge queue is empty.", "No escalation yet."},
		},
		{
			name: "speculative mode: the candidate each PR rides in, a conflict the agent resolves", caughtUp: true,
			events: []applied{
				{&events.ReviewApproved{Base: b(pr1), Status: events.StatusApproved, Approvers: []string{"alice"}}, t0},
				{&events.MergeQueued{Base: b(pr1), BaseBranch: "main", Position: 1, Mode: prstatus.Speculative}, t0},
				{&events.ReviewApproved{Base: b(pr2), Status: events.StatusApproved, Approvers: []string{"bob"}}, t0},
				{&events.MergeQueued{Base: b(pr2), BaseBranch: "main", Position: 2, Mode: prstatus.Speculative, Ahead: []int{1}}, t0},
				{&events.MergeCandidate{Base: b(pr2), BaseBranch: "main", State: events.CandidateBuilt, Candidate: "c0ffee1c0ffee1", Branch: "prloop/queue/main/2", Position: 2, Ahead: []int{1}}, t0},
				{&events.ReviewApproved{Base: b(pr3), Status: events.StatusApproved, Approvers: []string{"carol"}}, t0},
				{&events.ConflictResolveRequested{Base: b(pr3), BaseBranch: "main", BaseSHA: "ba5e123ba5e123"}, t0},
			},
			want: []string{
				"queued 1st on main",
				"in the merge queue of main, rides in candidate 2 (with #1 ahead) on prloop/queue/main/2 at c0ffee1: CI running",
				"conflicts with main at ba5e123 — agent resolving (cycle 1 of 2)",
			},
		},
		{
			// Issue #30: a PR merged after its escalation stayed under
			// "Recent escalations".
			name: "an escalated PR merged since leaves the recent escalations", caughtUp: true,
			events: []applied{
				{&events.ReviewTimeout{Base: b(pr3), Reason: events.ReasonReviewTimeout}, t0},
				{&events.Escalated{Base: b(pr3), Reason: events.ReasonReviewTimeout, Actions: []string{"label"}}, t0},
				{&events.Merged{Base: b(pr3), MergeSHA: "feedfacecafe"}, t0.Add(time.Minute)},
			},
			want:    []string{"merged as feedfac", "No escalation yet."},
			wantNot: []string{`<tr class="escalation">`},
		},
		{
			name: "an escalation a human resolved leaves the recent escalations", caughtUp: true,
			events: []applied{
				{&events.ReviewTimeout{Base: b(pr3), Reason: events.ReasonReviewTimeout}, t0},
				{&events.Escalated{Base: b(pr3), Reason: events.ReasonReviewTimeout, Actions: []string{"label"}}, t0},
				{&events.EscalationResolved{Base: b(pr3)}, t0.Add(time.Minute)},
			},
			want:    []string{"No escalation yet."},
			wantNot: []string{`<tr class="escalation">`},
		},
		{
			name: "merged", caughtUp: true,
			events: []applied{{&events.Merged{Base: b(pr1), MergeSHA: "feedfacecafe"}, t0}},
			want:   []string{`<span class="badge success">success</span>`, "merged as feedfac", "Every merge queue is empty."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := render(t, tc.caughtUp, tc.err, tc.events...)
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, w := range tc.wantNot {
				assert.NotContains(t, body, w)
			}
			if tc.want != nil && strings.Contains(tc.name, "queue") {
				assert.Less(t, strings.Index(body, "acme/widgets#2</a> — waiting"), strings.Index(body, "acme/widgets#1</a> — waiting"), "first in line first")
			}
		})
	}
}

func TestPage_EscapesHostileValues(t *testing.T) {
	t.Parallel()
	for _, hostile := range []string{hostileScript, hostileAttr} {
		evil := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7, URL: "javascript:alert(1)//" + hostile}
		for _, tc := range []struct {
			name   string
			events []applied
		}{
			{name: "reviewer login", events: []applied{{&events.ReviewInProgress{Base: b(evil), Status: events.StatusInProgress, Actor: hostile}, t0}}},
			{name: "approver login and base branch", events: []applied{
				{&events.ReviewApproved{Base: b(evil), Status: events.StatusApproved, Approvers: []string{hostile}}, t0},
				{&events.MergeQueued{Base: b(evil), BaseBranch: hostile}, t0},
			}},
			{name: "check names", events: []applied{
				{&events.ReviewApproved{Base: b(evil), Status: events.StatusApproved, Approvers: []string{"alice"}}, t0},
				{&events.MergeQueued{Base: b(evil), BaseBranch: "main"}, t0},
				{&events.MergeWaiting{Base: b(evil), BaseBranch: "main", Checks: []string{hostile}}, t0},
			}},
			{name: "escalation reason and detail", events: []applied{
				{&events.EscalationRequested{Base: b(evil), Reason: events.Reason(hostile), LastError: hostile}, t0},
				{&events.Escalated{Base: b(evil), Reason: events.Reason(hostile)}, t0},
			}},
			{name: "candidate branch", events: []applied{
				{&events.ReviewApproved{Base: b(evil), Status: events.StatusApproved, Approvers: []string{"alice"}}, t0},
				{&events.MergeQueued{Base: b(evil), BaseBranch: "main", Mode: prstatus.Speculative}, t0},
				{&events.MergeCandidate{Base: b(evil), BaseBranch: "main", State: events.CandidateBuilt, Candidate: "c0ffee1", Branch: hostile, Position: 1}, t0},
			}},
			{name: "candidate invalidation detail", events: []applied{
				{&events.ReviewApproved{Base: b(evil), Status: events.StatusApproved, Approvers: []string{"alice"}}, t0},
				{&events.MergeQueued{Base: b(evil), BaseBranch: "main", Mode: prstatus.Speculative}, t0},
				{&events.MergeCandidate{Base: b(evil), BaseBranch: "main", State: events.CandidateInvalidated, Candidate: "c0ffee1", Detail: hostile}, t0},
			}},
			{name: "conflict base", events: []applied{
				{&events.ConflictResolveRequested{Base: b(evil), BaseBranch: hostile, BaseSHA: "ba5e123", Detail: hostile}, t0},
			}},
			{name: "head", events: []applied{{&events.ReviewPending{Base: events.Base{PR: evil, HeadSHA: hostile}, Status: events.StatusPending}, t0}}},
			{name: "title in the list and the queue", events: []applied{
				{&events.ReviewApproved{Base: events.Base{PR: evil, HeadSHA: "abc", Title: hostile}, Status: events.StatusApproved, Approvers: []string{"alice"}}, t0},
				{&events.MergeQueued{Base: b(evil), BaseBranch: "main"}, t0},
			}},
			{name: "error", events: nil},
		} {
			t.Run(tc.name+" "+hostile, func(t *testing.T) {
				t.Parallel()
				body := render(t, tc.name != "error", errors.New(hostile), tc.events...)
				for _, raw := range []string{"<script", "<img", "onerror=alert(1)>", "javascript:"} {
					assert.NotContains(t, body, raw, "unescaped hostile input in the page:\n%s", body)
				}
				assert.Contains(t, body, "&lt;", "the hostile value is shown, as text")
				if strings.HasPrefix(tc.name, "title") {
					assert.Equal(t, 2, strings.Count(body, template.HTMLEscapeString(hostile)), "the title, as text, in the list and in the queue:\n%s", body)
				}
				assert.Equal(t, 1, strings.Count(body, "<style>"), "only the page's own elements")
			})
		}
	}
}

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080/"},
		{"[::]:8080", "http://localhost:8080/"},
		{"0.0.0.0:80", "http://localhost:80/"},
		{":8080", "http://localhost:8080/"},
		{"[::1]:9", "http://[::1]:9/"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, URL(tc.addr))
		})
	}
}
