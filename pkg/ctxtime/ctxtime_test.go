package ctxtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		d      time.Duration
		cancel bool
		want   error
	}{
		{name: "short wait passes", d: time.Millisecond},
		{name: "zero does not wait", d: 0},
		{name: "cancelled context ends a long wait", d: time.Hour, cancel: true, want: context.Canceled},
		{name: "cancelled context with zero", d: 0, cancel: true, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			start := time.Now()
			err := Sleep(ctx, tt.d)
			assert.ErrorIs(t, err, tt.want)
			if tt.want == nil {
				assert.NoError(t, err)
				assert.GreaterOrEqual(t, time.Since(start), tt.d)
			} else {
				assert.Less(t, time.Since(start), time.Minute, "returned when the context ended")
			}
		})
	}
}
