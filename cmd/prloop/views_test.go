package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/web"
)

// seen is one PR as one view shows it.
type seen struct {
	state, line string
	age         time.Duration
	// from and to bound when the view was drawn.
	from, to time.Time
}

// TestViews_OneTruthAfterTheDemo renders the demo's board (one PR merged,
// one escalated for review_timeout) through `prloop status`, `status
// -json`, `explain` (the real binary) and the web page, after a `prloop
// emit-test`, and compares what each says of each PR: state, line and age.
// Issue #30 found them disagreeing: status said pending for the escalated
// PR where the page said error, -json said approved for the merged one,
// and emit-test's fake PR showed on the page.
func TestViews_OneTruthAfterTheDemo(t *testing.T) {
	w := playDemo(t) // sets PRLOOP_NATS_URL and the credentials, inherited by the binary
	bin := proctest.Build(t, "./cmd/prloop")
	run := func(args ...string) (string, time.Time, time.Time) {
		t.Helper()
		from := time.Now()
		p := proctest.Start(t, bin, nil, args...)
		exited, err := p.Wait(60 * time.Second)
		require.True(t, exited, "prloop %v still running", args)
		require.NoError(t, err, "prloop %v: %s", args, p.Stderr.String())
		return p.Stdout.String(), from, time.Now()
	}
	fake := ghref.PR{Owner: "acme", Repo: "fake", Number: 9}
	run("emit-test", "-pr", fake.String())

	views := map[string]map[string]seen{}
	ago := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "an age: %q", s)
		return d
	}

	// status: the table.
	table, from, to := run("status")
	assert.NotContains(t, table, fake.String(), "emit-test's event is not a PR")
	rowRE := regexp.MustCompile(`(?m)^(\S+)\s+(\S+)\s+.*?\S+ \((\S+) ago\)\s+(?:(?:no|yes: \S+)\s+)?(.*?)\s*$`)
	views["status"] = map[string]seen{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		views["status"][m[1]] = seen{state: m[2], line: m[4], age: ago(m[3]), from: from, to: to}
	}

	// status -json: the versioned document.
	js, from, to := run("status", "-json")
	assert.NotContains(t, js, "0001-01-01", "no zero times")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &doc), js)
	assert.Equal(t, "prloop.status/v1", doc["schema"], js)
	prs, _ := doc["prs"].([]any)
	require.Len(t, prs, 2, "the demo's two PRs, and not emit-test's: %s", js)
	documented := []string{"pr", "url", "title", "state", "line", "head_sha", "fix_cycle", "queue", "escalation", "merged", "closed", "last_event", "last_event_at", "age_seconds"}
	lastAt := map[string]time.Time{}
	views["status -json"] = map[string]seen{}
	for _, raw := range prs {
		p := raw.(map[string]any)
		for k := range p {
			assert.Contains(t, documented, k, "a field the schema does not document")
		}
		at, err := time.Parse(time.RFC3339Nano, p["last_event_at"].(string))
		require.NoError(t, err)
		ref := p["pr"].(string)
		lastAt[ref] = at
		views["status -json"][ref] = seen{state: p["state"].(string), line: p["line"].(string),
			age: time.Duration(p["age_seconds"].(float64) * float64(time.Second)), from: from, to: to}
		if ref == w.reviewed.String() {
			assert.Equal(t, true, p["merged"], "the merged PR is merged")
			assert.Equal(t, "success", p["state"])
		}
	}

	// explain, PR by PR.
	views["explain"] = map[string]seen{}
	explainRE := regexp.MustCompile(`^(\S+): (.*)\nstate (\S+); last event \S+ (\S+) ago\n`)
	for _, pr := range []ghref.PR{w.reviewed, w.neglected} {
		out, from, to := run("explain", pr.String())
		m := explainRE.FindStringSubmatch(out)
		require.NotNil(t, m, "explain's head says the state and the age:\n%s", out)
		views["explain"][m[1]] = seen{state: m[3], line: m[2], age: ago(m[4]), from: from, to: to}
	}
	out, _, _ := run("explain", fake.String())
	assert.Contains(t, out, fake.String()+": not watched by prloop", "emit-test's event is not a PR")

	// The web page, drawn from a follower of the same stream.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn, err := connectCLI(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	log := logging.New(io.Discard, "error", "text")
	f := prstatus.NewFollower(log)
	feed := web.NewFeed(f, 0)
	go func() { _ = f.Run(ctx, conn.JS) }()
	select {
	case <-f.CaughtUp():
	case <-time.After(30 * time.Second):
		t.Fatal("the page's follower never caught up")
	}
	settings, err := loadCLISettings()
	require.NoError(t, err)
	from = time.Now()
	rec := httptest.NewRecorder()
	web.NewPage(feed, log, web.Options{Line: settings.lineOptions()}).ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
	to = time.Now()
	require.Equal(t, http.StatusOK, rec.Code)
	page := rec.Body.String()
	assert.NotContains(t, page, fake.String(), "emit-test's event is not a PR")
	pageRE := regexp.MustCompile(`(?s)<tr class="pr">\s*<td><a [^>]*>([^<]+)</a>.*?<span class="badge (\w+)">.*?<td class="line">([^<]*)</td>.*?<td class="muted">\S+ (\S+) ago</td>`)
	views["page"] = map[string]seen{}
	for _, m := range pageRE.FindAllStringSubmatch(page, -1) {
		views["page"][html.UnescapeString(m[1])] = seen{state: m[2], line: html.UnescapeString(m[3]), age: ago(m[4]), from: from, to: to}
	}

	names := []string{"status", "status -json", "explain", "page"}
	for _, pr := range []ghref.PR{w.reviewed, w.neglected} {
		ref := pr.String()
		want, ok := views["page"][ref]
		require.True(t, ok, "the page shows %s:\n%s", ref, page)
		at, ok := lastAt[ref]
		require.True(t, ok, "status -json has %s", ref)
		for _, name := range names {
			got, ok := views[name][ref]
			if !assert.True(t, ok, "%s shows %s", name, ref) {
				continue
			}
			assert.Equal(t, want.state, got.state, "%s's state of %s, against the page's", name, ref)
			assert.Equal(t, want.line, got.line, "%s's line of %s, against the page's", name, ref)
			// The age is of the same last event, drawn when the view was.
			lo, hi := got.from.Sub(at)-time.Second, got.to.Sub(at)+time.Second
			assert.True(t, got.age >= lo && got.age <= hi, "%s's age of %s is %s, want between %s and %s", name, ref, got.age, lo, hi)
		}
	}
	assert.Equal(t, "error", views["page"][w.neglected.String()].state)
	assert.True(t, strings.HasPrefix(views["page"][w.reviewed.String()].line, "merged as "))
	assert.False(t, slices.ContainsFunc(names, func(n string) bool { _, ok := views[n][fake.String()]; return ok }))
}
