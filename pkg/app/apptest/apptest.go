// Package apptest runs prloop services in tests.
package apptest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prloop/prloop/pkg/app"
)

// StopTimeout bounds how long a stopped service may take to return.
const StopTimeout = 15 * time.Second

// Run runs s until the returned stop is called or the test ends. stop
// cancels the service's context and fails the test if Run returns an error
// or does not return within StopTimeout; calling it again does nothing.
func Run(t testing.TB, s app.Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("service stopped with an error: %v", err)
				}
			case <-time.After(StopTimeout):
				t.Errorf("service did not stop within %s", StopTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
