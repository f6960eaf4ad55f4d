package poller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_SearchOfMoreThanAThousandPRsMissesNoSignal: GitHub's search
// shows at most 1,000 results of a query ("REST API endpoints for
// search"). In an organisation with 1,053 open PRs by the watched author
// (1,050 of them in a repository prloop does not watch), the search still
// shows the watched ones, the oldest past the first 1,000 included (it is
// partitioned by created:), so their repository stays on the idle cadence,
// and a reviewer's reaction on each of them is seen through the search
// within an interval.
func TestPoller_SearchOfMoreThanAThousandPRsMissesNoSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 100)
	e.sim.SetSearchPerMinute(1 << 20) // a round of 12 searches every interval
	bulk, err := e.sim.CreateRepo("acme", "bulk", map[string]string{"README.md": "x\n"})
	require.NoError(t, err)
	for range 7 { // 150 PRs a second: seven seconds of them, after e.pr
		_, err := e.sim.OpenPRs(bulk, 150, "agent")
		require.NoError(t, err)
		e.sim.Advance(time.Second)
	}
	newer, err := e.sim.OpenPRs(e.repo, 2, "agent")
	require.NoError(t, err)
	watched := []ghref.PR{e.pr, newer[0], newer[1]}
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{e.repo.String()}
		c.WatchAuthors = []string{"agent"}
		c.IdleProbeInterval = time.Hour
		// A round is 12 searches (ten pages to the cap, then the rest),
		// which on a loaded machine take seconds: the interval leaves them
		// time to end within the coverage they give (three intervals).
		c.PollInterval = 3 * time.Second
		c.Search, c.SearchPerMinute = true, 300 // 15 a round
	}))
	for _, pr := range watched {
		e.rec.Wait(t, pr, events.TypeReviewPending, waitFor)
	}
	searches := func() int { return e.sim.Stats().ByRoute["GET /search/issues"] }
	from := searches()
	require.Eventually(t, func() bool { return searches() >= from+12 }, waitFor, 10*time.Millisecond)
	probed := c.of(e.repo)
	from = searches()
	const rounds = 6
	require.Eventually(t, func() bool { return searches() >= from+rounds*12 }, waitFor, 10*time.Millisecond)
	assert.LessOrEqual(t, c.of(e.repo)-probed, 2, "the search shows every watched PR: their repository is not probed on each of %d intervals (a round slower than the coverage on a loaded machine lets the lists probe once)", rounds)

	for _, pr := range watched {
		e.tick()
		_, err := e.sim.AddReaction(pr, "alice", "eyes")
		require.NoError(t, err)
		e.rec.Wait(t, pr, events.TypeReviewInProgress, waitFor)
	}
}
