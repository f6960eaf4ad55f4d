package logging

import (
	"bytes"
	"errors"
	"testing"

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
