package poller

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/state"
)

func TestPlanCommands_TakeRefuseIgnoreOnce(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	approved := state.PR{PR: pr, Status: events.StatusApproved, HeadSHA: "h1", Transitions: 2}
	escalated := approved
	escalated.Status, escalated.Epoch = events.StatusChangesRequested, 1
	escalated.Escalations = map[events.Reason]time.Time{events.ReasonMaxFixCycles: now}
	labelled := escalated
	labelled.EscalationLabelSeen = true
	fixing := approved
	fixing.Status, fixing.FeedbackHeadSHA = events.StatusChangesRequested, "h1"
	taken := approved
	taken.Commands.Add(10)
	items := []review.Item{{Kind: review.KindComment, ID: 5, Author: "bob", Body: "rename x"}}

	cmd := func(id int64, line string) commandSeen {
		c, ok := review.ParseCommand(line)
		require.True(t, ok, line)
		return commandSeen{ID: id, Author: "alice", Cmd: c, May: true, Collaborator: true}
	}
	collaborator := func(c commandSeen) commandSeen { c.Author, c.May = "carol", false; return c }
	stranger := func(c commandSeen) commandSeen { c.Author, c.May, c.Collaborator = "mallory", false, false; return c }

	tests := []struct {
		name    string
		cur     state.PR
		seen    []commandSeen
		fix     []review.Item
		taken   []string // commands taken, in order
		refused []string // substrings of the replies, in order
		ignored int
		check   func(t *testing.T, p commandPlan)
	}{
		{name: "priority is taken", cur: approved, seen: []commandSeen{cmd(10, "/prloop priority")}, taken: []string{"priority"}},
		{name: "dequeue is taken", cur: approved, seen: []commandSeen{cmd(10, "/prloop dequeue")}, taken: []string{"dequeue"}},
		{name: "queue is taken with an approval", cur: approved, seen: []commandSeen{cmd(10, "/prloop queue")}, taken: []string{"queue"}},
		{name: "queue without an approval is refused", cur: fixing, seen: []commandSeen{cmd(10, "/prloop queue")}, refused: []string{"not approved"}},
		{name: "explain is taken", cur: approved, seen: []commandSeen{cmd(10, "/prloop explain")}, taken: []string{"explain"}},
		{
			name: "stop is taken and recorded", cur: approved, seen: []commandSeen{cmd(10, "/prloop stop")}, taken: []string{"stop"},
			check: func(t *testing.T, p commandPlan) { assert.True(t, p.Next.Stopped) },
		},
		{
			name: "fix asks the agent for the comments, whatever the status", cur: approved, fix: items,
			seen: []commandSeen{cmd(10, "/prloop fix")}, taken: []string{"fix"},
			check: func(t *testing.T, p commandPlan) {
				assert.Equal(t, items, p.Fix)
				assert.Equal(t, "alice", p.Fixer)
				assert.Equal(t, "h1", p.Next.FixCommandHead)
				assert.Empty(t, p.Next.Status, "the change request is published anew")
			},
		},
		{name: "fix with nothing to fix is refused", cur: approved, seen: []commandSeen{cmd(10, "/prloop fix")}, refused: []string{"nothing to fix"}},
		{name: "fix while the agent works is refused", cur: fixing, fix: items, seen: []commandSeen{cmd(10, "/prloop fix")}, refused: []string{"already working"}},
		{name: "fix while escalated is refused", cur: escalated, fix: items, seen: []commandSeen{cmd(10, "/prloop fix")}, refused: []string{"retry first"}},
		{name: "retry without an escalation is refused", cur: approved, seen: []commandSeen{cmd(10, "/prloop retry")}, refused: []string{"not escalated"}},
		{
			name: "retry with the label on is the escalator's: it removes the label", cur: labelled,
			seen: []commandSeen{cmd(10, "/prloop retry")}, taken: []string{"retry"},
			check: func(t *testing.T, p commandPlan) {
				assert.Equal(t, 1, p.Next.Epoch, "the label's removal resumes the loop")
				assert.Len(t, p.Emits, 1)
				assert.Equal(t, 1, p.Emits[0].Data.(*events.CommandReceived).Epoch)
			},
		},
		{
			name: "retry without a label resumes the loop at once", cur: escalated,
			seen: []commandSeen{cmd(10, "/prloop retry")}, taken: []string{"retry"},
			check: func(t *testing.T, p commandPlan) {
				assert.Equal(t, 2, p.Next.Epoch)
				assert.Empty(t, p.Next.Escalations)
				require.Len(t, p.Emits, 2)
				assert.IsType(t, &events.EscalationResolved{}, p.Emits[0].Data)
				assert.Equal(t, 1, p.Emits[1].Data.(*events.CommandReceived).Epoch, "the command names the epoch it retries")
			},
		},
		{name: "unknown command is refused", cur: approved, seen: []commandSeen{cmd(10, "/prloop deploy")}, refused: []string{`unknown command "deploy"`}},
		{name: "no command is refused", cur: approved, seen: []commandSeen{cmd(10, "/prloop")}, refused: []string{"no command given"}},
		{name: "malformed line is refused", cur: approved, seen: []commandSeen{cmd(10, "/prloop retry "+strings.Repeat("x", 300))}, refused: []string{"too long"}},
		{name: "a collaborator who may not approve is refused", cur: approved, seen: []commandSeen{collaborator(cmd(10, "/prloop priority"))}, refused: []string{"may not give prloop commands"}},
		{name: "a collaborator's unknown line is refused too", cur: approved, seen: []commandSeen{collaborator(cmd(10, "/prloop deploy"))}, refused: []string{"may not give prloop commands"}},
		{name: "a stranger is ignored silently", cur: approved, seen: []commandSeen{stranger(cmd(10, "/prloop priority"))}, ignored: 1},
		{name: "a stranger's unknown line is ignored silently", cur: approved, seen: []commandSeen{stranger(cmd(10, "/prloop deploy"))}, ignored: 1},
		{name: "a command already handled is not taken again", cur: taken, seen: []commandSeen{cmd(10, "/prloop priority")}},
		{
			name: "each comment once, in order", cur: taken,
			seen:  []commandSeen{cmd(10, "/prloop priority"), cmd(11, "/prloop dequeue"), cmd(12, "/prloop nope"), stranger(cmd(13, "/prloop stop"))},
			taken: []string{"dequeue"}, refused: []string{"unknown"}, ignored: 1,
			check: func(t *testing.T, p commandPlan) {
				for _, id := range []int64{10, 11, 12, 13} {
					assert.True(t, p.Next.Commands.Has(id), id)
				}
				assert.False(t, p.Next.Stopped, "a stranger cannot stop the PR")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := planCommands(tt.cur, tt.seen, commandFacts{Head: "h1", FixItems: tt.fix, Now: now})
			var took []string
			for _, e := range p.Emits {
				if d, ok := e.Data.(*events.CommandReceived); ok {
					took = append(took, d.Command)
					assert.Equal(t, []string{strconv.FormatInt(d.CommentID, 10)}, e.Parts, "one event per comment, ever")
				}
			}
			assert.Equal(t, tt.taken, took)
			require.Len(t, p.Replies, len(tt.refused))
			for i, r := range tt.refused {
				assert.Contains(t, p.Replies[i].Text, r)
				assert.NotContains(t, p.Replies[i].Text, "\n", "a one-line reply")
			}
			assert.Len(t, p.Ignored, tt.ignored)
			for _, c := range tt.seen {
				assert.True(t, p.Next.Commands.Has(c.ID), "every command comment is handled once, taken or not")
			}
			if tt.check != nil {
				tt.check(t, p)
			}
			again := planCommands(p.Next, tt.seen, commandFacts{Head: "h1", FixItems: tt.fix, Now: now})
			assert.Empty(t, again.Emits, "a second look takes nothing")
			assert.Empty(t, again.Replies, "a second look answers nothing")
		})
	}
}

func TestExplainBody_TheRowWithoutServerPaths(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		row  prstatus.Row
		ok   bool
		want []string
		not  []string
	}{
		{name: "no events yet", row: prstatus.Row{PR: pr}, want: []string{"no events about this PR yet"}},
		{
			name: "queued", ok: true,
			row: prstatus.Row{
				PR: pr, Head: "0123456789abcdef", Line: prstatus.Line{State: prstatus.Pending, Text: "1st in the queue | waiting"},
				Position: 1, Base: "main", FixCycle: 2, Last: events.TypeMergeQueued, LastAt: now.Add(-time.Minute),
			},
			want: []string{"1st in the queue \\| waiting", "position 1 in main", "0123456", "PRMergeQueued, 1m0s ago", "| fix cycle | 2 |"},
			not:  []string{"/home/", "worktree"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := explainBody(tt.row, tt.ok, "alice", 42, now)
			assert.True(t, strings.HasPrefix(body, explainMarker), "prloop's own comment: never feedback, found again to edit")
			assert.True(t, review.IsOwn(body))
			assert.Contains(t, body, "@alice in comment 42")
			for _, w := range tt.want {
				assert.Contains(t, body, w)
			}
			for _, n := range tt.not {
				assert.NotContains(t, body, n)
			}
		})
	}
}

func TestTimeout_NeverForAStoppedPR(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tm := Timing{ReviewTimeout: time.Hour}
	tests := []struct {
		name    string
		stopped bool
		want    int
	}{
		{name: "watched: the review timeout is due", want: 1},
		{name: "stopped by /prloop stop: nothing is due", stopped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := state.PR{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}, Status: events.StatusPending, WatchedSince: now.Add(-2 * time.Hour), Stopped: tt.stopped}
			assert.Len(t, timeout(&rec, now, tm), tt.want)
		})
	}
}
