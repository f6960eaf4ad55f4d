package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/services/poller"
)

// searchingProbeLog is a probeLog that searches too.
type searchingProbeLog struct {
	*probeLog
	search poller.Searcher
}

func (p searchingProbeLog) SearchIssues(ctx context.Context, q string, maxRequests int) (github.SearchResult, error) {
	return p.search.SearchIssues(ctx, q, maxRequests)
}

// TestPoller_OneReplicaSearchesForAll: GitHub's 30 searches a minute are
// the installation's, not each replica's. Of two pollers, one at a time
// holds the search lease and searches; the searches a minute stay within
// PRLOOP_POLL_SEARCH_PER_MINUTE, not twice it. The other replica applies
// the rounds the holder stores: a reviewer's reaction on a PR in a
// repository it probes at the idle cadence is seen through the search.
// When the holder dies, the other takes the search over.
func TestPoller_OneReplicaSearchesForAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 100)
	e.sim.SetSearchPerMinute(1 << 20) // the test measures the rate itself
	var repos []string
	prs := map[string]ghref.PR{}
	for _, name := range splitNames(t, "acme", "s", 6, replicaA, replicaB) {
		r, err := e.sim.CreateRepo(name.Owner, name.Name, map[string]string{"a": "a"})
		require.NoError(t, err)
		require.NoError(t, e.sim.SetPermission(r, "alice", "write"))
		opened, err := e.sim.OpenPRs(r, 1, "agent")
		require.NoError(t, err)
		prs[r.Key()] = opened[0]
		repos = append(repos, r.String())
	}
	const interval = time.Second
	const perMinute = 60 // one search a round: the PRs fit one page
	cfg := e.config(func(c *poller.Config) {
		c.Repos = repos
		c.PollInterval = interval
		c.WatchAuthors = []string{"agent"}
		c.IdleProbeInterval = time.Hour
		c.Search, c.SearchPerMinute = true, perMinute
	})
	type replica struct {
		log  *probeLog
		sh   *poller.Sharder
		conn *natsx.Conn
		stop func()
	}
	start := func(id string) replica {
		conn := natstest.Connect(t, e.conn) // each replica its own connection, as processes
		pl, sh, stop := e.startReplica(id, conn, cfg, func(pl *probeLog) poller.GitHub {
			return searchingProbeLog{probeLog: pl, search: e.client}
		})
		return replica{log: pl, sh: sh, conn: conn, stop: stop}
	}
	a, b := start(replicaA), start(replicaB)
	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeReviewPending, waitFor)
	}
	leases, err := poller.EnsureLeases(t.Context(), e.conn.JS, 1)
	require.NoError(t, err)
	holder := func() string {
		rec, ok, err := kvlease.Peek(t.Context(), leases, "search.lease")
		require.NoError(t, err)
		if !ok || rec.Expired(time.Now()) {
			return ""
		}
		return rec.Holder
	}
	require.Eventually(t, func() bool {
		return holder() != "" && a.sh.Held() > 0 && b.sh.Held() > 0 && a.sh.Held()+b.sh.Held() == len(repos)
	}, waitFor, 20*time.Millisecond, "both replicas lease repositories (%d, %d), one holds the search (%q)", a.sh.Held(), b.sh.Held(), holder())

	// The searches a minute: one replica's rounds, not two.
	searches := func() int { return e.sim.Stats().ByRoute["GET /search/issues"] }
	const window = 6 * interval
	from, began := searches(), time.Now()
	require.Eventually(t, func() bool { return time.Since(began) >= window }, waitFor, 20*time.Millisecond)
	n, took := searches()-from, time.Since(began)
	allowed := int(perMinute*took.Minutes()) + 1 // a round may fall on either edge
	assert.LessOrEqual(t, n, allowed, "%d searches in %s: the installation's share is %d a minute", n, took.Round(time.Millisecond), perMinute)

	// A signal in a repository of the replica that does not search.
	lead, follow := a, b
	if holder() != a.sh.ID() {
		lead, follow = b, a
	}
	require.Equal(t, lead.sh.ID(), holder())
	var repo, leadRepo ghref.Repo
	for _, r := range repos {
		ref, err := ghref.ParseRepo(r)
		require.NoError(t, err)
		if follow.sh.Owns(ref) {
			repo = ref
		} else {
			leadRepo = ref
		}
	}
	require.NotEmpty(t, repo.Name)
	require.NotEmpty(t, leadRepo.Name)
	since := time.Now()
	require.Eventually(t, func() bool { return time.Since(since) >= 4*interval }, waitFor, 20*time.Millisecond)
	assert.False(t, follow.log.since(since)[repo.Key()], "%s is on the idle cadence: the stored rounds cover it", repo)
	e.tick()
	_, err = e.sim.AddReaction(prs[repo.Key()], "alice", "eyes")
	require.NoError(t, err)
	e.rec.Wait(t, prs[repo.Key()], events.TypeReviewInProgress, waitFor)

	// The holder dies without releasing its lease: the other searches.
	lead.conn.NC.Close()
	lead.stop()
	require.Eventually(t, func() bool { return holder() == follow.sh.ID() }, waitFor, 20*time.Millisecond)
	e.tick()
	_, err = e.sim.AddReaction(prs[leadRepo.Key()], "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, prs[leadRepo.Key()], events.TypeReviewApproved, waitFor)
}
