package poller_test

import (
	"context"
	"fmt"
	"sync"
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
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// probeLog records which repositories one poller probed, and when.
type probeLog struct {
	poller.GitHub
	mu    sync.Mutex
	probe map[string]time.Time
}

func (p *probeLog) ListPullSummariesIfChanged(ctx context.Context, repo ghref.Repo, st, prev string) ([]github.PullSummary, string, error) {
	p.mu.Lock()
	p.probe[repo.Key()] = time.Now()
	p.mu.Unlock()
	return p.GitHub.ListPullSummariesIfChanged(ctx, repo, st, prev)
}

// since returns the repositories probed after t.
func (p *probeLog) since(t time.Time) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for k, at := range p.probe {
		if at.After(t) {
			out[k] = true
		}
	}
	return out
}

// The ids of the two replicas in the tests that run two.
const replicaA, replicaB = "replica-a", "replica-b"

// splitNames returns n repository names of owner, prefix and a number,
// chosen so that rendezvous hashing gives each of ids an equal share: a
// test of replicas sharing work must not depend on how random ids fall.
func splitNames(t *testing.T, owner, prefix string, n int, ids ...string) []ghref.Repo {
	t.Helper()
	share := n / len(ids)
	count := map[string]int{}
	var out []ghref.Repo
	for i := 0; len(out) < n; i++ {
		require.Less(t, i, 100*n, "no balanced split of %d names over %v", n, ids)
		r := ghref.Repo{Owner: owner, Name: fmt.Sprintf("%s%02d", prefix, i)}
		if id := poller.Preferred(ids, r); count[id] < share {
			count[id]++
			out = append(out, r)
		}
	}
	return out
}

// startReplica runs a poller replica named id of cfg on conn, sharding by
// leases of cfg.PollInterval, its GitHub client the probeLog wrapped by gh;
// it returns the replica's probes, its sharder and its stop.
func (e *env) startReplica(id string, conn *natsx.Conn, cfg poller.Config, gh func(*probeLog) poller.GitHub) (*probeLog, *poller.Sharder, func()) {
	t := e.t
	leases, err := poller.EnsureLeases(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	kv, err := kvlease.OpenBucket(t.Context(), conn.JS, state.Bucket)
	require.NoError(t, err)
	pl := &probeLog{GitHub: e.client, probe: map[string]time.Time{}}
	sh := poller.NewSharderAs(leases, id, cfg.PollInterval, quiet())
	s := poller.New(cfg, poller.Deps{
		GitHub: gh(pl), Store: state.NewStore(kv), JS: conn.JS, Log: quiet(), Self: "prloop-bot", Now: e.sim.Now,
		Shard: sh, NewPRs: poller.WatchNewPRs(kv),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return pl, sh, stop
}

// TestPoller_TwoReplicasShareRepositories: two pollers over 20 repositories
// probe disjoint halves that cover all; when one dies without releasing its
// leases, the other takes every repository over within two intervals.
func TestPoller_TwoReplicasShareRepositories(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var repos []string
	var prs []ghref.PR
	for _, name := range splitNames(t, "acme", "r", 20, replicaA, replicaB) {
		r, err := e.sim.CreateRepo(name.Owner, name.Name, map[string]string{"a": "a"})
		require.NoError(t, err)
		require.NoError(t, e.sim.SetPermission(r, "alice", "write"))
		opened, err := e.sim.OpenPRs(r, 2, "agent")
		require.NoError(t, err)
		prs = append(prs, opened...)
		repos = append(repos, r.String())
	}
	const interval = time.Second
	cfg := e.config(func(c *poller.Config) { c.Repos = repos; c.PollInterval = interval })

	start := func(id string, conn *natsx.Conn) (*probeLog, *poller.Sharder, func()) {
		return e.startReplica(id, conn, cfg, func(pl *probeLog) poller.GitHub { return pl })
	}
	// Each replica has its own connection, as separate processes would.
	connA, connB := natstest.Connect(t, e.conn), natstest.Connect(t, e.conn)
	logA, shA, stopA := start(replicaA, connA)
	logB, shB, _ := start(replicaB, connB)

	for _, pr := range prs {
		e.rec.Wait(t, pr, events.TypeReviewPending, 20*time.Second)
	}
	// Wait for a settled split: both replicas hold some, together all, and
	// nothing moved for a whole interval (handovers happen as the second
	// replica appears).
	split, settledSince := -1, time.Now()
	require.Eventually(t, func() bool {
		a, b := shA.Held(), shB.Held()
		if a+b != 20 || a == 0 || b == 0 || a != split {
			split, settledSince = a, time.Now()
			return false
		}
		return time.Since(settledSince) > interval
	}, 20*time.Second, 20*time.Millisecond, "leases split between the replicas: A %d, B %d", shA.Held(), shB.Held())

	// Over three intervals, every repository is probed, each by one replica.
	from := time.Now()
	require.Eventually(t, func() bool { return time.Since(from) > 3*interval }, 10*time.Second, 50*time.Millisecond)
	a, b := logA.since(from), logB.since(from)
	for k := range a {
		assert.False(t, b[k], "%s probed by both replicas", k)
	}
	assert.Len(t, a, shA.Held())
	assert.Len(t, b, shB.Held())
	assert.Equal(t, 20, len(a)+len(b), "every repository probed")
	for _, pr := range prs {
		assert.Equal(t, 1, e.rec.Count(pr, events.TypeReviewPending), "%s: one status, not one per replica", pr)
	}

	// A dies: its connection drops, its leases are never released.
	connA.NC.Close()
	stopA()
	died := time.Now()
	require.Eventually(t, func() bool { return shB.Held() == 20 }, 2*interval+2*time.Second, 20*time.Millisecond,
		"B took %d of 20 repositories", shB.Held())
	require.Eventually(t, func() bool { return len(logB.since(died)) == 20 }, 2*interval+2*time.Second, 20*time.Millisecond)
	t.Logf("takeover: all 20 repositories probed by B %s after A died (interval %s)", time.Since(died).Round(10*time.Millisecond), interval)

	// And B still reacts to reviewers on A's former repositories.
	pr := prs[0]
	e.tick()
	_, err := e.sim.AddReaction(pr, "alice", "+1")
	require.NoError(t, err)
	e.rec.Wait(t, pr, events.TypeReviewApproved, 10*time.Second)
}
