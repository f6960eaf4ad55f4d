package poller

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

func TestProbeDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const interval = 30 * time.Second
	later := now.Add(9 * time.Minute)
	tests := []struct {
		name string
		f    probeFacts
		want bool
	}{
		{name: "never probed", f: probeFacts{}, want: true},
		{name: "quiet, idle probe not due", f: probeFacts{idleAt: later}, want: false},
		{name: "quiet, idle probe due", f: probeFacts{idleAt: now}, want: true},
		{name: "quiet, within half an interval of it (jitter)", f: probeFacts{idleAt: now.Add(10 * time.Second)}, want: true},
		{name: "a watched PR the search did not show", f: probeFacts{idleAt: later, uncovered: 1}, want: true},
		{name: "a watched PR needs the probe (recheck, timeout, outbox)", f: probeFacts{idleAt: later, needsProbe: true}, want: true},
		{name: "quiet, but only the probe would show a new PR (no webhook, no search)", f: probeFacts{idleAt: later, newPRsUnseen: true}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, probeDue(tt.f, now, interval))
		})
	}
}

// TestNextIdleProbe: the first idle probe falls anywhere in the idle
// interval (spread), the later ones a whole idle interval apart.
func TestNextIdleProbe(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const idle = 10 * time.Minute
	assert.Equal(t, now.Add(idle), nextIdleProbe(false, now, idle))
	seen := map[bool]bool{}
	for range 100 {
		at := nextIdleProbe(true, now, idle)
		require.False(t, at.Before(now))
		require.True(t, at.Before(now.Add(idle)))
		seen[at.Sub(now) < idle/2] = true
	}
	assert.Len(t, seen, 2, "spread over the interval")
	assert.Equal(t, now, nextIdleProbe(true, now, 0), "0: every interval")
}

// fakeSearch answers each query with the items set for it.
type fakeSearch struct {
	items      []github.SearchItem
	incomplete bool
	err        error
}

func (f *fakeSearch) SearchIssues(context.Context, string, int) (github.SearchResult, error) {
	return github.SearchResult{Items: f.items, Total: len(f.items), Incomplete: f.incomplete, Requests: 1}, f.err
}

func searchItem(t *testing.T, repo string, n int, updated string, eyes int) github.SearchItem {
	t.Helper()
	var it github.SearchItem
	require.NoError(t, json.Unmarshal([]byte(`{"number":`+itoa(n)+`,"repository_url":"https://api.github.com/repos/`+repo+`","state":"open",
		"updated_at":"`+updated+`","comments":0,"pull_request":{"url":"x"},"reactions":{"total_count":`+itoa(eyes)+`,"eyes":`+itoa(eyes)+`}}`), &it))
	return it
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestSearchWatch_RoundProbesWhatChanged: a round probes the repositories
// whose PRs changed, appeared or left since the last one, and only those;
// a PR a partial answer did not show is neither covered nor taken as gone.
func TestSearchWatch_RoundProbesWhatChanged(t *testing.T) {
	t.Parallel()
	fs := &fakeSearch{}
	var kicked []string
	w := &searchWatch{
		api: fs, interval: time.Second, perMinute: 20, queries: func() []string { return []string{"q"} },
		kick: func(r ghref.Repo) { kicked = append(kicked, r.String()) }, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	a1 := ghref.Repo{Owner: "acme", Name: "a"}.PR(1)
	b1 := ghref.Repo{Owner: "acme", Name: "b"}.PR(1)
	ctx := t.Context()

	fs.items = []github.SearchItem{searchItem(t, "acme/a", 1, "2026-11-27T12:00:00Z", 0), searchItem(t, "acme/b", 1, "2026-11-27T12:00:00Z", 0)}
	w.round(ctx)
	assert.Empty(t, kicked, "the first round only learns")
	assert.True(t, w.covers(a1, time.Now()))
	assert.False(t, w.covers(a1, time.Now().Add(coverageLasts*time.Second+time.Millisecond)), "coverage ends when rounds stop")

	w.round(ctx)
	assert.Empty(t, kicked, "nothing changed")

	fs.items[0] = searchItem(t, "acme/a", 1, "2026-11-27T12:00:00Z", 1) // a reaction: updated_at stays
	w.round(ctx)
	assert.Equal(t, []string{"acme/a"}, kicked)

	kicked = nil
	fs.items = fs.items[:1] // b#1 left the results (closed, relabelled)
	w.round(ctx)
	assert.Equal(t, []string{"acme/b"}, kicked)
	assert.False(t, w.covers(b1, time.Now()))

	kicked = nil
	fs.items = nil
	fs.incomplete = true // a partial answer that did not show a#1
	w.round(ctx)
	assert.Empty(t, kicked, "not shown by a partial answer is not gone")
	assert.False(t, w.covers(a1, time.Now()), "nor covered: the lists probe it")
}
