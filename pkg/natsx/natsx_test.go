package natsx_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

func TestEmbedded_KeyFileCreatedOnceWithMode0600(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	connect := func() *natsx.Conn {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		c, err := natsx.Connect(ctx, natsx.Options{DataDir: dir, Port: -1, Name: t.Name()})
		require.NoError(t, err)
		return c
	}
	c := connect()
	assert.Equal(t, natsx.KeyFile(dir), c.CredsFile)
	fi, err := os.Stat(c.CredsFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	first, err := os.ReadFile(c.CredsFile)
	require.NoError(t, err)
	require.NoError(t, c.Close(t.Context()))

	c = connect()
	defer c.Close(context.Background())
	again, err := os.ReadFile(c.CredsFile)
	require.NoError(t, err)
	assert.Equal(t, first, again, "a restart reuses the key")

	for _, v := range os.Environ() {
		assert.NotContains(t, v, string(first[:20]), "the key never reaches the environment")
	}
}

func TestEmbedded_RefusesAKeyOthersCanRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := natsx.Connect(t.Context(), natsx.Options{DataDir: dir, Port: -1})
	require.NoError(t, err)
	require.NoError(t, c.Close(t.Context()))
	require.NoError(t, os.Chmod(natsx.KeyFile(dir), 0o644))
	_, err = natsx.Connect(t.Context(), natsx.Options{DataDir: dir, Port: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 600")
}

// An observer without credentials (anything on the host, a coding agent
// included) can watch events but cannot publish one, nor reach JetStream's
// API or the KV buckets; the key's holder can.
func TestEmbedded_WithoutCredentialsOnlyObserve(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	approved := &events.ReviewApproved{Base: events.Base{PR: pr, HeadSHA: "abc"}, Status: events.StatusApproved}

	anon := natstest.Dial(t, conn.URL)
	sub, err := anon.SubscribeSync("pr.>")
	require.NoError(t, err)
	require.NoError(t, anon.Flush())

	tests := []struct {
		name    string
		subject string
	}{
		{"forged approval", events.Subject(pr, events.TypeReviewApproved)},
		{"forged watch request", events.Subject(pr, events.TypeWatchRequested)},
		{"state bucket write", "$KV.PRLOOP_PRS.acme.widgets.1"},
		{"stream deletion", "$JS.API.STREAM.DELETE." + events.StreamName},
		{"dead letter", events.DLQPrefix + ".merger"},
	}
	anonJS, err := jetstream.New(anon)
	require.NoError(t, err)
	t.Run("refused", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, err := anonJS.Publish(ctx, tc.subject, []byte(`{}`))
				require.Error(t, err, "a publish without credentials got an ack")
			})
		}
	})
	_, err = anonJS.Stream(t.Context(), events.StreamName)
	require.Error(t, err, "no JetStream API without credentials")

	e, _, err := events.NewEmitter(natstest.Connect(t, conn).JS, events.PublisherPoller).Emit(t.Context(), approved, "1")
	require.NoError(t, err, "the key's holder publishes")
	msg, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err, "the observer sees events")
	_, d, err := events.Decode(msg.Data)
	require.NoError(t, err)
	assert.Equal(t, e.Type(), string(d.EventType()))
	_, err = sub.NextMsg(200 * time.Millisecond)
	assert.ErrorIs(t, err, nats.ErrTimeout, "no forged event reached pr.>")
	info, err := conn.JS.Stream(t.Context(), events.StreamName)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.CachedInfo().State.Msgs, "only the real event was stored")
}
