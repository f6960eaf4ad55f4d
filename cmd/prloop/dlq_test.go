package main

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// deadLetterApprovals publishes an approval of each PR and lets a merger
// consumer that refuses them dead-letter them all; it returns their ids.
func deadLetterApprovals(t *testing.T, conn *natsx.Conn, prs ...ghref.PR) []string {
	t.Helper()
	var ids []string
	for _, pr := range prs {
		e, _, err := events.NewEmitter(conn.JS, poller.Name).Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr, HeadSHA: "abc"}}, "1")
		require.NoError(t, err)
		ids = append(ids, e.ID())
	}
	refuseApprovals(t, conn.JS, len(prs))
	return ids
}

// refuseApprovals runs a merger consumer that refuses every approval until
// n are dead-lettered.
func refuseApprovals(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- events.Consume(ctx, js, events.ConsumerConfig{Durable: merger.Name, Types: merger.Types}, func(context.Context, *events.Msg) error {
			return events.Permanent(errors.New("repository not watched"))
		})
	}()
	require.Eventually(t, func() bool {
		got, err := events.CountDeadLetters(t.Context(), js, merger.Name)
		return err == nil && got == uint64(n)
	}, 15*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// TestDLQ_ListAndReplay: 'prloop dlq list' shows each dead letter with its
// consumer, subject and reason; 'replay -id' publishes that one event again
// to its subject with its own id and removes it; 'replay' the rest.
func TestDLQ_ListAndReplay(t *testing.T) {
	conn := natstest.Start(t)
	t.Setenv("PRLOOP_NATS_URL", conn.URL)
	t.Setenv("PRLOOP_NATS_CREDS_FILE", conn.CredsFile)
	a, b := ghref.PR{Owner: "acme", Repo: "a", Number: 1}, ghref.PR{Owner: "acme", Repo: "b", Number: 2}
	ids := deadLetterApprovals(t, conn, a, b)
	dlq, err := conn.JS.Stream(t.Context(), events.DLQStreamName)
	require.NoError(t, err)
	letters, err := listDeadLetters(t.Context(), dlq)
	require.NoError(t, err)
	require.Len(t, letters, 2)

	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
		left    int
		replays []ghref.PR
	}{
		{name: "list", args: []string{"list"}, left: 2, want: []string{
			"ID", "CONSUMER", "SUBJECT", "REASON", "DELIVERIES", "TIME",
			"merger", events.Subject(a, events.TypeReviewApproved), events.Subject(b, events.TypeReviewApproved), "repository not watched",
		}},
		{name: "unknown id", args: []string{"replay", "-id", "999"}, wantErr: "no dead letter 999", left: 2},
		{name: "replay one", args: []string{"replay", "-id", itoa(letters[1].ID)}, left: 1, replays: []ghref.PR{b}, want: []string{"replayed", ids[1]}},
		{name: "replay the rest", args: []string{"replay"}, left: 0, replays: []ghref.PR{a, b}, want: []string{ids[0]}},
		{name: "list empty", args: []string{"list"}, want: []string{"no dead letters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), append([]string{"dlq"}, tc.args...), &out, &errOut)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err, errOut.String())
			}
			for _, w := range tc.want {
				assert.Contains(t, out.String(), w)
			}
			n, err := events.CountDeadLetters(t.Context(), conn.JS, merger.Name)
			require.NoError(t, err)
			assert.Equal(t, uint64(tc.left), n)
			for i, pr := range tc.replays {
				s, err := conn.JS.Stream(t.Context(), events.StreamName)
				require.NoError(t, err)
				m, err := s.GetLastMsgForSubject(t.Context(), events.Subject(pr, events.TypeReviewApproved))
				require.NoError(t, err)
				e, _, err := events.Decode(m.Data)
				require.NoError(t, err)
				assert.Equal(t, map[ghref.PR]string{a: ids[0], b: ids[1]}[pr], e.ID(), "replay %d keeps the event's id", i)
				assert.Greater(t, m.Sequence, uint64(2), "a new message on the stream")
			}
		})
	}
	s, err := conn.JS.Stream(t.Context(), events.StreamName)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(4), info.State.Msgs, "two approvals and one replay of each")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestDLQ_DeployCLIMayListButNotForge: under the deployment's NATS
// permissions the cli key lists dead letters, and replaying an approval,
// which only the poller may publish, is refused with a message saying so
// and leaves the dead letter where it is.
func TestDLQ_DeployCLIMayListButNotForge(t *testing.T) {
	url := startDeployNATS(t)
	pollerConn := connectAs(t, url, poller.Name)
	require.NoError(t, events.EnsureStreams(t.Context(), pollerConn.JS, events.StreamOptions{}))
	pr := ghref.PR{Owner: "acme", Repo: "a", Number: 1}
	_, _, err := events.NewEmitter(pollerConn.JS, poller.Name).Emit(t.Context(), &events.ReviewApproved{Base: events.Base{PR: pr, HeadSHA: "abc"}}, "1")
	require.NoError(t, err)
	refuseApprovals(t, connectAs(t, url, merger.Name).JS, 1)

	creds, _ := testNKey(t, events.PublisherCLI)
	t.Setenv("PRLOOP_NATS_URL", url)
	t.Setenv("PRLOOP_NATS_CREDS_FILE", creds)
	var out, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"dlq", "list"}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), events.Subject(pr, events.TypeReviewApproved))
	err = run(t.Context(), []string{"dlq", "replay"}, &out, &errOut)
	require.ErrorContains(t, err, "these credentials may not publish to "+events.Subject(pr, events.TypeReviewApproved))
	n, err := events.CountDeadLetters(t.Context(), pollerConn.JS, merger.Name)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n, "the refused dead letter stays")
}
