package poller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/services/poller"
)

// probeCounter counts each repository's probes (its open-pulls list reads)
// and passes everything, the search included, to the real client.
type probeCounter struct {
	*github.Client
	mu     sync.Mutex
	probes map[string]int
}

// ListPullSummariesIfChanged counts a probe once its list is read: a PR
// opened after that is not in it.
func (p *probeCounter) ListPullSummariesIfChanged(ctx context.Context, repo ghref.Repo, st, prev string) ([]github.PullSummary, string, error) {
	defer func() {
		p.mu.Lock()
		p.probes[repo.Key()]++
		p.mu.Unlock()
	}()
	return p.Client.ListPullSummariesIfChanged(ctx, repo, st, prev)
}

func (p *probeCounter) of(repo ghref.Repo) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes[repo.Key()]
}

// startCounted runs a poller of e whose probes c counts.
func (e *env) startCounted(cfg poller.Config) (*poller.Service, *probeCounter) {
	e.t.Helper()
	c := &probeCounter{Client: e.client, probes: map[string]int{}}
	s := poller.New(cfg, poller.Deps{
		GitHub: c, Store: e.store, JS: e.conn.JS, Log: quiet(), Self: "prloop-bot",
		Merged: poller.MergedByPrloop(e.conn.JS), Now: e.sim.Now, Metrics: metrics.NewPoller(e.reg),
	})
	e.run(s)
	return s, c
}

// quietIntervals is how many poll intervals a test lets pass to show that
// a repository is not probed on each: with 50 ms intervals, far more than
// the one probe an idle repository gets in an hour.
const quietIntervals = 20

// TestPoller_RepositoryWithoutWatchedPRsIsProbedRarely: of two discovered
// repositories, the one whose open PRs are all outside
// PRLOOP_WATCH_AUTHORS is probed once, then only every
// PRLOOP_IDLE_PROBE_INTERVAL; the one with a watched PR (the search off)
// is probed every interval. A webhook is configured: it is what shows a
// PR opened in the quiet one.
func TestPoller_RepositoryWithoutWatchedPRsIsProbedRarely(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	still, err := e.sim.CreateRepo("acme", "quiet", map[string]string{"a": "a"})
	require.NoError(t, err)
	_, err = e.sim.OpenPRs(still, 3, "someone")
	require.NoError(t, err)
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String(), still.String()}
		c.WatchAuthors = []string{"agent"}
		c.IdleProbeInterval = time.Hour
		c.WebhookSecret = "hook-secret"
	}))
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
	require.Eventually(t, func() bool { return c.of(still) >= 1 }, waitFor, 10*time.Millisecond, "probed at start")
	from := c.of(e.repo)
	require.Eventually(t, func() bool { return c.of(e.repo) >= from+quietIntervals }, waitFor, 10*time.Millisecond)
	assert.Equal(t, 1, c.of(still), "no watched PR there: not probed again within the hour")
}

// TestPoller_SignalInARarelyProbedRepositoryIsSeenThroughTheSearch: a
// repository whose watched PRs the search shows is probed only at the
// idle cadence; a reviewer's reaction there (no webhook: GitHub sends none
// for reactions) is still seen within an interval, because the search
// shows the PR's reactions rollup change and the repository is probed at
// once. Then the same for the end of the review (a comment, which moves
// updated_at, and the 👀 taken back).
func TestPoller_SignalInARarelyProbedRepositoryIsSeenThroughTheSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sim.SetSearchPerMinute(1 << 20) // a search every 50 ms
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String()}
		c.WatchAuthors = []string{"agent"}
		c.IdleProbeInterval = time.Hour
		c.Search, c.SearchPerMinute = true, 20
	}))
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
	searches := func() int { return e.sim.Stats().ByRoute["GET /search/issues"] }
	from := searches()
	require.Eventually(t, func() bool { return searches() >= from+quietIntervals }, waitFor, 10*time.Millisecond)
	probed := c.of(e.repo)
	from = searches()
	require.Eventually(t, func() bool { return searches() >= from+quietIntervals }, waitFor, 10*time.Millisecond)
	// A search round slower than coverageLasts intervals on a loaded
	// machine lets the lists probe once, by design; every interval would
	// be 20.
	assert.LessOrEqual(t, c.of(e.repo)-probed, 2, "the search shows the watched PR: not probed on each of %d intervals", quietIntervals)

	e.tick()
	eyes, err := e.sim.AddReaction(e.pr, "alice", "eyes")
	require.NoError(t, err)
	e.rec.Wait(t, e.pr, events.TypeReviewInProgress, newSignalWithin)

	// The review ends: a comment, and the 👀 taken back.
	e.tick()
	id, err := e.sim.AddIssueComment(e.pr, "alice", "Please handle the error case.")
	require.NoError(t, err)
	require.NoError(t, e.sim.RemoveReaction(e.pr, eyes))
	ev := e.rec.Wait(t, e.pr, events.TypeFeedbackReceived, newSignalWithin)
	assert.Contains(t, ev.Data.(*events.FeedbackReceived).CommentIDs, id)
}

// TestPoller_WebhookReachesARarelyProbedRepository: with the search off, a
// PR the agent opens in a repository that had no watched PR (probed once
// an hour) is watched as soon as its pull_request webhook arrives.
func TestPoller_WebhookReachesARarelyProbedRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	still, err := e.sim.CreateRepo("acme", "quiet", map[string]string{"a": "a"})
	require.NoError(t, err)
	s, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String(), still.String()}
		c.WatchAuthors = []string{"agent"}
		c.IdleProbeInterval = time.Hour
		c.WebhookSecret = "hook-secret"
	}))
	require.Eventually(t, func() bool { return c.of(still) >= 1 }, waitFor, 10*time.Millisecond, "probed at start")
	srv := httptest.NewServer(poller.WebhookHandler([]byte("hook-secret"), s, quiet()))
	t.Cleanup(srv.Close)

	prs, err := e.sim.OpenPRs(still, 1, "agent")
	require.NoError(t, err)
	from := c.of(e.repo)
	require.Eventually(t, func() bool { return c.of(e.repo) >= from+3 }, waitFor, 10*time.Millisecond)
	assert.Empty(t, e.rec.Types(prs[0]), "not probed meanwhile: the poller has not seen the new PR")

	body := []byte(`{"action":"opened","pull_request":{"number":` + strconv.Itoa(prs[0].Number) + `},"repository":{"name":"quiet","owner":{"login":"acme"}}}`)
	assert.Equal(t, http.StatusAccepted, postHook(t, srv.URL, "pull_request", body, signHook([]byte("hook-secret"), body)))
	e.rec.Wait(t, prs[0], events.TypeReviewPending, newSignalWithin)
}

// TestPoller_NewPRWithNoFastPathIsSeenWithinAnInterval: with neither a
// webhook nor a search (no PRLOOP_WATCH_AUTHORS or PRLOOP_WATCH_LABEL),
// only the probe shows a PR opened in a repository that had none, so that
// repository is probed every interval, not at the idle cadence. Chaos seed
// 41 found PRs unseen for minutes this way.
func TestPoller_NewPRWithNoFastPathIsSeenWithinAnInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	empty, err := e.sim.CreateRepo("acme", "empty", map[string]string{"a": "a"})
	require.NoError(t, err)
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String(), empty.String()}
		c.IdleProbeInterval = time.Hour
	}))
	require.Eventually(t, func() bool { return c.of(empty) >= 1 }, waitFor, 10*time.Millisecond, "probed at start")
	prs, err := e.sim.OpenPRs(empty, 1, "agent")
	require.NoError(t, err)
	e.rec.Wait(t, prs[0], events.TypeReviewPending, newSignalWithin)
}
