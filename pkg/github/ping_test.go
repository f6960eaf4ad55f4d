package github

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// retryCounter is a RetryObserver counting retries by cause.
type retryCounter struct{ serverErrors, other atomic.Int32 }

func (r *retryCounter) OnRequest(string, int, Outcome) {}
func (r *retryCounter) OnRetry(_ string, cause Outcome) {
	if cause == OutcomeServerError {
		r.serverErrors.Add(1)
		return
	}
	r.other.Add(1)
}

// TestPing_OneAttemptNoWait: Ping sends one GET /rate_limit, retries no
// 502, and is not held back by a core quota known to be spent (the request
// is free); an ordinary GET retries the 502 and tells a RetryObserver.
func TestPing_OneAttemptNoWait(t *testing.T) {
	t.Parallel()
	var hits, fail atomic.Int32
	reset := time.Now().Add(time.Hour)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-RateLimit-Resource", "core")
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.Header().Set("X-RateLimit-Remaining", "0")
		if fail.Load() > 0 {
			fail.Add(-1)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte(`{"resources":{"core":{"limit":5000,"remaining":0}}}`))
	}))
	t.Cleanup(srv.Close)
	obs := &retryCounter{}
	c, sleeps := newTestClient(t, srv.URL, "tok", Config{}, Options{Observer: obs})

	require.NoError(t, c.Ping(t.Context()), "a spent quota does not hold back the free GET /rate_limit")
	assert.Empty(t, sleeps.got())

	fail.Store(1)
	err := c.Ping(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "502")
	assert.Equal(t, int32(2), hits.Load(), "the 502 was not retried")
	assert.Zero(t, obs.serverErrors.Load())

	fail.Store(1)
	_, err = c.RateLimit(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int32(4), hits.Load(), "an ordinary GET retries the 502")
	assert.Equal(t, int32(1), obs.serverErrors.Load())
	assert.Zero(t, obs.other.Load())
}
