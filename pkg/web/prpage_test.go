package web

import (
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
)

// getPR asks page for path through the route FromRuntime serves.
func getPR(t *testing.T, page *Page, path string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page)
	mux.Handle(PRPattern, http.HandlerFunc(page.ServePR))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
	return rec
}

func TestPRPage_ListsTheAgentRuns(t *testing.T) {
	t.Parallel()
	fixed := &events.FeedbackAddressed{Base: events.Base{PR: pr1, HeadSHA: "feedfacefeedface"}, PreviousHeadSHA: head, FixCycle: 1, Agent: &events.AgentRunSummary{
		Preset: "claude-code", Turns: 4, CostUSD: 0.1234, PRCostUSD: 0.2, Tools: []string{"Read×2", "Edit×1"}, Denials: []string{"Bash"},
		Final: "Handled the error in main.go.\nAll tests pass.",
	}}
	for _, tc := range []struct {
		name    string
		events  []applied
		want    []string
		wantNot []string
	}{
		{
			name: "a fix and an escalation, newest first", events: []applied{
				{&events.FeedbackReceived{Base: b(pr1), Status: events.StatusChangesRequested, Reviewers: []string{"alice"}}, t0},
				{fixed, t0.Add(time.Minute)},
				{&events.EscalationRequested{Base: events.Base{PR: pr1, HeadSHA: "feedfacefeedface"}, Reason: events.ReasonAgentBudgetExhausted, FixCycle: 1,
					Agent: &events.AgentRunSummary{Preset: "codex", Turns: 9, CostUSD: 0.5, CostEstimated: true, Budget: "turns"}}, t0.Add(2 * time.Minute)},
			},
			want: []string{
				`<title>prloop: acme/widgets#1</title>`, `href="https://github.example/acme/widgets/pull/1"`, `href="../../../"`,
				"needs a human: agent budget exhausted",
				"escalated: agent budget exhausted", "stopped by prloop's turns budget", "$0.5000 (estimated from tokens)",
				"fix pushed as feedfac", "cycle 1 on <code>0123456</code>", "<td>4</td>", "$0.1234", "$0.2000 on this PR",
				"<code>Read×2</code> <code>Edit×1</code>", "<code>Bash</code>", "Handled the error in main.go.\nAll tests pass.",
				`title="2026-03-01T12:01:00Z"`, "4m0s ago",
			},
			wantNot: []string{"No agent run on this PR yet."},
		},
		{
			name: "a run of PRLOOP_AGENT=command has no summary", events: []applied{
				{&events.FeedbackAddressed{Base: events.Base{PR: pr1, HeadSHA: "feedfacefeedface"}, PreviousHeadSHA: head, FixCycle: 1}, t0},
			},
			want: []string{"fix pushed as feedfac", "not summarised: PRLOOP_AGENT=command"},
		},
		{
			name:   "no run yet",
			events: []applied{{&events.ReviewPending{Base: b(pr1), Status: events.StatusPending}, t0}},
			want:   []string{"No agent run on this PR yet.", "waiting for review"},
		},
		{
			name: "a long last message is cut", events: []applied{
				{&events.FeedbackAddressed{Base: b(pr1), FixCycle: 1, Agent: &events.AgentRunSummary{Preset: "codex", Final: strings.Repeat("é", finalRunes+50)}}, t0},
			},
			want:    []string{strings.Repeat("é", finalRunes) + "…"},
			wantNot: []string{strings.Repeat("é", finalRunes+1)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := getPR(t, newTestPage(t, true, nil, tc.events...), "/pr/acme/widgets/1")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assertPageHeaders(t, rec)
			body := rec.Body.String()
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, w := range tc.wantNot {
				assert.NotContains(t, body, w)
			}
			if strings.Contains(tc.name, "newest first") {
				assert.Less(t, strings.Index(body, "escalated:"), strings.Index(body, "fix pushed"), "newest first")
			}
		})
	}
}

func TestPRPage_EscapesTheAgentsText(t *testing.T) {
	t.Parallel()
	for _, hostile := range []string{hostileScript, hostileAttr} {
		for _, tc := range []struct {
			name string
			sum  events.AgentRunSummary
		}{
			{name: "final message", sum: events.AgentRunSummary{Preset: "claude-code", Final: "done\x1b[2J " + hostile}},
			{name: "tools and denials", sum: events.AgentRunSummary{Preset: "claude-code", Tools: []string{hostile + "×1"}, Denials: []string{hostile}}},
			{name: "budget and preset", sum: events.AgentRunSummary{Preset: hostile, Budget: hostile}},
		} {
			t.Run(tc.name+" "+hostile, func(t *testing.T) {
				t.Parallel()
				page := newTestPage(t, true, nil,
					applied{&events.EscalationRequested{Base: events.Base{PR: pr1, HeadSHA: head, Title: hostile}, Reason: events.Reason(hostile), Agent: &tc.sum}, t0})
				rec := getPR(t, page, "/pr/acme/widgets/1")
				require.Equal(t, http.StatusOK, rec.Code)
				assertPageHeaders(t, rec)
				body := rec.Body.String()
				for _, raw := range []string{"<script", "<img", "onerror=alert(1)>", "\x1b"} {
					assert.NotContains(t, body, raw, "unescaped hostile input in the page:\n%s", body)
				}
				assert.Contains(t, body, template.HTMLEscapeString(hostile), "the hostile value is shown, as text")
				assert.Equal(t, 1, strings.Count(body, "<style>"), "only the page's own elements")
			})
		}
	}
}

func TestPRPage_UnknownOrMalformedPathsAreNotFound(t *testing.T) {
	t.Parallel()
	page := newTestPage(t, true, nil, applied{&events.ReviewPending{Base: b(pr1), Status: events.StatusPending}, t0})
	for _, path := range []string{
		"/pr/acme/widgets/2",       // no event named it
		"/pr/acme/gadgets/1",       // nor this one
		"/pr/acme/widgets/0",       // not a PR number
		"/pr/acme/widgets/-1",      //
		"/pr/acme/widgets/01",      // not as GitHub writes it
		"/pr/acme/widgets/%2B1",    // "+1"
		"/pr/acme/widgets/x",       //
		"/pr/acme/widgets",         // too short
		"/pr/acme/widgets/1/files", // too long
		"/pr/ac%20me/widgets/1",    // not a login
		"/pr/acme/wid%3Cgets%3E/1", // not a repository name
		"/pr/acme/%2E%2E/1",        // "..": not one either
		"/pr/acme/widgets/1?x=<b>", // a query is ignored, escaped or not: found
	} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			rec := getPR(t, page, path)
			if strings.HasSuffix(path, "<b>") {
				assert.Equal(t, http.StatusOK, rec.Code)
				assert.NotContains(t, rec.Body.String(), "<b>")
				return
			}
			assert.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
		})
	}
	t.Run("the owner's and the repository's case do not matter", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, http.StatusOK, getPR(t, page, "/pr/ACME/Widgets/1").Code)
	})
	t.Run("before any feed", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, http.StatusNotFound, getPR(t, NewPage(nil, page.log, Options{}), "/pr/acme/widgets/1").Code)
	})
}
