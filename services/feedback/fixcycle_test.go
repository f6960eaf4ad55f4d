package feedback_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
)

// failFirstPublish fails the first publish on one subject, as a NATS
// outage right then would.
type failFirstPublish struct {
	events.JetStreamConsumer
	subject string
	failed  atomic.Bool
}

func (f *failFirstPublish) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if msg.Subject == f.subject && f.failed.CompareAndSwap(false, true) {
		return nil, errors.New("injected: publish failed")
	}
	return f.JetStreamConsumer.PublishMsg(ctx, msg, opts...)
}

// TestFeedback_PublishFailsAfterPush_OneFixCycle fails the publish of
// PRFeedbackAddressed, after the fix was pushed: the redelivered change request publishes the same fix as fix 1, not
// 2, and the next change request still gets an agent under the default
// PRLOOP_MAX_FIX_CYCLES of 2 instead of an escalation.
func TestFeedback_PublishFailsAfterPush_OneFixCycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fault := &failFirstPublish{subject: events.Subject(e.pr, events.TypeFeedbackAddressed)}
	e.wrapJS = func(js events.JetStreamConsumer) events.JetStreamConsumer {
		fault.JetStreamConsumer = js
		return fault
	}
	e.comment(e.pr, "add a comment to main.go")
	e.start("a", e.config("edit_only.sh"))
	e.request(e.pr, e.head, 0)

	ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
	require.True(t, fault.failed.Load(), "the first publish failed")
	assert.Equal(t, 1, ev.FixCycle, "one push is one fix cycle")
	assert.Len(t, e.bareLog("feature/x", e.head), 1, "one fix pushed")
	runs, _ := e.runs()
	assert.Len(t, runs, 1, "the redelivery ran no agent")

	// The poller's next change request, on the fix, after a new comment,
	// with the fix counted from the event.
	e.seedState()
	e.comment(e.pr, "and one more")
	e.request(e.pr, ev.HeadSHA, ev.FixCycle, "2")
	require.Eventually(t, func() bool {
		return e.rec.Count(e.pr, events.TypeFeedbackAddressed) == 2 || e.rec.Count(e.pr, events.TypeEscalationRequested) > 0
	}, waitFor, 10*time.Millisecond)
	assert.Zero(t, e.rec.Count(e.pr, events.TypeEscalationRequested), "escalated after one fix")
	var cycles []int
	for _, ce := range e.rec.For(e.pr) {
		if d, ok := ce.Data.(*events.FeedbackAddressed); ok {
			cycles = append(cycles, d.FixCycle)
		}
	}
	assert.Equal(t, []int{1, 2}, cycles)
}

// TestFeedback_InterruptedAgentRun_Discarded stops the replica while its
// agent is half-way through writing its fix, and starts another one on the
// same worktree: the interrupted run's work is discarded, the agent runs
// again, and only the complete second run's work is pushed, as fix 1.
func TestFeedback_InterruptedAgentRun_Discarded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// userWorktree says the attempts use the watch request's worktree;
		// otherwise prloop's own clone, which only a restart of the same
		// replica (same workspace) finds again.
		userWorktree bool
		second       string
	}{
		{name: "prloop's clone, replica restarted", second: "a"},
		{name: "watch request's worktree, another replica", userWorktree: true, second: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var wt string
			if tt.userWorktree {
				wt = filepath.Join(t.TempDir(), "wt")
				out, err := exec.Command("git", "clone", "--quiet", "--branch", "feature/x", "file://"+e.sim.GitDir(e.repo), wt).CombinedOutput()
				require.NoError(t, err, "%s", out)
				require.NoError(t, os.WriteFile(filepath.Join(wt, "USER-NOTES.md"), []byte("mine\n"), 0o644))
				e.worktree = wt
			}
			e.comment(e.pr, "please fix")
			cfg := e.config("partial.sh")
			a := e.start("a", cfg)
			e.request(e.pr, e.head, 0)
			first := e.waitRuns(1)[0]
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(e.records, "writing."+first.id))
				return err == nil
			}, waitFor, 10*time.Millisecond, "the first agent started writing")
			a.stop()
			require.NoError(t, os.WriteFile(filepath.Join(e.records, "release-"+tt.second), nil, 0o644))
			e.start(tt.second, cfg)

			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
			e.consumerSettled()
			runs, _ := e.runs()
			require.Len(t, runs, 2, "the agent ran again")
			e.assertNoOverlap()
			second := runs[1]
			assert.Equal(t, tt.second, second.instance)

			commits := e.bareLog("feature/x", e.head)
			require.Len(t, commits, 1, "exactly one fix pushed")
			assert.True(t, strings.HasPrefix(commits[0], ev.HeadSHA))
			diff, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "-p", e.head+".."+ev.HeadSHA).Output()
			require.NoError(t, err)
			for _, want := range []string{"half-written by " + second.id, "finished by " + second.id, "notes of " + second.id} {
				assert.Contains(t, string(diff), want)
			}
			assert.NotContains(t, string(diff), first.id, "the interrupted run's work was pushed")
			assert.NotContains(t, string(diff), "USER-NOTES", "the user's file was pushed")

			assert.Equal(t, 1, ev.FixCycle)
			assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeFeedbackAddressed))
			if tt.userWorktree {
				assert.NoFileExists(t, filepath.Join(wt, "notes-"+first.id+".txt"), "the interrupted run's file is left in the user's worktree")
				assert.FileExists(t, filepath.Join(wt, "USER-NOTES.md"), "the user's file is kept")
			}
		})
	}
}
