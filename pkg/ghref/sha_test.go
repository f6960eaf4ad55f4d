package ghref

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEventSHA pins the form event ids carry: the poller's and feedback's
// ids were built with 12 characters before this helper existed, and a
// different form would defeat JetStream's de-duplication across an upgrade.
func TestEventSHA(t *testing.T) {
	t.Parallel()
	const full = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name      string
		in        string
		wantEvent string
		wantShort string
	}{
		{name: "full sha", in: full, wantEvent: "0123456789ab", wantShort: "0123456"},
		{name: "sha256", in: full + "89abcdef0123456789abcdef", wantEvent: "0123456789ab", wantShort: "0123456"},
		{name: "exactly 12", in: "0123456789ab", wantEvent: "0123456789ab", wantShort: "0123456"},
		{name: "shorter than 7", in: "abc", wantEvent: "abc", wantShort: "abc"},
		{name: "empty", in: "", wantEvent: "", wantShort: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.wantEvent, EventSHA(tt.in))
			assert.Equal(t, tt.wantShort, ShortSHA(tt.in))
		})
	}
}
