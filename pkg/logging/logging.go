// Package logging builds prloop's slog loggers: JSON by default, text when
// stderr is a terminal, and with a last line of defence against secrets.
//
// Code never logs a token on purpose; Redact registers the values that must
// never appear anyway (the GitHub token, an App key path's contents …) and
// every logger built here replaces them in messages and string attributes.
package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

var (
	secretsMu sync.RWMutex
	secrets   []string
)

// Redacted replaces a registered secret in log output.
const Redacted = "[REDACTED]"

// Redact registers secret values that loggers built by New must never print.
// Values shorter than 8 bytes are ignored: too short to be a credential, too
// likely to occur in ordinary text.
func Redact(values ...string) {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for _, v := range values {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
}

// Scrub replaces every registered secret in s.
func Scrub(s string) string {
	secretsMu.RLock()
	defer secretsMu.RUnlock()
	for _, v := range secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// ParseLevel maps debug, info, warn and error to slog levels (info if unknown).
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// New returns a logger writing to w at level, in format json, text or auto
// (text when w is a terminal, JSON otherwise). Durations are written as Go
// writes them ("1.5s", "2m0s") in both formats.
func New(w io.Writer, level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{
		Level: ParseLevel(level),
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Value.Kind() {
			case slog.KindDuration:
				// As people and PRLOOP_* settings write it ("1m30s"), not
				// the JSON handler's nanoseconds.
				a.Value = slog.StringValue(a.Value.Duration().String())
			case slog.KindString:
				a.Value = slog.StringValue(Scrub(a.Value.String()))
			case slog.KindAny:
				if err, ok := a.Value.Any().(error); ok {
					a.Value = slog.StringValue(Scrub(err.Error()))
				}
			}
			return a
		},
	}
	var h slog.Handler
	if useText(w, format) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h)
}

func useText(w io.Writer, format string) bool {
	switch strings.ToLower(format) {
	case "text":
		return true
	case "json":
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
