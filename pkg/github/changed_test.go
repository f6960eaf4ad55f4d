package github

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_ListIfChangedSkipsUnchangedLists: every page is revalidated
// (free), and an unchanged list returns no items and the same version; a
// change on the last page alone is seen.
func TestClient_ListIfChangedSkipsUnchangedLists(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	prs, err := e.sim.OpenPRs(e.repo, 250, "")
	require.NoError(t, err)
	ctx := t.Context()

	pulls, v1, err := e.client.ListPullSummariesIfChanged(ctx, e.repo, "open", "")
	require.NoError(t, err)
	assert.Len(t, pulls, 250)
	require.NotEmpty(t, v1)
	info0, err := e.sim.PRInfo(prs[0])
	require.NoError(t, err)
	i := slices.IndexFunc(pulls, func(p PullSummary) bool { return p.Number == prs[0].Number })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, info0.HeadSHA, pulls[i].Head.SHA)
	assert.Equal(t, info0.Author, pulls[i].User.Login)
	assert.Equal(t, info0.CreatedAt.UTC(), pulls[i].CreatedAt.UTC())

	e.reset()
	pulls, v2, err := e.client.ListPullSummariesIfChanged(ctx, e.repo, "open", v1)
	require.NoError(t, err)
	assert.Nil(t, pulls, "unchanged: nothing decoded")
	assert.Equal(t, v1, v2)
	st := e.stats(t)
	assert.Equal(t, 3, st.Total, "every page revalidated")
	assert.Equal(t, 3, st.NotCounted, "all three were 304s")

	// A push to the oldest PR moves it to the top (sorted by updated_at,
	// newest first): every page shifts by one item.
	info, err := e.sim.PRInfo(prs[0])
	require.NoError(t, err)
	e.sim.Advance(time.Second)
	_, err = e.sim.PushCommit(e.repo, info.HeadRef, "", map[string]string{"x": "y"}, "more")
	require.NoError(t, err)
	e.reset()
	pulls, v3, err := e.client.ListPullSummariesIfChanged(ctx, e.repo, "open", v1)
	require.NoError(t, err)
	assert.NotEqual(t, v1, v3)
	assert.Len(t, pulls, 250)
	assert.Equal(t, prs[0].Number, pulls[0].Number, "the pushed PR comes first")

	issues, iv, err := e.client.ListIssueSummariesIfChanged(ctx, e.repo, IssueListOptions{State: "open"}, "")
	require.NoError(t, err)
	assert.Len(t, issues, 250)
	_, err = e.sim.AddReaction(prs[5], "", "eyes")
	require.NoError(t, err)
	issues, iv2, err := e.client.ListIssueSummariesIfChanged(ctx, e.repo, IssueListOptions{State: "open"}, iv)
	require.NoError(t, err)
	assert.NotEqual(t, iv, iv2, "a reaction changes the issue list's rollup")
	assert.Len(t, issues, 250)
	j := slices.IndexFunc(issues, func(is IssueSummary) bool { return is.Number == prs[5].Number })
	require.GreaterOrEqual(t, j, 0)
	assert.True(t, issues[j].IsPull())
	assert.Equal(t, 1, issues[j].Reactions.GetEyes())
}

// TestCacheEntry_KeepsOnlyCompressedBytes: a remembered body occupies what
// the byte bound counts, not the compressor's worst-case buffer.
func TestCacheEntry_KeepsOnlyCompressedBytes(t *testing.T) {
	t.Parallel()
	body := []byte(`[` + strings.Repeat(`{"url":"https://api.github.com/repos/acme/widgets/pulls/1","state":"open"},`, 2000) + `{}]`)
	h := http.Header{"Etag": {`"x"`}, "Content-Type": {"application/json"}}
	e := newEntry("k", h, body)
	require.NotNil(t, e)
	assert.LessOrEqual(t, cap(e.body), len(e.body)+len(e.body)/8+64, "no hidden worst-case buffer behind the bytes")
	assert.Less(t, len(e.body), len(body)/5, "GitHub JSON compresses well")
	got, err := (&lazySink{lazy: &cachedBody{compressed: e.body}}).Bytes()
	require.NoError(t, err)
	assert.Equal(t, body, got)
}

// TestClient_ListIfChangedStopsBeforeTheKnownEmptyPage: a list of exactly
// one full page (sorted by updated_at, newest first) is read as page 1 and
// an empty page 2 the first time; while page 1 revalidates unchanged, the
// empty page is not asked for again. Whatever joins the list, a new PR or
// an old one reopened, moves page 1 and is seen.
func TestClient_ListIfChangedStopsBeforeTheKnownEmptyPage(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	prs, err := e.sim.OpenPRs(e.repo, 101, "")
	require.NoError(t, err)
	ctx := t.Context()
	e.sim.Advance(time.Second)
	require.NoError(t, e.sim.ClosePR(prs[0])) // the oldest: 100 open remain

	lists := []struct {
		name string
		list func(prev string) (int, string, error)
	}{
		{name: "pulls", list: func(prev string) (int, string, error) {
			ps, v, err := e.client.ListPullSummariesIfChanged(ctx, e.repo, "open", prev)
			return len(ps), v, err
		}},
		{name: "issues", list: func(prev string) (int, string, error) {
			is, v, err := e.client.ListIssueSummariesIfChanged(ctx, e.repo, IssueListOptions{State: "open"}, prev)
			return len(is), v, err
		}},
	}
	versions := make([]string, len(lists))
	for i, l := range lists {
		e.reset()
		n, v, err := l.list("")
		require.NoError(t, err, l.name)
		assert.Equal(t, 100, n, l.name)
		assert.Equal(t, 2, e.stats(t).Total, "%s: page 1 and the empty page 2", l.name)
		versions[i] = v

		e.reset()
		n, v2, err := l.list(v)
		require.NoError(t, err, l.name)
		assert.Zero(t, n, "%s: unchanged", l.name)
		assert.Equal(t, v, v2, l.name)
		st := e.stats(t)
		assert.Equal(t, 1, st.Total, "%s: page 1 alone, a 304", l.name)
		assert.Equal(t, 1, st.NotCounted, l.name)
	}

	// The oldest PR is reopened: it joins the list at the top, not on
	// page 2, so both lists see it without asking for page 2 first.
	e.sim.Advance(time.Second)
	require.NoError(t, e.sim.ReopenPR(prs[0]))
	for i, l := range lists {
		n, v, err := l.list(versions[i])
		require.NoError(t, err, l.name)
		assert.Equal(t, 101, n, "%s: the reopened PR is seen", l.name)
		versions[i] = v
	}
	pulls, _, err := e.client.ListPullSummariesIfChanged(ctx, e.repo, "open", "")
	require.NoError(t, err)
	assert.Equal(t, prs[0].Number, pulls[0].Number, "reopening moved updated_at")
}
