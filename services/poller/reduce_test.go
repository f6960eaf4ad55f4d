package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/state"
)

func TestReduce(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1, URL: "https://github.com/acme/w/pull/1"}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := now.Add(-time.Minute)
	b := func(head string) events.Base { return events.Base{PR: pr, HeadSHA: head} }
	// addressing: changes were requested on h1 and are being worked on.
	addressing := state.PR{
		PR: pr, Status: events.StatusChangesRequested, HeadSHA: "h1", WatchedSince: now.Add(-time.Hour), FixCycle: 1,
		FeedbackHeadSHA: "h1", AskedItems: []string{"c9"}, AddressedItems: []string{"c1"}, Epoch: 2, Transitions: 3,
	}
	approved := state.PR{PR: pr, Status: events.StatusApproved, HeadSHA: "h1", WatchedSince: now.Add(-time.Hour), Epoch: 2, Transitions: 2}
	tests := []struct {
		name    string
		cur     state.PR
		event   events.Data
		changed bool
		check   func(t *testing.T, next state.PR)
	}{
		{
			name: "a watch request records the worktree and spec and starts the clock", cur: state.PR{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}},
			event:   &events.WatchRequested{Base: b(""), Worktree: "/src/w", ContextPath: "specs/x.md"},
			changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "/src/w", n.Worktree)
				assert.Equal(t, "specs/x.md", n.ContextPath)
				assert.Equal(t, pr.URL, n.PR.URL)
				assert.Equal(t, now, n.WatchedSince)
			},
		},
		{
			name: "the PR prloop opened is watched like a watch request", cur: state.PR{PR: ghref.PR{Owner: "acme", Repo: "w", Number: 1}},
			event:   &events.Created{Base: b("h1"), Branch: "feature/x", BaseBranch: "main", Worktree: "/src/w", ContextPath: "specs/x.md"},
			changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "/src/w", n.Worktree)
				assert.Equal(t, "specs/x.md", n.ContextPath)
				assert.Equal(t, pr.URL, n.PR.URL)
				assert.Equal(t, now, n.WatchedSince)
			},
		},
		{
			name: "a repeated PRCreated keeps when watching began", cur: approved,
			event: &events.Created{Base: b("h1"), Branch: "feature/x", BaseBranch: "main"},
			check: func(t *testing.T, n state.PR) { assert.Equal(t, now.Add(-time.Hour), n.WatchedSince) },
		},
		{
			name: "a repeated watch request keeps when watching began", cur: approved,
			event: &events.WatchRequested{Base: b("")},
			check: func(t *testing.T, n state.PR) { assert.Equal(t, now.Add(-time.Hour), n.WatchedSince) },
		},
		{
			name: "a fix ends the change request it answers", cur: addressing,
			event:   &events.FeedbackAddressed{Base: b("h2"), PreviousHeadSHA: "h1", FixCycle: 2, PushedAt: at},
			changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, 2, n.FixCycle)
				assert.Equal(t, "h2", n.PushedHeadSHA)
				assert.Equal(t, at, n.PushedAt)
				assert.Empty(t, n.FeedbackHeadSHA, "the new head is published now")
				assert.Equal(t, []string{"c1", "c9"}, n.AddressedItems)
				assert.Empty(t, n.AskedItems)
				assert.Equal(t, "h1", n.HeadSHA, "the head moves when the poller sees it")
			},
		},
		{
			name: "a fix of an older change request counts the push, not the items", cur: addressing,
			event:   &events.FeedbackAddressed{Base: b("h2"), PreviousHeadSHA: "h0", FixCycle: 1},
			changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, 1, n.FixCycle, "never counted down")
				assert.Equal(t, at, n.PushedAt, "the event's time when it names none")
				assert.Equal(t, "h1", n.FeedbackHeadSHA)
				assert.Equal(t, []string{"c9"}, n.AskedItems)
			},
		},
		{
			name: "a skipped change request frees the head", cur: addressing,
			event: &events.FeedbackSkipped{Base: b("h1")}, changed: true,
			check: func(t *testing.T, n state.PR) { assert.Empty(t, n.FeedbackHeadSHA) },
		},
		{name: "a skip of another head changes nothing", cur: addressing, event: &events.FeedbackSkipped{Base: b("h0")}},
		{
			name: "an escalation request on the head being addressed frees it", cur: addressing,
			event:   &events.EscalationRequested{Base: b("h1"), Reason: events.ReasonMaxFixCycles, Epoch: 2},
			changed: true,
			check:   func(t *testing.T, n state.PR) { assert.Empty(t, n.FeedbackHeadSHA) },
		},
		{name: "an escalation request elsewhere changes nothing", cur: approved, event: &events.EscalationRequested{Base: b("h1"), Reason: events.ReasonChecksFailed}},
		{
			name: "an escalation of the current epoch is recorded", cur: addressing,
			event:   &events.Escalated{Base: b("h1"), Reason: events.ReasonMaxFixCycles, Epoch: 2, Actions: []string{"label"}},
			changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, map[events.Reason]time.Time{events.ReasonMaxFixCycles: at}, n.Escalations)
			},
		},
		{name: "an escalation of a resolved epoch is old news", cur: addressing, event: &events.Escalated{Base: b("h1"), Reason: events.ReasonMaxFixCycles, Epoch: 1}},
		{
			name: "an escalation recorded already keeps its time",
			cur: func() state.PR {
				c := addressing
				c.Escalations = map[events.Reason]time.Time{events.ReasonMaxFixCycles: now.Add(-time.Hour)}
				return c
			}(),
			event: &events.Escalated{Base: b("h1"), Reason: events.ReasonMaxFixCycles, Epoch: 2},
		},
		{
			name: "a merge closes the PR", cur: approved, event: &events.Merged{Base: b("h1"), MergeSHA: "m"}, changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.True(t, n.Merged)
				assert.True(t, n.Closed)
				assert.Equal(t, now, n.ClosedAt)
			},
		},
		{name: "a dry-run merge changes nothing", cur: approved, event: &events.Merged{Base: b("h1"), DryRun: true}},
		{
			name: "the merger's branch update carries the approval", cur: approved,
			event: &events.BranchUpdated{Base: b("h2"), PreviousHeadSHA: "h1", Method: "update-branch"}, changed: true,
			check: func(t *testing.T, n state.PR) {
				assert.Equal(t, "h2", n.MergeUpdatedHeadSHA)
				assert.Equal(t, events.StatusApproved, n.Status)
			},
		},
		{
			name: "a withdrawn approval is announced again", cur: approved,
			event: &events.MergeFailed{Base: b("h1"), Reason: events.ReasonApprovalWithdrawn}, changed: true,
			check: func(t *testing.T, n state.PR) { assert.Empty(t, n.Status, "the next look publishes the status") },
		},
		{
			name: "a withdrawn approval of the merger's updated head is announced again",
			cur: func() state.PR {
				c := approved
				c.MergeUpdatedHeadSHA = "h2"
				return c
			}(),
			event: &events.MergeFailed{Base: b("h2"), Reason: events.ReasonApprovalWithdrawn}, changed: true,
			check: func(t *testing.T, n state.PR) { assert.Empty(t, n.Status) },
		},
		{name: "a withdrawal about an older head changes nothing", cur: approved, event: &events.MergeFailed{Base: b("h0"), Reason: events.ReasonApprovalWithdrawn}},
		{name: "other merge failures change nothing", cur: approved, event: &events.MergeFailed{Base: b("h1"), Reason: events.ReasonMergeConflict}},
		// The poller's own events and the merger's queue news are not its
		// business here: decide makes the former, the latter change nothing.
		{name: "PRReviewPending", cur: approved, event: &events.ReviewPending{Base: b("h1"), Status: events.StatusPending}},
		{name: "PRReviewInProgress", cur: approved, event: &events.ReviewInProgress{Base: b("h1"), Status: events.StatusInProgress}},
		{name: "PRFeedbackReceived", cur: approved, event: &events.FeedbackReceived{Base: b("h1"), Status: events.StatusChangesRequested}},
		{name: "PRReviewApproved", cur: addressing, event: &events.ReviewApproved{Base: b("h1"), Status: events.StatusApproved}},
		{name: "ReviewTimeout", cur: approved, event: &events.ReviewTimeout{Base: b("h1"), Reason: events.ReasonReviewTimeout}},
		{name: "PRMergeQueued", cur: approved, event: &events.MergeQueued{Base: b("h1"), Position: 1}},
		{name: "PRMergeWaiting", cur: approved, event: &events.MergeWaiting{Base: b("h1"), Checks: []string{"ci"}}},
		{name: "PRMergeCandidate", cur: approved, event: &events.MergeCandidate{Base: b("h1"), State: events.CandidateBuilt, Candidate: "c1"}},
		// The feedback service's word to the views that the agent's run
		// waits for the day's budget: nothing of the poller's changes.
		{name: "PRAgentWaiting", cur: approved, event: &events.AgentWaiting{Base: b("h1"), State: events.AgentWaitStarted, Reason: events.AgentWaitDailyBudget, FixCycle: 1}},
		// The poller's own: decide recorded it when it published it.
		{name: "PRChecksFailed", cur: approved, event: &events.ChecksFailed{Base: b("h1"), Round: 1}},
		// The poller's own: planCommands recorded the comment when it took
		// the command; its answer (👀, the priority label) is no record.
		{name: "PRCommandReceived", cur: approved, event: &events.CommandReceived{Base: b("h1"), Command: events.CommandPriority, CommentID: 7, Author: "alice"}},
		// A conflict handed to the agent holds the next head back like a
		// change request (TestReduce_ConflictResolution has the rest).
		{
			name: "PRConflictResolveRequested", cur: approved, changed: true,
			event: &events.ConflictResolveRequested{Base: b("h1"), BaseBranch: "main", BaseSHA: "m1"},
			check: func(t *testing.T, n state.PR) { assert.Equal(t, "h1", n.FeedbackHeadSHA) },
		},
		{name: "PRClosed", cur: approved, event: &events.Closed{Base: b("h1")}},
		{name: "PREscalationResolved", cur: addressing, event: &events.EscalationResolved{Base: b("h1"), Epoch: 3}},
		// The speculative queue's candidates are the merger's business.
		{name: "PRMergeCandidate", cur: approved, event: &events.MergeCandidate{Base: b("h1"), BaseBranch: "main", State: events.CandidateBuilt, Candidate: "c1", Position: 1}},
		// The request to open a PR is the feedback service's; its
		// PRCreated is what the poller follows.
		{name: "PRCreateRequested", cur: approved, event: &events.CreateRequested{Base: b("h1"), Branch: "feature/x"}},
		// A merge queue's freeze is about the repository's base, the
		// merger's and the views' business: no PR record changes.
		{name: "PRQueueFreezeRequested", cur: approved, event: &events.QueueFreezeRequested{Base: b("h1"), BaseBranch: "main", Reason: "release"}},
		{name: "PRQueueFrozen", cur: approved, event: &events.QueueFrozen{Base: b("h1"), BaseBranch: "main", Reason: "release"}},
		{name: "PRQueueUnfrozen", cur: approved, event: &events.QueueUnfrozen{Base: b("h1"), BaseBranch: "main"}},
	}
	covered := map[events.Type]bool{}
	for _, tt := range tests {
		covered[tt.event.EventType()] = true
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, changed := reduce(tt.cur, tt.event, at, now)
			assert.Equal(t, tt.changed, changed)
			if !changed {
				assert.Equal(t, tt.cur, next)
			}
			if tt.check != nil {
				tt.check(t, next)
			}
		})
	}
	for _, typ := range events.Types {
		assert.True(t, covered[typ], "no case for %s", typ)
	}
}

// TestReduce_LeavesItsInputAlone: the compare-and-set loop may run reduce
// again on the same record.
func TestReduce_LeavesItsInputAlone(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "w", Number: 1}
	cur := state.PR{
		PR: pr, HeadSHA: "h1", FeedbackHeadSHA: "h1", Epoch: 0,
		AskedItems: []string{"c2"}, AddressedItems: make([]string, 1, 8),
		Escalations: map[events.Reason]time.Time{events.ReasonReviewTimeout: time.Unix(1, 0)},
	}
	before := state.PR{
		PR: pr, HeadSHA: "h1", FeedbackHeadSHA: "h1",
		AskedItems: []string{"c2"}, AddressedItems: make([]string, 1, 8),
		Escalations: map[events.Reason]time.Time{events.ReasonReviewTimeout: time.Unix(1, 0)},
	}
	now := time.Unix(100, 0)
	_, _ = reduce(cur, &events.FeedbackAddressed{Base: events.Base{PR: pr, HeadSHA: "h2"}, PreviousHeadSHA: "h1", FixCycle: 1}, now, now)
	_, _ = reduce(cur, &events.Escalated{Base: events.Base{PR: pr, HeadSHA: "h1"}, Reason: events.ReasonMaxFixCycles}, now, now)
	assert.Equal(t, before, cur)
	assert.Equal(t, []string{""}, cur.AddressedItems[:1:1])
	assert.Equal(t, "", cur.AddressedItems[:2][1], "the spare capacity of the input's slice was not written")
}
