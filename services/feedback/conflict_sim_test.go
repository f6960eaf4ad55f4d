package feedback_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/feedback"
)

// newConflictEnv is the feedback test world with main changed where the
// PR's head changed it: the PR conflicts with main's tip, base.
func newConflictEnv(t *testing.T) (e *env, base string) {
	t.Helper()
	e = newEnv(t)
	base, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"main.go": "package main\n\nfunc main() { println(1) }\n"}, "Change main on main")
	require.NoError(t, err)
	return e, base
}

// resolveRequest publishes the merger's request that the agent resolve
// the PR's conflict with base, main's tip, as fix cycle cycle+1 in
// escalation epoch 1.
func (e *env) resolveRequest(base string, cycle int) {
	e.t.Helper()
	_, _, err := e.emit.Emit(e.t.Context(), &events.ConflictResolveRequested{
		Base: events.Base{PR: e.pr, HeadSHA: e.head}, BaseBranch: "main", BaseSHA: base, FixCycle: cycle, Epoch: 1,
	}, "conflict")
	require.NoError(e.t, err)
}

// TestFeedback_ConflictNotResolved: a conflict the merger handed over
// (PRConflictResolveRequested) that the agent does not resolve, or that
// needs no agent, ends once, with nothing pushed: an agent that exits
// non-zero run after run, or leaves the markers in (prloop commits what
// it left), escalates merge_conflict once; past the fix-cycle bound it
// escalates max_fix_cycles without running the agent; a head that moved
// since is skipped.
func TestFeedback_ConflictNotResolved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		agent  string
		cycle  int
		moved  bool
		want   events.Type
		reason events.Reason
		detail string // in the escalation's last error
		runs   int
	}{
		{name: "the agent fails every run", agent: "fail.sh", want: events.TypeEscalationRequested, reason: events.ReasonMergeConflict, detail: "exit status 3", runs: 3},
		{name: "markers left", agent: "noop.sh", want: events.TypeEscalationRequested, reason: events.ReasonMergeConflict, detail: "conflict markers left in main.go", runs: 1},
		{name: "fix cycles used up", agent: "noop.sh", cycle: 2, want: events.TypeEscalationRequested, reason: events.ReasonMaxFixCycles},
		{name: "the head moved", agent: "noop.sh", moved: true, want: events.TypeFeedbackSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, base := newConflictEnv(t)
			if tt.moved {
				_, err := e.sim.PushCommit(e.repo, "feature/x", "agent", map[string]string{"other.go": "package main\n"}, "Another push")
				require.NoError(t, err)
			}
			e.start("a", e.config(tt.agent))
			e.resolveRequest(base, tt.cycle)

			got := e.rec.Wait(t, e.pr, tt.want, waitFor)
			e.consumerSettled()
			assert.Equal(t, 1, e.rec.Count(e.pr, tt.want), "once")
			assert.Zero(t, e.rec.Count(e.pr, events.TypeFeedbackAddressed))
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			if !tt.moved {
				assert.Equal(t, e.head, info.HeadSHA, "nothing pushed")
			}
			assert.Len(t, e.waitRuns(tt.runs), tt.runs)
			if esc, ok := got.Data.(*events.EscalationRequested); ok {
				assert.Equal(t, tt.reason, esc.Reason)
				assert.Equal(t, feedback.Name, esc.Actor)
				assert.Equal(t, 1, esc.Epoch, "the request's epoch")
				assert.Contains(t, esc.LastError, tt.detail)
			}
		})
	}
}

// TestFeedback_ConflictResolved: the agent gets the base merged into the
// head with markers and a prompt naming the conflicting file and both
// sides' commits; its merge commit is pushed only when it is exactly one
// merge of the head and the base tip that changes nothing else.
func TestFeedback_ConflictResolved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		extra  string
		refuse string // "" pushes; else in the escalation's last error
	}{
		{name: "resolved"},
		{name: "an unrelated file changed", extra: "unrelated", refuse: "neither side changed: README.md"},
		{name: "a commit after the merge", extra: "commit", refuse: "2 new commits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, base := newConflictEnv(t)
			e.start("a", e.config("resolve.sh", func(c *feedback.Config) { c.AgentCmd = "EXTRA=" + tt.extra + " " + c.AgentCmd }))
			e.resolveRequest(base, 1)

			// Once the attempt ended, the run has recorded its prompt.
			checkPrompt := func() {
				t.Helper()
				runs := e.waitRuns(1)
				require.Len(t, runs, 1)
				prompt, err := os.ReadFile(filepath.Join(e.records, "stdin."+runs[0].id))
				require.NoError(t, err)
				assert.Contains(t, string(prompt), "- main.go", "the conflicting file")
				assert.Contains(t, string(prompt), "Add main", "the PR's commit")
				assert.Contains(t, string(prompt), "Change main on main", "the base's commit")
			}

			if tt.refuse != "" {
				esc := e.rec.Wait(t, e.pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
				e.consumerSettled()
				checkPrompt()
				assert.Equal(t, events.ReasonMergeConflict, esc.Reason)
				assert.Contains(t, esc.LastError, tt.refuse)
				assert.Equal(t, 1, e.rec.Count(e.pr, events.TypeEscalationRequested))
				info, err := e.sim.PRInfo(e.pr)
				require.NoError(t, err)
				assert.Equal(t, e.head, info.HeadSHA, "nothing pushed")
				return
			}
			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
			e.consumerSettled()
			checkPrompt()
			assert.Equal(t, e.head, ev.PreviousHeadSHA)
			assert.Equal(t, 2, ev.FixCycle, "the request's cycle, plus this one")
			assert.Contains(t, ev.Detail, "resolved a conflict with main")
			assert.Zero(t, e.rec.Count(e.pr, events.TypeEscalationRequested))
			parents, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "-1", "--format=%P", ev.HeadSHA).Output()
			require.NoError(t, err)
			assert.Equal(t, e.head+" "+base, strings.TrimSpace(string(parents)), "a merge of the head and the base tip, in that order")
		})
	}
}
