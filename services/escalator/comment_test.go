package escalator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

func TestRenderComment(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	const head = "0123456789abcdef0123456789abcdef01234567"
	def := CommentOptions{Label: DefaultLabel}
	tests := []struct {
		name        string
		req         Request
		opts        CommentOptions
		contains    []string
		notContains []string
	}{
		{
			name: "max fix cycles says why, what was tried and what to do",
			req: Request{PR: pr, HeadSHA: head, Reason: events.ReasonMaxFixCycles, Severity: events.SeverityBlocking, FixCycle: 3,
				LastError: "agent exited with status 1"},
			opts: CommentOptions{Label: DefaultLabel, Mentions: []string{"alice", "@acme/maintainers"}},
			contains: []string{
				"<!-- prloop:escalation reason=max_fix_cycles head=" + head + " -->\n",
				"fix-cycle limit reached", "reason `max_fix_cycles`", "severity **blocking**",
				"Fix cycles pushed by prloop: 3", "Last error:", "  agent exited with status 1\n", "Head commit: ` 0123456789ab `",
				"react 👍", "Remove the `human-review-required` label to let prloop resume",
				"fix-cycle count reset", "prloop runs no agent for it", "cc @alice @acme/maintainers",
			},
		},
		{
			name: "review timeout names the missing reviewers without pinging them",
			req: Request{PR: pr, HeadSHA: head, Reason: events.ReasonReviewTimeout, Severity: events.SeverityWarning,
				MissingReviewers: []string{"copilot-pull-request-reviewer", "github-actions[bot]"}, HumanReviewRequired: true},
			opts: def,
			contains: []string{
				"no review in time", "reason `review_timeout`", "severity **warning**",
				"Still waiting for: ` copilot-pull-request-reviewer `, ` github-actions[bot] `", "react 👍",
			},
			notContains: []string{"Fix cycles", "@copilot", "cc "},
		},
		{
			name: "an agent budget says the run's figures and its last message",
			req: Request{PR: pr, HeadSHA: head, Reason: events.ReasonAgentBudgetExhausted, Severity: events.SeverityBlocking,
				Detail: "the agent's run reached turn 4, over PRLOOP_AGENT_MAX_TURNS=3", Agent: &events.AgentRunSummary{
					Preset: "claude-code", Turns: 4, CostUSD: 0.12, PRCostUSD: 0.3, Tools: []string{"Read×4"}, Denials: []string{"Bash"},
					Budget: "turns", Final: "Still looking at main.go.",
				}},
			opts: def,
			contains: []string{
				"The agent's last run: ` claude-code: 4 turn(s), $0.1200, $0.3000 on this PR so far; tools Read×4; denied Bash; stopped by prloop's turns budget `",
				"over PRLOOP_AGENT_MAX_TURNS=3", "The agent's last message:", "  Still looking at main.go.\n",
			},
		},
		{
			name: "failed checks ask for a fix, not a review",
			req: Request{PR: pr, HeadSHA: head, Reason: events.ReasonChecksFailed, Severity: events.SeverityBlocking,
				Detail: "required checks failed: check unit-tests (failure)"},
			opts:        def,
			contains:    []string{"required checks failed", "Fix the failing checks", "Details:", "  required checks failed: check unit-tests (failure)\n"},
			notContains: []string{"👍"},
		},
		{
			name:     "merge conflict",
			req:      Request{PR: pr, HeadSHA: head, Reason: events.ReasonMergeConflict, Severity: events.SeverityBlocking},
			opts:     CommentOptions{Label: "needs-human"},
			contains: []string{"merge conflict", "Resolve the conflicts", "Remove the `needs-human` label", "While the `needs-human` label"},
		},
		{
			name:     "an unknown reason is still explained by its code",
			req:      Request{PR: pr, HeadSHA: head, Reason: "quota_exhausted", Severity: events.SeverityInfo},
			opts:     def,
			contains: []string{"quota exhausted", "reason `quota_exhausted`", "severity **info**", "Remove the `human-review-required` label"},
		},
		{
			name: "hostile text cannot format the comment or mention anyone",
			req: Request{PR: pr, HeadSHA: "abc -->", Reason: events.ReasonFeedbackFailed, Severity: events.SeverityWarning,
				LastError: "```\n@everyone <!-- hidden -->\n```", MissingReviewers: []string{"a`b @bob"}},
			opts: def,
			contains: []string{
				"<!-- prloop:escalation reason=feedback_failed head=none -->\n", "  ````text\n  ```\n  @everyone <!-- hidden -->\n  ```\n  ````\n",
				"`` a`b @bob ``",
			},
			notContains: []string{"Head commit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := RenderComment(tt.req, 0, tt.opts)
			assert.True(t, strings.HasPrefix(got, Marker(tt.req.Reason, tt.req.HeadSHA, 0)+"\n"), "the marker comes first:\n%s", got)
			for _, s := range tt.contains {
				assert.Contains(t, got, s)
			}
			for _, s := range tt.notContains {
				assert.NotContains(t, got, s)
			}
		})
	}
}

func TestRenderComment_TruncatesLongText(t *testing.T) {
	t.Parallel()
	got := RenderComment(Request{Reason: events.ReasonFeedbackFailed, LastError: strings.Repeat("é", 5000)}, 0, CommentOptions{Label: DefaultLabel})
	assert.Contains(t, got, "… (truncated)")
	assert.Less(t, len(got), 4000)
}

func TestRequestOf(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
	b := events.Base{PR: pr, HeadSHA: "abc"}
	tests := []struct {
		name    string
		data    events.Data
		ok      bool
		wantErr bool
		want    Request
	}{
		{name: "review timeout", ok: true, data: &events.ReviewTimeout{Base: b, MissingReviewers: []string{"bot"}, Detail: "2h", Epoch: 2},
			want: Request{PR: pr, HeadSHA: "abc", Reason: events.ReasonReviewTimeout, Severity: events.SeverityWarning,
				MissingReviewers: []string{"bot"}, Detail: "2h", HumanReviewRequired: true, Actor: "poller", Epoch: 2}},
		{name: "escalation request carries everything", ok: true,
			data: &events.EscalationRequested{Base: b, Reason: events.ReasonMaxFixCycles, Severity: events.SeverityBlocking, FixCycle: 3, LastError: "boom", Actor: "feedback", Epoch: 1},
			want: Request{PR: pr, HeadSHA: "abc", Reason: events.ReasonMaxFixCycles, Severity: events.SeverityBlocking, FixCycle: 3, LastError: "boom", Actor: "feedback", Epoch: 1}},
		{name: "unknown severity becomes warning", ok: true,
			data: &events.EscalationRequested{Base: b, Reason: events.ReasonChecksFailed, Severity: "panic"},
			want: Request{PR: pr, HeadSHA: "abc", Reason: events.ReasonChecksFailed, Severity: events.SeverityWarning}},
		{name: "a request without a reason code is refused", ok: true, wantErr: true, data: &events.EscalationRequested{Base: b, Severity: events.SeverityInfo}},
		{name: "a reason that is not a code is refused", ok: true, wantErr: true, data: &events.EscalationRequested{Base: b, Reason: "x --> y"}},
		{name: "other events are not requests", data: &events.Merged{Base: b}},
		// A conflict goes to the agent first: only the feedback service's
		// PREscalationRequested (merge_conflict) when it fails calls a human.
		{name: "a conflict handed to the agent is not a request", data: &events.ConflictResolveRequested{Base: b, BaseBranch: "main", BaseSHA: "def", Epoch: 1}},
		{name: "a candidate given up is not a request", data: &events.MergeCandidate{Base: b, State: events.CandidateInvalidated, Candidate: "c1", Detail: "main moved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok, err := RequestOf(tt.data)
			assert.Equal(t, tt.ok, ok)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			if tt.ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestMarker(t *testing.T) {
	t.Parallel()
	const head = "0123456789abcdef"
	tests := []struct {
		name  string
		head  string
		epoch int
		want  string
	}{
		{name: "the first epoch's marker is the one from before epochs", head: head, want: "<!-- prloop:escalation reason=checks_failed head=" + head + " -->"},
		{name: "a later epoch's marker names it", head: head, epoch: 2, want: "<!-- prloop:escalation reason=checks_failed head=" + head + " epoch=2 -->"},
		{name: "a head that is no SHA is left out", head: "x -->", epoch: 1, want: "<!-- prloop:escalation reason=checks_failed head=none epoch=1 -->"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Marker(events.ReasonChecksFailed, tt.head, tt.epoch))
		})
	}
}

// TestRenderComment_StepsPointAtTheErrorAboveThem: the error is quoted
// under "What was tried", before "What you can do next": a step that
// refers to it says it is above, for every reason, and none sends the
// reader below, where nothing is.
func TestRenderComment_StepsPointAtTheErrorAboveThem(t *testing.T) {
	t.Parallel()
	for reason := range reasons {
		t.Run(string(reason), func(t *testing.T) {
			t.Parallel()
			got := RenderComment(Request{Reason: reason, Severity: events.SeverityBlocking, Detail: "the detail", LastError: "the last error"}, 0,
				CommentOptions{Label: DefaultLabel})
			assert.NotContains(t, got, "below")
			quoted, steps := strings.Index(got, "Last error:"), strings.Index(got, "**What you can do next:**")
			require.Positive(t, quoted)
			require.Greater(t, steps, quoted, "the error comes before the steps:\n%s", got)
			if i := strings.Index(got, "error above"); i >= 0 {
				assert.Greater(t, i, quoted)
			}
		})
	}
	assert.Contains(t, AdviceFor(events.ReasonFeedbackFailed).Next[0], "last error above")
}
