package poller_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

// TestCommands_TakenOnceByTwoReplicasAcrossRestartsAndRedelivery runs two
// pollers that both own the repository (no sharding: both probe and
// evaluate the PR at the same time) over one PR on which alice (write)
// gives commands, reader (a collaborator with read permission: may not
// approve) tries one, and mallory (no permission at all) tries one. Each
// comment is handled once: alice's taken (one PRCommandReceived, one 👀),
// reader's refused (one 😕, one reply naming them), mallory's ignored
// (nothing on GitHub). The priority label's first write fails, so its
// event is redelivered: still one label and one 👀. After both replicas
// restart, nothing is taken again; a second explain edits the first answer.
func TestCommands_TakenOnceByTwoReplicasAcrossRestartsAndRedelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config(func(c *poller.Config) { c.PriorityLabel = "prloop:priority" })
	start := func() func() {
		conn := natstest.Connect(t, e.conn)
		kv, err := kvlease.OpenBucket(t.Context(), conn.JS, state.Bucket)
		require.NoError(t, err)
		s := poller.New(cfg, poller.Deps{
			GitHub: e.client, Store: state.NewStore(kv), JS: conn.JS, Log: quiet(), Self: "prloop-bot", Now: e.sim.Now,
			Merged: poller.MergedByPrloop(conn.JS), NewPRs: poller.WatchNewPRs(kv),
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				select {
				case err := <-done:
					assert.NoError(t, err)
				case <-time.After(15 * time.Second):
					t.Error("poller did not stop")
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	stopA, stopB := start(), start()
	e.watchPending()
	e.tick()

	// The label's first write fails: the event is delivered again.
	e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/issues/\d+/labels$`, Kind: ghsim.FaultStatus500})
	priority, err := e.sim.AddIssueComment(e.pr, "alice", "/prloop priority")
	require.NoError(t, err)
	explain, err := e.sim.AddIssueComment(e.pr, "alice", "/prloop explain")
	require.NoError(t, err)
	refused, err := e.sim.AddIssueComment(e.pr, "reader", "/prloop priority")
	require.NoError(t, err)
	ignored, err := e.sim.AddIssueComment(e.pr, "mallory", "/prloop stop")
	require.NoError(t, err)

	byID := func() map[int64]ghsim.CommentSnapshot {
		cs, err := e.sim.IssueComments(e.pr)
		require.NoError(t, err)
		out := map[int64]ghsim.CommentSnapshot{}
		for _, c := range cs {
			out[c.ID] = c
		}
		return out
	}
	own := func(prefix string) []ghsim.CommentSnapshot {
		cs, err := e.sim.IssueComments(e.pr)
		require.NoError(t, err)
		var out []ghsim.CommentSnapshot
		for _, c := range cs {
			if c.Author == "prloop-bot" && strings.HasPrefix(c.Body, prefix) {
				out = append(out, c)
			}
		}
		return out
	}
	labelled := func() bool {
		info, err := e.sim.PRInfo(e.pr)
		require.NoError(t, err)
		return len(info.Labels) > 0
	}
	require.Eventually(t, func() bool {
		c := byID()
		return labelled() && len(c[priority].Reactions) > 0 && len(c[explain].Reactions) > 0 && len(c[refused].Reactions) > 0 &&
			len(own(review.OwnMarker+"explain")) == 1 && len(own(review.OwnMarker+"command")) == 1
	}, waitFor, 20*time.Millisecond, "the commands were not all answered: %v", e.rec.Types(e.pr))

	check := func() {
		t.Helper()
		c := byID()
		assert.Equal(t, []string{"prloop-bot:eyes"}, c[priority].Reactions, "one 👀 for a taken command")
		assert.Equal(t, []string{"prloop-bot:eyes"}, c[explain].Reactions)
		assert.Equal(t, []string{"prloop-bot:confused"}, c[refused].Reactions, "one 😕 for a refused command")
		assert.Empty(t, c[ignored].Reactions, "a stranger's command is ignored silently")
		assert.Equal(t, 2, e.rec.Count(e.pr, events.TypeCommandReceived), "one PRCommandReceived per taken comment")
		replies := own(review.OwnMarker + "command")
		require.Len(t, replies, 1, "one reply, to the collaborator only")
		assert.Contains(t, replies[0].Body, "@reader")
		assert.Contains(t, replies[0].Body, "may not give prloop commands")
		info, err := e.sim.PRInfo(e.pr)
		require.NoError(t, err)
		assert.Equal(t, []string{"prloop:priority"}, info.Labels)
		assert.Len(t, own(review.OwnMarker+"explain"), 1)
		rec, _, err := e.store.Get(t.Context(), e.pr)
		require.NoError(t, err)
		assert.False(t, rec.Stopped, "mallory cannot stop the PR")
		for _, id := range []int64{priority, explain, refused, ignored} {
			assert.True(t, rec.Commands.Has(id), "comment %d recorded as handled", id)
		}
	}
	e.waitProbes(6)
	check()
	assert.Equal(t, 1, e.sim.FaultCounts()[ghsim.FaultStatus500], "the label's first write failed")

	// Both replicas restart: nothing is taken or answered again.
	stopA()
	stopB()
	stopA, stopB = start(), start()
	t.Cleanup(stopA)
	t.Cleanup(stopB)
	e.tick()
	e.waitProbes(6)
	check()

	// A second explain edits the first answer in place.
	first := own(review.OwnMarker + "explain")[0]
	e.tick()
	again, err := e.sim.AddIssueComment(e.pr, "alice", "/prloop explain")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ex := own(review.OwnMarker + "explain")
		return len(ex) == 1 && ex[0].Updated.After(first.Updated) && len(byID()[again].Reactions) == 1
	}, waitFor, 20*time.Millisecond, "the second explain did not edit the first answer")
	assert.Equal(t, first.ID, own(review.OwnMarker + "explain")[0].ID)
	assert.Contains(t, own(review.OwnMarker + "explain")[0].Body, "comment "+strconv.FormatInt(again, 10))
	assert.Equal(t, []events.Type{events.TypeWatchRequested, events.TypeReviewPending}, withoutCommands(e.rec.Types(e.pr)),
		"commands are never review feedback")
}

func withoutCommands(ts []events.Type) []events.Type {
	var out []events.Type
	for _, t := range ts {
		if t != events.TypeCommandReceived {
			out = append(out, t)
		}
	}
	return out
}
