package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

var testPR = ghref.PR{Owner: "acme", Repo: "widgets", Number: 42, URL: "https://github.com/acme/widgets/pull/42"}

// samples returns one payload of every event type.
func samples(pr ghref.PR) []Data {
	b := Base{PR: pr, HeadSHA: "0123456789abcdef0123456789abcdef01234567"}
	repo := b
	repo.PR = pr.RepoRef().PR(CreateRequestedNumber)
	return []Data{
		&CreateRequested{Base: repo, Worktree: "/w", Branch: "feature/x", BaseBranch: "main", Body: "Why.", Labels: []string{"agent"}, Draft: true, ContextPath: ".specify", Actor: "cli"},
		&Created{Base: b, BaseBranch: "main", Branch: "feature/x", Worktree: "/w", ContextPath: ".specify", Actor: "feedback"},
		&WatchRequested{Base: b, Worktree: "/w", ContextPath: ".specify"},
		&ReviewPending{Base: b, Status: StatusPending},
		&ReviewInProgress{Base: b, Status: StatusInProgress, Actor: "alice"},
		&FeedbackReceived{Base: b, Status: StatusChangesRequested, FixCycle: 1, CommentIDs: []int64{7}},
		&FeedbackAddressed{Base: b, PreviousHeadSHA: "ffff", FixCycle: 1},
		&FeedbackSkipped{Base: b, FixCycle: 1, Detail: "the head moved"},
		&ReviewApproved{Base: b, Status: StatusApproved, Actor: "alice", Approvers: []string{"alice"}},
		&ReviewTimeout{Base: b, Reason: ReasonReviewTimeout, MissingReviewers: []string{"bot"}},
		&MergeQueued{Base: b, Position: 2, BaseBranch: "main"},
		&MergeWaiting{Base: b, BaseBranch: "main", Checks: []string{"ci/build", "lint"}},
		&Merged{Base: b, MergeSHA: "abcd", MergeMethod: "squash"},
		&MergeFailed{Base: b, Reason: ReasonMergeConflict},
		&Closed{Base: b, Merged: false},
		&EscalationRequested{Base: b, Reason: ReasonMaxFixCycles, Severity: SeverityBlocking, HumanReviewRequired: true},
		&Escalated{Base: b, Reason: ReasonMaxFixCycles, Severity: SeverityBlocking, Actions: []string{"label", "comment"}},
		&EscalationResolved{Base: b, Epoch: 1, Detail: "escalation label removed"},
		&BranchUpdated{Base: b, PreviousHeadSHA: "ffff", Method: "update-branch"},
		&MergeCandidate{Base: b, BaseBranch: "main", State: CandidateBuilt, Candidate: "c0ffee", Tree: "7ee", Branch: "prloop/queue/main/2", BaseSHA: "ba5e", Position: 2, Ahead: []int{41}},
		&ConflictResolveRequested{Base: b, BaseBranch: "main", BaseSHA: "ba5e", Detail: "conflicts in a.go", Epoch: 1},
		&ChecksFailed{Base: b, Round: 1, Checks: []FailedCheck{{Name: "test", Kind: CheckKindRun, Conclusion: "failure", ID: 7, Actions: true}}},
		&AgentWaiting{Base: b, State: AgentWaitStarted, Reason: AgentWaitDailyBudget, SpentUSD: 10.5, BudgetUSD: 10, ResumeAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), FixCycle: 1},
		&QueueFreezeRequested{Base: repo, BaseBranch: "main", Reason: "release 2.0", Until: time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC), Actor: "ops"},
		&QueueFrozen{Base: repo, BaseBranch: "main", Reason: "release 2.0", Actor: "ops"},
		&QueueUnfrozen{Base: repo, BaseBranch: "main", Detail: "lifted", Actor: "ops"},
		&CommandReceived{Base: b, Command: CommandRetry, CommentID: 42, Author: "alice", Epoch: 1},
	}
}

func TestSamples_CoverEveryType(t *testing.T) {
	t.Parallel()
	var got []Type
	for _, d := range samples(testPR) {
		got = append(got, d.EventType())
	}
	assert.Equal(t, Types, got)
}

func TestNew_StructuredCloudEvent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, d := range samples(testPR) {
		t.Run(string(d.EventType()), func(t *testing.T) {
			t.Parallel()
			pr, subject := testPR, "acme/widgets#42"
			wantPR := map[string]any{"owner": "acme", "repo": "widgets", "number": float64(42), "url": testPR.URL}
			if RepoLevel(d.EventType()) {
				pr, subject = d.Ref(), "acme/widgets#0"
				wantPR = map[string]any{"owner": "acme", "repo": "widgets", "number": float64(0)}
			}
			e, err := New("poller", d, now, "sha", "3")
			require.NoError(t, err)
			m, err := Message(e)
			require.NoError(t, err)
			assert.Equal(t, ContentType, m.Header.Get("Content-Type"))
			assert.Equal(t, e.ID(), m.Header.Get("Nats-Msg-Id"))
			assert.Equal(t, Subject(pr, d.EventType()), m.Subject)

			// The body is a self-describing CloudEvents 1.0 JSON document.
			var raw map[string]any
			require.NoError(t, json.Unmarshal(m.Data, &raw))
			assert.Equal(t, "1.0", raw["specversion"])
			assert.Equal(t, "/prloop/poller", raw["source"])
			assert.Equal(t, subject, raw["subject"])
			assert.Equal(t, string(d.EventType()), raw["type"])
			assert.Equal(t, "application/json", raw["datacontenttype"])
			assert.Equal(t, "2026-01-02T03:04:05Z", raw["time"])
			assert.Equal(t, subject+":"+string(d.EventType())+":sha:3", raw["id"])
			data := raw["data"].(map[string]any)
			assert.Equal(t, wantPR, data["pr"])
			assert.Equal(t, "0123456789abcdef0123456789abcdef01234567", data["head_sha"])

			e2, d2, err := Decode(m.Data)
			require.NoError(t, err)
			assert.Equal(t, e.ID(), e2.ID())
			assert.Equal(t, d, d2)
		})
	}
}

func TestNew_RejectsInvalidPR(t *testing.T) {
	t.Parallel()
	_, err := New("poller", &ReviewPending{Base: Base{PR: ghref.PR{Owner: "acme", Repo: "widgets"}}}, time.Now())
	assert.ErrorIs(t, err, ghref.ErrInvalid)
}

func TestDecode_Malformed(t *testing.T) {
	t.Parallel()
	good, err := New("poller", &ReviewPending{Base: Base{PR: testPR}, Status: StatusPending}, time.Now())
	require.NoError(t, err)
	body, err := json.Marshal(good)
	require.NoError(t, err)
	mutate := func(f func(map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(body, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		name string
		body []byte
	}{
		{name: "not json", body: []byte("{nope")},
		{name: "no id", body: mutate(func(m map[string]any) { delete(m, "id") })},
		{name: "unknown type", body: mutate(func(m map[string]any) { m["type"] = "PRExploded" })},
		{name: "bad data", body: mutate(func(m map[string]any) { m["data"] = map[string]any{"pr": "acme/widgets#42"} })},
		{name: "pr missing", body: mutate(func(m map[string]any) { m["data"] = map[string]any{"status": "pending"} })},
		{name: "subject mismatch", body: mutate(func(m map[string]any) { m["subject"] = "acme/widgets#43" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Decode(tt.body)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

func TestStatus_Precedence(t *testing.T) {
	t.Parallel()
	order := []Status{StatusPending, StatusChangesRequested, StatusInProgress, StatusApproved}
	for i := 1; i < len(order); i++ {
		assert.Greater(t, order[i].Rank(), order[i-1].Rank(), "%s should beat %s", order[i], order[i-1])
	}
}

func TestCleanTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxTitle+10)
	for _, tc := range []struct{ name, in, want string }{
		{name: "plain", in: "Add widgets", want: "Add widgets"},
		{name: "newlines and tabs become one space", in: "Add\n\n\twidgets\r\n", want: "Add widgets"},
		{name: "leading and trailing space dropped", in: "  Add  ", want: "Add"},
		{name: "bidi override and zero-width marks", in: "Add\u202egnp.exe\u200b\u2066x", want: "Add gnp.exe x"},
		{name: "terminal escape", in: "\x1b[31mred\x1b[0m", want: "[31mred [0m"},
		{name: "invalid utf-8", in: "a\xffb", want: "a b"},
		{name: "markup is kept as text", in: `<script>alert(1)</script>`, want: `<script>alert(1)</script>`},
		{name: "emoji kept", in: "Fix 🐛", want: "Fix 🐛"},
		{name: "cut to MaxTitle runes", in: long, want: strings.Repeat("é", MaxTitle)},
		{name: "empty", in: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := CleanTitle(tc.in)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, utf8.RuneCountInString(got), MaxTitle)
		})
	}
}

// TestCheckRef_NumberZeroOnlyForCreateRequested: a command to open a PR is
// about the repository (number 0), and nothing else may be.
func TestCheckRef_NumberZeroOnlyForCreateRequested(t *testing.T) {
	t.Parallel()
	repo := ghref.PR{Owner: "acme", Repo: "widgets"}
	for _, tc := range []struct {
		name string
		pr   ghref.PR
		typ  Type
		ok   bool
	}{
		{name: "open request about the repository", pr: repo, typ: TypeCreateRequested, ok: true},
		{name: "open request naming a PR", pr: repo.RepoRef().PR(3), typ: TypeCreateRequested},
		{name: "open request of a bad repository", pr: ghref.PR{Owner: "-x", Repo: "widgets"}, typ: TypeCreateRequested},
		{name: "created needs the PR", pr: repo, typ: TypeCreated},
		{name: "created with the PR", pr: repo.RepoRef().PR(3), typ: TypeCreated, ok: true},
		{name: "watch of number 0", pr: repo, typ: TypeWatchRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckRef(tc.pr, tc.typ)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ghref.ErrInvalid)
			}
		})
	}
	// A forged body on the zero subject is no event.
	e, err := New("cli", &CreateRequested{Base: Base{PR: repo}, Worktree: "/w", Branch: "b"}, time.Now())
	require.NoError(t, err)
	m, err := Message(e)
	require.NoError(t, err)
	assert.Equal(t, "pr.acme.widgets.0.PRCreateRequested", m.Subject)
	_, d, err := Decode(m.Data)
	require.NoError(t, err)
	assert.Equal(t, "b", d.(*CreateRequested).Branch)
	bad := strings.Replace(string(m.Data), `"number":0`, `"number":7`, 1)
	_, _, err = Decode([]byte(bad))
	assert.ErrorIs(t, err, ErrMalformed)
}
