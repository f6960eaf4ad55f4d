package github

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sleepRecorder replaces Options.Sleep: it records each wait and, if advance
// is set, moves a fake clock instead of sleeping.
type sleepRecorder struct {
	mu      sync.Mutex
	waits   []time.Duration
	advance func(time.Duration)
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	if s.advance != nil {
		s.advance(d)
	}
	return ctx.Err()
}

func (s *sleepRecorder) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of slog.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func bufferLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestClient builds a client for a test server with a recorded sleep.
func newTestClient(t *testing.T, apiURL, token string, cfg Config, opts Options) (*Client, *sleepRecorder) {
	t.Helper()
	cfg.APIURL = apiURL
	cfg.Token = Secret(token)
	rec := &sleepRecorder{}
	if opts.Sleep == nil {
		opts.Sleep = rec.sleep
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	c, err := New(t.Context(), cfg, opts)
	require.NoError(t, err)
	return c, rec
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
