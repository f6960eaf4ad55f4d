// Package natstest starts embedded NATS servers for tests: a real JetStream
// server on a random port with its store in the test's temp dir.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx"
)

// Start starts an embedded JetStream server on a random port, connects to it,
// ensures prloop's streams, and stops everything when the test ends.
func Start(t testing.TB) *natsx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := natsx.Connect(ctx, natsx.Options{DataDir: t.TempDir(), Port: -1, Name: t.Name()})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	})
	require.NoError(t, events.EnsureStreams(ctx, conn.JS, events.StreamOptions{}))
	return conn
}

// Connect opens a second, independent client connection to the server conn
// runs, as another service process would: with conn's credentials.
func Connect(t testing.TB, conn *natsx.Conn) *natsx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := natsx.Connect(ctx, natsx.Options{URL: conn.URL, CredsFile: conn.CredsFile, Name: t.Name() + "-client"})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	return c
}

// Dial opens a plain NATS connection to url without credentials, as
// `nats sub` would (the embedded server's read-only observer), closed when
// the test ends.
func Dial(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// Consumer waits up to 20 s for the durable consumer to exist on the event
// stream (a service creates it when it starts) and returns it.
func Consumer(t testing.TB, js jetstream.JetStream, durable string) jetstream.Consumer {
	t.Helper()
	var cons jetstream.Consumer
	require.Eventually(t, func() bool {
		c, err := js.Consumer(context.Background(), events.StreamName, durable)
		cons = c
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "consumer %s never appeared", durable)
	return cons
}
