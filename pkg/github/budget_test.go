package github

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// TestBudget_MergesGoAheadOfPollingUnderABurst: a burst of polling (the
// probe's list reads) against a slow GitHub fills the poll share of
// PRLOOP_GITHUB_CONCURRENCY and queues; a merge and a commit status, sent
// meanwhile, go at once on the slots polling leaves, and the requests in
// flight never exceed the concurrency.
func TestBudget_MergesGoAheadOfPollingUnderABurst(t *testing.T) {
	t.Parallel()
	unblock := make(chan struct{})
	var inFlight, most, polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pulls"):
			polls.Add(1)
			select {
			case <-unblock: // GitHub answering slowly
			case <-r.Context().Done():
			}
			_, _ = w.Write([]byte(`[]`))
		case r.Method == http.MethodPut:
			_, _ = w.Write([]byte(`{"sha":"abc","merged":true,"message":"merged"}`))
		default:
			_, _ = w.Write([]byte(`{"id":1,"state":"success","context":"prloop"}`))
		}
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{Concurrency: 4}, Options{})
	repo := ghref.Repo{Owner: "o", Name: "r"}

	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = c.ListPullSummariesIfChanged(ctx, repo, "open", "")
		}()
	}
	require.Eventually(t, func() bool { return polls.Load() == 3 }, 10*time.Second, 5*time.Millisecond, "three of the four slots polling")

	done := make(chan error, 2)
	go func() {
		_, err := c.Merge(t.Context(), repo.PR(1), MergeOptions{SHA: "abc"})
		done <- err
	}()
	go func() {
		_, err := c.CreateStatus(t.Context(), repo, "abc", StatusInput{State: "success", Context: "prloop"})
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("a merge or a status waited behind polling")
		}
	}
	assert.Equal(t, int32(3), polls.Load(), "polling still held back")
	close(unblock)
	wg.Wait()
	assert.Equal(t, int32(20), polls.Load())
	assert.LessOrEqual(t, most.Load(), int32(4), "never more than PRLOOP_GITHUB_CONCURRENCY in flight")
	assert.Equal(t, 20, c.Budget().PointsPerMinute()["GET /repos/{owner}/{repo}/pulls"])
	assert.Equal(t, 5, c.Budget().PointsPerMinute()["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"])
}

// TestBudget_Limits: each limit of GitHub's secondary limits, on a fake
// clock: an endpoint's points a minute (polling to three quarters of them,
// a merge to all), content creation a minute and an hour; a higher
// priority held by a limit of time holds nobody back.
func TestBudget_Limits(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	const pulls, merge, comment = "GET /repos/{owner}/{repo}/pulls", "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge", "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"
	tests := []struct {
		name  string
		setup func(b *Budget)
		// method and route of the request asked for, and its priority.
		method, route string
		prio          Priority
		wantWait      time.Duration // 0: admitted
	}{
		{name: "polling within three quarters of 900 points", setup: func(b *Budget) { spend(b, pulls, 1, 674, now) },
			method: "GET", route: pulls, prio: PriorityPoll},
		{name: "polling beyond them waits for the oldest to leave the minute", setup: func(b *Budget) { spend(b, pulls, 1, 675, now.Add(-30*time.Second)) },
			method: "GET", route: pulls, prio: PriorityPoll, wantWait: 30 * time.Second},
		{name: "an urgent request may use all 900", setup: func(b *Budget) { spend(b, merge, 5, 170, now) },
			method: "PUT", route: merge, prio: PriorityUrgent},
		{name: "but not more", setup: func(b *Budget) { spend(b, merge, 5, 180, now.Add(-10*time.Second)) },
			method: "PUT", route: merge, prio: PriorityUrgent, wantWait: 50 * time.Second},
		{name: "80 content-creating requests a minute", setup: func(b *Budget) { create(b, 80, now.Add(-20*time.Second)) },
			method: "POST", route: comment, prio: PriorityNormal, wantWait: 40 * time.Second},
		{name: "500 an hour", setup: func(b *Budget) { create(b, 500, now.Add(-50*time.Minute)) },
			method: "POST", route: comment, prio: PriorityNormal, wantWait: 10 * time.Minute},
		{name: "an urgent request held by time holds polling on no slot", setup: func(b *Budget) { b.slotWaiting[PriorityUrgent] = 0; create(b, 80, now) },
			method: "GET", route: pulls, prio: PriorityPoll},
		{name: "an urgent request waiting for a slot goes first", setup: func(b *Budget) { b.slotWaiting[PriorityUrgent] = 1 },
			method: "GET", route: pulls, prio: PriorityPoll, wantWait: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := NewBudget(BudgetOptions{Concurrency: 4, Now: clock})
			tt.setup(b)
			wait, forSlot := b.admit(tt.route, pointsOf(tt.method), createsContent(tt.method, tt.route), tt.prio)
			if tt.wantWait < 0 {
				assert.True(t, forSlot)
				return
			}
			assert.False(t, forSlot)
			assert.Equal(t, tt.wantWait, wait)
		})
	}
}

func spend(b *Budget, route string, points, n int, at time.Time) {
	for range n {
		b.points[route] = append(b.points[route], spent{at: at, points: points})
	}
}

func create(b *Budget, n int, at time.Time) {
	for range n {
		b.creates = append(b.creates, at)
	}
}
