package merger_test

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim/simtest"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/merger"
)

// TestMerger_RebaseWithAppCredentials: under GitHub App auth git's
// credential is an installation token, not the API token, and the
// simulator here serves git over HTTP asking for a token on every request.
// The rebase fetches and pushes with that token (it used to send none to
// an http remote, so the fetch failed), and the token never appears in a
// process's command line: only in the environment of prloop's own git.
func TestMerger_RebaseWithAppCredentials(t *testing.T) {
	t.Parallel()
	const appToken = "ghs_installation_token_for_git"
	e := newEnvWith(t, simtest.MaxPerPage(simtest.GitHubPages), simtest.GitHTTP())
	e.sim.AddToken(appToken, simtest.Login)
	tokens := 0
	e.deps = func(d *merger.Deps) {
		d.GitToken = func(context.Context) (github.Secret, error) {
			e.mu.Lock()
			tokens++
			e.mu.Unlock()
			return appToken, nil
		}
	}
	header := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + appToken))
	scan := proctest.ScanCmdlines(t, "refs/prloop/", appToken, header)

	pr1, head1 := e.openPR("feat-a", "Add a", map[string]string{"a.txt": "a\n"})
	pr2, head2 := e.openPR("feat-b", "Add b", map[string]string{"b.txt": "b\n"})
	e.start(config(func(c *merger.Config) { c.UpdateMethod = merger.UpdateRebase }), "replica-1")
	e.approve(pr1, head1, "1")
	e.approve(pr2, head2, "1")

	m1 := e.rec.Wait(t, pr1, events.TypeMerged, waitFor).Data.(*events.Merged)
	m2 := e.rec.Wait(t, pr2, events.TypeMerged, waitFor).Data.(*events.Merged)
	require.NotEqual(t, head2, m2.HeadSHA, "PR 2 was rebased before its merge")
	assert.Equal(t, m1.MergeSHA, e.git("rev-parse", m2.HeadSHA+"^"), "PR 2 was rebased onto PR 1's squash commit")

	hits, sawGit := scan()
	assert.Empty(t, hits, "the token in a command line")
	assert.Positive(t, sawGit, "the scan saw the rebase's git command lines")
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.GreaterOrEqual(t, tokens, 3, "a fresh token for each fetch and the push")
}
