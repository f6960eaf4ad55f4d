package poller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/poller"
)

// TestPoller_OrganisationGainsAndLosesRepositories: with PRLOOP_REPOS=acme/*,
// a repository created in the organisation while prloop runs is watched
// (its PR reported) at the next discovery, without a restart; one archived
// and one deleted are no longer probed.
func TestPoller_OrganisationGainsAndLosesRepositories(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{"acme/*"}
		c.DiscoveryInterval = 100 * time.Millisecond
	}))
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)

	added, err := e.sim.CreateRepo("acme", "added", map[string]string{"a": "a"})
	require.NoError(t, err)
	doomed, err := e.sim.CreateRepo("acme", "doomed", map[string]string{"a": "a"})
	require.NoError(t, err)
	prs, err := e.sim.OpenPRs(added, 1, "agent")
	require.NoError(t, err)
	e.rec.Wait(t, prs[0], events.TypeReviewPending, waitFor)
	require.Eventually(t, func() bool { return c.of(doomed) > 0 }, waitFor, 10*time.Millisecond, "the other new repository is probed too")

	require.NoError(t, e.sim.SetArchived(added, false)) // still there: stays
	require.NoError(t, e.sim.DeleteRepo(doomed))
	other, err := e.sim.CreateRepo("acme", "archived", map[string]string{"a": "a"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.of(other) > 0 }, waitFor, 10*time.Millisecond)
	require.NoError(t, e.sim.SetArchived(other, true))

	// Two discoveries later, neither is probed any more.
	settle := func() {
		from := c.of(e.repo)
		require.Eventually(t, func() bool { return c.of(e.repo) >= from+6 }, waitFor, 10*time.Millisecond) // 300 ms: three discoveries
	}
	settle()
	gone, archived := c.of(doomed), c.of(other)
	settle()
	assert.Equal(t, gone, c.of(doomed), "a deleted repository is not probed")
	assert.Equal(t, archived, c.of(other), "an archived repository is not probed")
	from := c.of(added)
	require.Eventually(t, func() bool { return c.of(added) > from }, waitFor, 10*time.Millisecond, "the repository that stays is still probed")
}

// TestPoller_InstallationRepositoriesAreWatched: with PRLOOP_REPOS=* (an
// App installation), the installation's repositories are watched, and one
// taken out of the installation is no longer probed.
func TestPoller_InstallationRepositoriesAreWatched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := e.sim.CreateRepo("elsewhere", "tools", map[string]string{"a": "a"})
	require.NoError(t, err)
	prs, err := e.sim.OpenPRs(other, 1, "agent")
	require.NoError(t, err)
	e.sim.SetInstallationRepos(tokPrloop, e.repo, other)
	_, c := e.startCounted(e.config(func(c *poller.Config) {
		c.Repos = []string{poller.InstallationRepos}
		c.DiscoveryInterval = 100 * time.Millisecond
	}))
	e.rec.Wait(t, e.pr, events.TypeReviewPending, waitFor)
	e.rec.Wait(t, prs[0], events.TypeReviewPending, waitFor)
	require.NoError(t, e.sim.ClosePR(prs[0])) // nothing watched there any more

	e.sim.SetInstallationRepos(tokPrloop, e.repo)
	settle := func() {
		from := c.of(e.repo)
		require.Eventually(t, func() bool { return c.of(e.repo) >= from+6 }, waitFor, 10*time.Millisecond)
	}
	settle()
	dropped := c.of(other)
	settle()
	assert.Equal(t, dropped, c.of(other), "out of the installation: not probed")
}
