package prstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAge: how long ago, to the second, never negative, nothing for no time.
func TestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{name: "earlier", t: now.Add(-192600 * time.Millisecond), want: "3m13s"},
		{name: "later (a clock moved back)", t: now.Add(59*time.Minute + 50*time.Second), want: "0s"},
		{name: "no time", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Age(now, tt.t))
		})
	}
}
