package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNew_RedactsRegisteredSecrets(t *testing.T) {
	const token = "fake-0123456789abcdefTESTTOKEN"
	Redact(token, "short")
	var buf bytes.Buffer
	log := New(&buf, "debug", "json")
	log.Info("calling with "+token, "header", "token "+token, "err", errors.New("bad credentials for "+token), "n", 3)
	out := buf.String()
	assert.NotContains(t, out, token)
	assert.Contains(t, out, Redacted)
	assert.Contains(t, out, `"n":3`)
	assert.Equal(t, "short text", Scrub("short text"), "values under 8 bytes are not treated as secrets")
}

func TestNew_Format(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, format, want string
	}{
		{name: "json", format: "json", want: `{"time":`},
		{name: "text", format: "text", want: "time="},
		{name: "auto on a buffer is json", format: "auto", want: `{"time":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			New(&buf, "info", tt.format).Info("hello")
			assert.Contains(t, buf.String(), tt.want)
		})
	}
}

func TestNew_Level(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := New(&buf, "warn", "json")
	log.Info("quiet")
	log.Warn("loud")
	assert.NotContains(t, buf.String(), "quiet")
	assert.Contains(t, buf.String(), "loud")
}

// TestNew_DurationsForPeople: a duration reads as Go writes it in both
// formats; the JSON handler alone would write nanoseconds (issue #30:
// "interval":5000000000).
func TestNew_DurationsForPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, format string
		want         []string
	}{
		{name: "json", format: "json", want: []string{`"interval":"5s"`, `"grace":"1m30s"`, `"wait":"1.5ms"`, `"retry":{"after":"2m0s"}`}},
		{name: "text", format: "text", want: []string{"interval=5s", "grace=1m30s", "wait=1.5ms", "retry.after=2m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			New(&buf, "info", tc.format).Info("started", "interval", 5*time.Second, slog.Duration("grace", 90*time.Second),
				"wait", 1500*time.Microsecond, slog.Group("retry", "after", 2*time.Minute))
			for _, w := range tc.want {
				assert.Contains(t, buf.String(), w)
			}
			assert.NotContains(t, buf.String(), "5000000000")
		})
	}
}
