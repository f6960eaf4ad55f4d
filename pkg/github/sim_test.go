package github

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

const simToken = "sim-simtoken-alice-0123456789"

// simEnv is a simulator with one repository and a client for it whose
// sleeps advance the simulator's fake clock instead of waiting.
type simEnv struct {
	sim    *ghsim.Sim
	srv    *httptest.Server
	repo   ghref.Repo
	client *Client
	sleeps *sleepRecorder
	logs   *syncBuffer
	base   int64 // client requests when the sim's stats were last reset
}

// reset zeroes the simulator's counters and remembers the client's.
func (e *simEnv) reset() {
	e.sim.ResetStats()
	e.base = e.client.Stats().Requests
}

// stats returns the simulator's counters once it has recorded every request
// the client sent since reset (the sim records just after answering), which
// also checks that both sides count the same requests.
func (e *simEnv) stats(t *testing.T) ghsim.Stats {
	t.Helper()
	want := int(e.client.Stats().Requests - e.base)
	var st ghsim.Stats
	if !assert.Eventually(t, func() bool {
		st = e.sim.Stats()
		return st.Total == want
	}, 5*time.Second, 5*time.Millisecond) {
		got := e.sim.Stats()
		t.Fatalf("simulator recorded %d requests (%v), client sent %d", got.Total, got.ByRouteStatus, want)
	}
	return st
}

func newSimEnv(t *testing.T, so ghsim.Options, cfg Config, opts Options) *simEnv {
	t.Helper()
	so.Dir = t.TempDir()
	sim, err := ghsim.New(so)
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	// Cleanups run last-in first-out: the sim releases held requests
	// (FaultTimeout) before the server waits for them.
	t.Cleanup(func() { _ = sim.Close() })
	sim.AddToken(simToken, "alice")
	repo, err := sim.CreateRepo("acme", "widgets", map[string]string{"README.md": "# widgets\n"})
	require.NoError(t, err)
	require.NoError(t, sim.SetPermission(repo, "alice", "admin"))

	e := &simEnv{sim: sim, srv: srv, repo: repo, logs: &syncBuffer{}}
	e.sleeps = &sleepRecorder{advance: sim.Advance}
	opts.Sleep = e.sleeps.sleep
	opts.Now = sim.Now
	if opts.Logger == nil {
		opts.Logger = bufferLogger(e.logs)
	}
	cfg.APIURL = srv.URL
	cfg.Token = simToken
	e.client, err = New(t.Context(), cfg, opts)
	require.NoError(t, err)
	return e
}

func (e *simEnv) openPR(t *testing.T, title string) ghref.PR {
	t.Helper()
	branch := fmt.Sprintf("topic-%d", time.Now().UnixNano())
	_, err := e.sim.PushCommit(e.repo, branch, "alice", map[string]string{branch + ".txt": title + "\n"}, title)
	require.NoError(t, err)
	pr, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: title, Head: branch, Base: "main", Author: "alice"})
	require.NoError(t, err)
	return pr
}

const (
	simRoutePull  = "GET /repos/{owner}/{repo}/pulls/{number}"
	simRoutePulls = "GET /repos/{owner}/{repo}/pulls"
	ourRoutePull  = "GET /repos/{owner}/{repo}/pulls/{pull_number}"
)

func requireBackoff(t *testing.T, got []time.Duration, n int) {
	t.Helper()
	require.Len(t, got, n)
	for i, d := range got {
		base := time.Second << i
		assert.GreaterOrEqual(t, d, base, "retry %d", i+1)
		assert.LessOrEqual(t, d, base+base/4, "retry %d", i+1)
	}
}

func TestClient_RetriesOn500And502(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "retry me")
	e.reset()
	e.sim.InjectFault(ghsim.Fault{Method: "GET", Path: `/pulls/\d+$`, Kind: ghsim.FaultStatus500, Times: 2})
	e.sim.InjectFault(ghsim.Fault{Method: "GET", Path: `/pulls/\d+$`, Kind: ghsim.FaultStatus502, Times: 1})

	got, err := e.client.GetPull(t.Context(), pr)
	require.NoError(t, err)
	assert.Equal(t, "retry me", got.GetTitle())

	st := e.stats(t)
	assert.Equal(t, 4, st.ByRoute[simRoutePull], "3 faults + 1 success")
	assert.Equal(t, 2, st.ByRouteStatus[simRoutePull][500])
	assert.Equal(t, 1, st.ByRouteStatus[simRoutePull][502])
	cs := e.client.Stats()
	assert.Equal(t, int64(4), cs.Requests)
	assert.Equal(t, int64(3), cs.Retries)
	assert.Equal(t, int64(3), cs.Routes[RouteOutcome{ourRoutePull, OutcomeServerError}])
	assert.Equal(t, int64(1), cs.Routes[RouteOutcome{ourRoutePull, OutcomeOK}])
	requireBackoff(t, e.sleeps.got(), 3)
}

func TestClient_BackoffSequenceThenGivesUp(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "always failing")
	e.reset()
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultStatus502, Times: 100})

	_, err := e.client.GetPull(t.Context(), pr)
	require.ErrorIs(t, err, ErrServer)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 502, ae.Status)
	assert.Contains(t, err.Error(), "GET /repos/acme/widgets/pulls/1")

	assert.Equal(t, 6, e.stats(t).ByRoute[simRoutePull], "1 attempt + 5 retries")
	assert.Equal(t, int64(5), e.client.Stats().Retries)
	requireBackoff(t, e.sleeps.got(), 5) // 1, 2, 4, 8, 16 s, each + up to 25 %
}

func TestClient_RateLimitWaitsThenRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault ghsim.Fault
		wait  time.Duration
	}{
		{name: "429 Retry-After", fault: ghsim.Fault{Kind: ghsim.FaultStatus429, RetryAfter: 7 * time.Second}, wait: 7 * time.Second},
		{name: "secondary 403 Retry-After", fault: ghsim.Fault{Kind: ghsim.FaultSecondaryLimit, RetryAfter: 42 * time.Second}, wait: 42 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
			pr := e.openPR(t, "limited")
			e.reset()
			f := tt.fault
			f.Path = `/pulls/\d+$`
			e.sim.InjectFault(f)

			got, err := e.client.GetPull(t.Context(), pr)
			require.NoError(t, err)
			assert.Equal(t, "limited", got.GetTitle())
			assert.Equal(t, 2, e.stats(t).ByRoute[simRoutePull])
			assert.Equal(t, []time.Duration{tt.wait}, e.sleeps.got())
			cs := e.client.Stats()
			assert.Equal(t, int64(1), cs.RateLimitWaits)
			assert.Equal(t, int64(1), cs.Retries)
			assert.Equal(t, int64(1), cs.Routes[RouteOutcome{ourRoutePull, OutcomeRateLimited}])
		})
	}
}

func TestClient_SecondaryLimitFromSimulatorBudget(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{SecondaryPerMinute: 2}, Config{}, Options{})
	e.reset()
	for range 3 {
		_, err := e.client.GetRepo(t.Context(), e.repo)
		require.NoError(t, err)
	}
	st := e.stats(t)
	assert.Equal(t, 1, st.ByStatus[403], "the third request met the secondary limit once")
	require.Len(t, e.sleeps.got(), 1)
	assert.Positive(t, e.sleeps.got()[0])
	assert.LessOrEqual(t, e.sleeps.got()[0], time.Minute)
	assert.Equal(t, int64(1), e.client.Stats().RateLimitWaits)
}

func TestClient_PrimaryLimit(t *testing.T) {
	t.Parallel()
	t.Run("fault waits until reset", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{MaxRateLimitWait: 2 * time.Hour}, Options{})
		pr := e.openPR(t, "primary")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultPrimaryLimit})
		before := e.sim.Now()
		_, err := e.client.GetPull(t.Context(), pr)
		require.NoError(t, err)
		assert.Equal(t, 2, e.stats(t).ByRoute[simRoutePull])
		waits := e.sleeps.got()
		require.Len(t, waits, 1)
		reset := e.client.RateLimits()["core"].Reset
		_ = reset
		// The sim's bucket resets an hour after its first request.
		assert.InDelta(t, time.Hour.Seconds(), waits[0].Seconds(), 3)
		assert.True(t, e.sim.Now().After(before.Add(59*time.Minute)))
	})
	t.Run("fault beyond cap is a RateLimitError", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "primary")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultPrimaryLimit})
		_, err := e.client.GetPull(t.Context(), pr)
		require.ErrorIs(t, err, ErrRateLimited)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.False(t, rle.Secondary)
		assert.Equal(t, DefaultMaxRateLimitWait, rle.Limit)
		assert.Greater(t, rle.Wait, DefaultMaxRateLimitWait)
		assert.False(t, rle.Reset.IsZero())
		at, ok := events.RetryAt(err)
		require.True(t, ok, "the reset is when a retry can succeed: the consumer waits for it")
		assert.Equal(t, rle.Reset.Add(time.Second), at)
		assert.Contains(t, err.Error(), "GET /repos/acme/widgets/pulls/1")
		assert.False(t, errors.Is(err, ErrForbidden), "a rate limit is not a permissions problem")
		assert.Equal(t, 1, e.stats(t).ByRoute[simRoutePull])
		assert.Empty(t, e.sleeps.got())
	})
	t.Run("real exhaustion waits before sending", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{PrimaryLimit: 3}, Config{MaxRateLimitWait: 2 * time.Hour}, Options{})
		pr := e.openPR(t, "quota")
		ctx := t.Context()
		_, err := e.client.GetRepo(ctx, e.repo)
		require.NoError(t, err)
		_, err = e.client.GetPull(ctx, pr)
		require.NoError(t, err)
		_, err = e.client.ListLabels(ctx, pr)
		require.NoError(t, err)
		require.Equal(t, 0, e.client.RateLimits()["core"].Remaining)

		_, err = e.client.ListReviews(ctx, pr)
		require.NoError(t, err)
		assert.Zero(t, e.stats(t).ByStatus[403], "the spent quota was waited out, not hit")
		require.Len(t, e.sleeps.got(), 1)
		assert.InDelta(t, time.Hour.Seconds(), e.sleeps.got()[0].Seconds(), 3)
		assert.Equal(t, int64(1), e.client.Stats().RateLimitWaits)
	})
	t.Run("real exhaustion beyond cap sends nothing", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{PrimaryLimit: 1}, Config{}, Options{})
		_, err := e.client.GetRepo(t.Context(), e.repo)
		require.NoError(t, err)
		e.reset()
		_, err = e.client.ListPulls(t.Context(), e.repo, "open")
		require.ErrorIs(t, err, ErrRateLimited)
		assert.Zero(t, e.stats(t).Total)
	})
}

func TestClient_PermissionDeniedIsNotRateLimit(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "forbidden")
	e.reset()
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+/merge$`, Kind: ghsim.FaultForbidden})

	_, err := e.client.Merge(t.Context(), pr, MergeOptions{Method: MergeMethodSquash})
	require.ErrorIs(t, err, ErrForbidden)
	assert.False(t, errors.Is(err, ErrRateLimited))
	assert.Contains(t, err.Error(), "Resource not accessible by integration")
	assert.Contains(t, err.Error(), "PUT /repos/acme/widgets/pulls/1/merge")
	assert.Equal(t, 1, e.stats(t).Total)
	assert.Zero(t, e.client.Stats().Retries)
	assert.Zero(t, e.client.Stats().RateLimitWaits)
	assert.Empty(t, e.sleeps.got())
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	assert.False(t, info.Merged)
}

func TestClient_ClientErrorsTypedNoRetry(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "typed")
	ctx := t.Context()
	tests := []struct {
		name     string
		call     func() error
		sentinel error
	}{
		{name: "404 missing PR", call: func() error { _, err := e.client.GetPull(ctx, e.repo.PR(999)); return err }, sentinel: ErrNotFound},
		{name: "404 missing repo", call: func() error { _, err := e.client.GetRepo(ctx, ghref.Repo{Owner: "acme", Name: "nope"}); return err }, sentinel: ErrNotFound},
		{name: "422 bad state", call: func() error { _, err := e.client.ListPulls(ctx, e.repo, "weird"); return err }, sentinel: ErrValidation},
		{name: "409 merge with stale sha", call: func() error {
			_, err := e.client.Merge(ctx, pr, MergeOptions{Method: MergeMethodMerge, SHA: strings.Repeat("a", 40)})
			return err
		}, sentinel: ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.stats(t).Total
			retries := e.client.Stats().Retries
			err := tt.call()
			require.ErrorIs(t, err, tt.sentinel)
			assert.Equal(t, before+1, e.stats(t).Total, "exactly one request")
			assert.Equal(t, retries, e.client.Stats().Retries)
		})
	}
	var ve *ValidationError
	_, err := e.client.ListPulls(ctx, e.repo, "weird")
	require.ErrorAs(t, err, &ve)
	require.NotEmpty(t, ve.Errors)
	assert.Equal(t, "state", ve.Errors[0].Field)
	assert.Empty(t, e.sleeps.got())
}

func TestClient_RetriesTimedOutAttempt(t *testing.T) {
	t.Parallel()
	// The held attempt lasts the whole timeout; the retry must not. With
	// 300 ms, a loaded machine (two suites side by side) timed the retry
	// out too: a plain read may take a second there.
	e := newSimEnv(t, ghsim.Options{}, Config{RequestTimeout: 3 * time.Second}, Options{})
	pr := e.openPR(t, "slow")
	e.reset()
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultTimeout}) // holds until we give up

	got, err := e.client.GetPull(t.Context(), pr)
	require.NoError(t, err)
	assert.Equal(t, "slow", got.GetTitle())
	assert.Equal(t, 2, e.stats(t).ByRoute[simRoutePull])
	assert.Equal(t, 1, e.stats(t).ByRouteStatus[simRoutePull][0], "the held request was abandoned")
	cs := e.client.Stats()
	assert.Equal(t, int64(1), cs.Routes[RouteOutcome{ourRoutePull, OutcomeTimeout}])
	assert.Equal(t, int64(1), cs.Retries)
	requireBackoff(t, e.sleeps.got(), 1)
}

func TestClient_MalformedJSON(t *testing.T) {
	t.Parallel()
	t.Run("once: fetched again", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "garbled")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultMalformedJSON})
		got, err := e.client.GetPull(t.Context(), pr)
		require.NoError(t, err)
		assert.Equal(t, "garbled", got.GetTitle())
		assert.Equal(t, 2, e.stats(t).ByRouteStatus[simRoutePull][200], "the retry is a full 200, the bad body was not cached")
		assert.Equal(t, int64(1), e.client.Stats().Retries)
	})
	t.Run("twice: decode error naming the route", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		_ = e.openPR(t, "garbled")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Path: `/pulls$`, Kind: ghsim.FaultMalformedJSON, Times: 2})
		_, err := e.client.ListPulls(t.Context(), e.repo, "open")
		require.ErrorIs(t, err, ErrDecode)
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "GET /repos/{owner}/{repo}/pulls", de.Route)
		assert.Contains(t, err.Error(), "GET /repos/acme/widgets/pulls")
		assert.Equal(t, 2, e.stats(t).ByRoute[simRoutePulls])
	})
}

// TestClient_EmptyPullRequest: a 200 whose body is "{}" for a pull request
// (GitHub has answered so) is a malformed answer, fetched again once and
// then an error; never a pull request without a state, which reads as
// closed (the chaos suite found the merger dropping an approved PR from its
// queue as "closed" on such an answer, seed 2).
func TestClient_EmptyPullRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		times int
	}{
		{name: "once: fetched again", times: 1},
		{name: "twice: decode error", times: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
			pr := e.openPR(t, "empty")
			e.reset()
			e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultEmptyObject, Times: tt.times})
			got, err := e.client.GetPull(t.Context(), pr)
			assert.Equal(t, 2, e.stats(t).ByRouteStatus[simRoutePull][200])
			if tt.times == 1 {
				require.NoError(t, err)
				assert.Equal(t, "empty", got.GetTitle())
				assert.Equal(t, "open", got.GetState())
				return
			}
			require.ErrorIs(t, err, ErrDecode)
			assert.Contains(t, err.Error(), "GET /repos/acme/widgets/pulls/")
		})
	}
}

func TestClient_ConditionalRequests(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "cached")
	ctx := t.Context()
	e.reset()

	first, err := e.client.GetPull(ctx, pr)
	require.NoError(t, err)
	remaining := e.sim.RateRemaining(simToken)
	second, err := e.client.GetPull(ctx, pr)
	require.NoError(t, err)
	third, err := e.client.GetPull(ctx, pr)
	require.NoError(t, err)

	assert.Equal(t, first, second, "a 304 decodes to the same result")
	assert.Equal(t, first, third)
	st := e.stats(t)
	assert.Equal(t, 3, st.ByRoute[simRoutePull], "max-age is never honoured: every call asks")
	assert.Equal(t, 2, st.ByRouteStatus[simRoutePull][304])
	assert.Equal(t, 1, st.Counted)
	assert.Equal(t, 2, st.NotCounted, "304s do not count against the primary limit")
	assert.Equal(t, remaining, e.sim.RateRemaining(simToken))
	assert.Equal(t, int64(2), e.client.Stats().NotModified)

	// A change is seen at once.
	title := "renamed"
	_, err = e.client.EditPull(ctx, pr, PullEdit{Title: &title})
	require.NoError(t, err)
	got, err := e.client.GetPull(ctx, pr)
	require.NoError(t, err)
	assert.Equal(t, "renamed", got.GetTitle())
	assert.Equal(t, 2, e.stats(t).ByRouteStatus[simRoutePull][200])
}

func TestClient_CacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	probe := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := probe.openPR(t, "size probe")
	_, err := probe.client.GetPull(t.Context(), pr)
	require.NoError(t, err)
	one := probe.client.Stats().CacheBytes
	require.Positive(t, one)

	// Room for one PR and a half: the second evicts the first.
	e := newSimEnv(t, ghsim.Options{}, Config{CacheMaxBytes: one + one/2}, Options{})
	a := e.openPR(t, "size probe")
	b := e.openPR(t, "size probf")
	ctx := t.Context()
	e.reset()
	for _, p := range []ghref.PR{a, b, a, a} {
		_, err := e.client.GetPull(ctx, p)
		require.NoError(t, err)
	}
	st := e.stats(t)
	assert.Equal(t, 3, st.ByRouteStatus[simRoutePull][200], "a, b, then a again in full: it was evicted")
	assert.Equal(t, 1, st.ByRouteStatus[simRoutePull][304], "the fourth call revalidates the re-fetched a")
	cs := e.client.Stats()
	assert.Equal(t, 1, cs.CacheEntries)
	assert.LessOrEqual(t, cs.CacheBytes, one+one/2)
}

func TestClient_PaginationFollowsEveryPage(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	_, err := e.sim.OpenPRs(e.repo, 250, "alice")
	require.NoError(t, err)
	ctx := t.Context()
	e.reset()

	prs, err := e.client.ListPulls(ctx, e.repo, "open")
	require.NoError(t, err)
	require.Len(t, prs, 250)
	seen := map[int]bool{}
	for _, p := range prs {
		seen[p.GetNumber()] = true
	}
	assert.Len(t, seen, 250, "no page read twice, none skipped")
	st := e.stats(t)
	assert.Equal(t, 3, st.ByRoute[simRoutePulls], "per_page=100: pages of 100, 100, 50")

	// Repeated listing: each page revalidated on its own.
	e.reset()
	again, err := e.client.ListPulls(ctx, e.repo, "open")
	require.NoError(t, err)
	require.Len(t, again, 250)
	st = e.stats(t)
	assert.Equal(t, 3, st.ByRoute[simRoutePulls])
	assert.Equal(t, 3, st.ByRouteStatus[simRoutePulls][304])
	assert.Equal(t, 0, st.Counted)

	// Change a PR on page 3 only (the oldest; the list is newest first).
	oldest := prs[len(prs)-1]
	require.Equal(t, 1, oldest.GetNumber())
	title := "changed on page three"
	_, err = e.client.EditPull(ctx, e.repo.PR(1), PullEdit{Title: &title})
	require.NoError(t, err)
	e.reset()
	third, err := e.client.ListPulls(ctx, e.repo, "open")
	require.NoError(t, err)
	require.Len(t, third, 250)
	assert.Equal(t, title, third[249].GetTitle(), "a 304 on page 1 says nothing about page 3")
	st = e.stats(t)
	assert.Equal(t, 2, st.ByRouteStatus[simRoutePulls][304])
	assert.Equal(t, 1, st.ByRouteStatus[simRoutePulls][200])
}
