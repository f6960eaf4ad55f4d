// Package ctxtime waits on the clock without outliving a context: the one
// sleep every retry, poll and backoff in prloop uses, so that a shutdown or
// a lost lease never waits out a timer.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx is done, and then returns ctx.Err(): nil
// when the whole wait passed. A d of zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
