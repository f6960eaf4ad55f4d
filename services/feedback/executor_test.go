package feedback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/metrics/metricstest"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/sandbox"
)

// The executor's tests: the attempt against fakes of GitHub, git and the
// agent (with the real bucket and stream of an embedded NATS), for the
// paths the real-process tests cannot steer, like a push that fails after
// the agent finished.

// fakeGitHub is a PR on GitHub: its head, and one change request (a review
// asking for changes on the head the test starts from).
type fakeGitHub struct {
	mu     sync.Mutex
	head   string
	review *gh.PullRequestReview
}

var _ GitHub = (*fakeGitHub)(nil)

func (f *fakeGitHub) setHead(sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head = sha
}

func (f *fakeGitHub) GetPull(context.Context, ghref.PR) (*gh.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &gh.PullRequest{
		State: gh.String("open"), Title: gh.String("Add main"), User: &gh.User{Login: gh.String("agent")},
		Head: &gh.PullRequestBranch{SHA: gh.String(f.head), Ref: gh.String("feature/x"), Repo: &gh.Repository{CloneURL: gh.String("https://github.example/acme/widgets.git")}},
	}, nil
}

func (f *fakeGitHub) ListReactions(context.Context, ghref.PR) ([]github.Reaction, error) {
	return nil, nil
}

func (f *fakeGitHub) ListIssueComments(context.Context, ghref.PR, time.Time) ([]*gh.IssueComment, error) {
	return nil, nil
}

func (f *fakeGitHub) ListReviews(context.Context, ghref.PR) ([]*gh.PullRequestReview, error) {
	return []*gh.PullRequestReview{f.review}, nil
}

func (f *fakeGitHub) ListReviewComments(context.Context, ghref.PR) ([]*gh.PullRequestComment, error) {
	return nil, nil
}

func (f *fakeGitHub) CreateIssueComment(context.Context, ghref.PR, string) (*gh.IssueComment, error) {
	return &gh.IssueComment{}, nil
}

func (f *fakeGitHub) ReplyToReviewComment(context.Context, ghref.PR, int64, string) (*gh.PullRequestComment, error) {
	return &gh.PullRequestComment{}, nil
}

func (f *fakeGitHub) RequestReviewers(context.Context, ghref.PR, ...string) error { return nil }

// Opening pull requests is not the executor's business (open_test.go).
func (f *fakeGitHub) GetRepo(context.Context, ghref.Repo) (*gh.Repository, error) {
	return nil, github.ErrNotFound
}

func (f *fakeGitHub) CreatePull(context.Context, ghref.Repo, github.PullInput) (*gh.PullRequest, error) {
	return nil, github.ErrForbidden
}

func (f *fakeGitHub) FindOpenPull(context.Context, ghref.Repo, string, string) (*gh.PullRequest, error) {
	return nil, nil
}

func (f *fakeGitHub) ListBranchRules(context.Context, ghref.Repo, string) ([]github.BranchRule, error) {
	return nil, nil
}

func (f *fakeGitHub) AddLabels(context.Context, ghref.PR, ...string) ([]*gh.Label, error) {
	return nil, nil
}

func (f *fakeGitHub) GetPermission(context.Context, ghref.Repo, string) (string, error) {
	return "write", nil
}

func (f *fakeGitHub) GitToken(context.Context) (github.Secret, error) {
	return "fake-token-0123456789", nil
}

// fakeGit is prloop's mirror and the agent's worktree: a commit graph
// (child → parent), the results the agent's runs leave, and the pushes
// that fail.
type fakeGit struct {
	mu      sync.Mutex
	gh      *fakeGitHub
	parent  map[string]string
	results []string // what each Export returns, in turn
	// pushErrs fail the pushes, in turn; mirrorLost makes the mirror
	// forget every result (a lost workspace).
	pushErrs   []error
	cloneErr   error
	mirrorLost bool
	calls      []string
}

var _ Git = (*fakeGit)(nil)

func (g *fakeGit) call(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, fmt.Sprintf(format, args...))
}

func (g *fakeGit) Adopt(context.Context, *Worktree, string, bool) (string, error) {
	return "not used in these tests", nil
}

func (g *fakeGit) Clone(_ context.Context, _ Worktree, start string) error {
	g.call("clone %s", ghref.EventSHA(start))
	return g.cloneErr
}

func (g *fakeGit) Reset(_ context.Context, _ Worktree, start string) error {
	g.call("reset %s", ghref.EventSHA(start))
	return nil
}

func (g *fakeGit) HasCommit(_ context.Context, _ Worktree, sha string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.parent[sha]
	return ok && !g.mirrorLost
}

func (g *fakeGit) Export(context.Context, Worktree, string, string, ...string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.results[0]
	g.results = g.results[1:]
	g.calls = append(g.calls, "export "+ghref.EventSHA(r))
	return r, nil
}

func (g *fakeGit) Sync(context.Context, Worktree) (string, error) {
	g.gh.mu.Lock()
	defer g.gh.mu.Unlock()
	return g.gh.head, nil
}

func (g *fakeGit) IsAncestor(_ context.Context, _ Worktree, a, b string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := b; c != ""; c = g.parent[c] {
		if c == a {
			return true, nil
		}
	}
	return false, nil
}

func (g *fakeGit) Inspect(context.Context, Worktree, string, string, int, string) error { return nil }

func (g *fakeGit) Push(_ context.Context, _ Worktree, target string) error {
	g.mu.Lock()
	if len(g.pushErrs) > 0 {
		err := g.pushErrs[0]
		g.pushErrs = g.pushErrs[1:]
		g.calls = append(g.calls, "push "+ghref.EventSHA(target)+" failed")
		g.mu.Unlock()
		return err
	}
	g.calls = append(g.calls, "push "+ghref.EventSHA(target))
	g.mu.Unlock()
	g.gh.setHead(target)
	return nil
}

// fakeAgent counts its runs.
type fakeAgent struct {
	mu   sync.Mutex
	runs int
	err  error
}

var _ Agent = (*fakeAgent)(nil)

func (a *fakeAgent) Run(context.Context, AgentRun) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs++
	return a.err
}

func (a *fakeAgent) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs
}

// noSandbox stands in for the sandbox, which the fakes never use.
type noSandbox struct{}

func (noSandbox) Run(context.Context, sandbox.Cmd) error {
	return errors.New("no sandbox in this test")
}
func (noSandbox) Mode() sandbox.Mode { return sandbox.None }

// sha makes a commit id from a name: its hex, padded with zeros.
func sha(name string) string {
	h := fmt.Sprintf("%x", name)
	return h + strings.Repeat("0", 40-len(h))
}

// executorWorld is a service whose attempts run against the fakes.
type executorWorld struct {
	svc   *Service
	gh    *fakeGitHub
	git   *fakeGit
	agent *fakeAgent
	rec   *eventstest.Recorder
	reg   *prometheus.Registry
	req   Request
}

func newExecutorWorld(t *testing.T) *executorWorld {
	t.Helper()
	conn := natstest.Start(t)
	kv, err := OpenBucket(t.Context(), conn.JS, 1)
	require.NoError(t, err)
	start := sha("start")
	anchor := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fgh := &fakeGitHub{head: start, review: &gh.PullRequestReview{
		ID: gh.Int64(41), User: &gh.User{Login: gh.String("alice")}, State: gh.String("CHANGES_REQUESTED"), Body: gh.String("handle the error"),
		CommitID: gh.String(start), SubmittedAt: &gh.Timestamp{Time: anchor.Add(time.Minute)},
	}}
	reg := metrics.NewRegistry()
	svc, err := New(Config{
		Common:       config.Common{ShutdownGrace: 2 * time.Second},
		PolicyConfig: review.PolicyConfig{ReviewProtocols: []string{"reviews"}, PermissionCacheTTL: time.Hour},
		WorkspaceDir: t.TempDir(), AgentAttempts: 3, AgentBackoff: time.Millisecond, PromptMaxBytes: 64 << 10,
		MaxFixCycles: 2, EscalationLabel: "human-review-required", LeaseTTL: 3 * time.Second,
	}, Deps{
		GitHub: fgh, JS: conn.JS, KV: kv, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Holder: "x",
		Self: "prloop-bot", Sandbox: noSandbox{}, Metrics: metrics.NewFeedback(reg),
		Now: func() time.Time { return anchor.Add(time.Hour) },
	})
	require.NoError(t, err)
	fgit := &fakeGit{gh: fgh, parent: map[string]string{start: ""}}
	agent := &fakeAgent{}
	svc.agent, svc.newGit = agent, func([]string) Git { return fgit }
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	return &executorWorld{
		svc: svc, gh: fgh, git: fgit, agent: agent, rec: eventstest.Record(t, conn.JS), reg: reg,
		req: Request{PR: pr, HeadSHA: start, FixCycle: 0, EventID: "ev-1", Epoch: 3, Anchor: anchor},
	}
}

// result adds a commit on parent that an agent run leaves.
func (w *executorWorld) result(name, parent string) string {
	c := sha(name)
	w.git.parent[c] = parent
	w.git.results = append(w.git.results, c)
	return c
}

// TestExecutor_Attempts runs change requests through the executor, one
// Address call per delivery, and checks what each delivery did.
func TestExecutor_Attempts(t *testing.T) {
	t.Parallel()
	transient := errors.New("token lookup timed out")
	type delivery struct {
		// outcome is the attempt's; err, when set, is a part of the error
		// that hands the request back for a redelivery.
		outcome Outcome
		err     string
	}
	tests := []struct {
		name       string
		prepare    func(w *executorWorld)
		deliveries []delivery
		// runs is the agent runs over all deliveries, calls prloop's git
		// calls, metric the agent runs by result.
		runs   int
		calls  []string
		metric map[string]float64
		// escalated is the escalation reason, addressed the fix's head.
		escalated events.Reason
		addressed string
	}{
		{
			name:       "the fix is pushed",
			prepare:    func(w *executorWorld) { w.result("fix", sha("start")) },
			deliveries: []delivery{{outcome: OutcomeAddressed}},
			runs:       1, calls: []string{"clone 737461727400", "export 666978000000", "push 666978000000"},
			metric:    map[string]float64{metrics.AgentFixed: 1},
			addressed: sha("fix"),
		},
		{
			name: "push fails after the agent finished: the redelivery pushes the run's result, no second run",
			prepare: func(w *executorWorld) {
				w.result("fix", sha("start"))
				w.git.pushErrs = []error{transient}
			},
			deliveries: []delivery{{err: "token lookup timed out"}, {outcome: OutcomeAddressed}},
			runs:       1,
			calls: []string{
				"clone 737461727400", "export 666978000000", "push 666978000000 failed",
				"clone 737461727400", "reset 737461727400", "push 666978000000",
			},
			metric:    map[string]float64{metrics.AgentError: 1},
			addressed: sha("fix"),
		},
		{
			name: "push fails after the agent finished and the mirror lost the result: the agent runs again",
			prepare: func(w *executorWorld) {
				w.result("fix", sha("start"))
				w.result("fix2", sha("start"))
				w.git.pushErrs = []error{transient}
				w.git.mirrorLost = true
			},
			deliveries: []delivery{{err: "token lookup timed out"}, {outcome: OutcomeAddressed}},
			runs:       2,
			calls: []string{
				"clone 737461727400", "export 666978000000", "push 666978000000 failed",
				"clone 737461727400", "reset 737461727400", "export 666978320000", "push 666978320000",
			},
			metric:    map[string]float64{metrics.AgentError: 1, metrics.AgentFixed: 1},
			addressed: sha("fix2"),
		},
		{
			name: "a push git refuses: the agent runs again in the same attempt",
			prepare: func(w *executorWorld) {
				w.result("fix", sha("start"))
				w.result("fix2", sha("start"))
				w.git.pushErrs = []error{fmt.Errorf("push: %w", ErrGit)}
			},
			deliveries: []delivery{{outcome: OutcomeAddressed}},
			runs:       2,
			calls: []string{
				"clone 737461727400", "export 666978000000", "push 666978000000 failed", "reset 737461727400",
				"export 666978320000", "push 666978320000",
			},
			metric:    map[string]float64{metrics.AgentGitError: 1, metrics.AgentFixed: 1},
			addressed: sha("fix2"),
		},
		{
			name: "the agent's work does not descend from the head: escalated",
			prepare: func(w *executorWorld) {
				w.git.parent[sha("elsewhere")] = ""
				w.result("rewritten", sha("elsewhere"))
			},
			deliveries: []delivery{{outcome: OutcomeEscalated}},
			runs:       1, calls: []string{"clone 737461727400", "export 726577726974"},
			metric:    map[string]float64{metrics.AgentRewritten: 1},
			escalated: events.ReasonFeedbackFailed,
		},
		{
			name:       "the agent fails every run: escalated when the runs are used up",
			prepare:    func(w *executorWorld) { w.agent.err = errors.New("agent failed: exit status 1") },
			deliveries: []delivery{{outcome: OutcomeEscalated}},
			runs:       3,
			calls:      []string{"clone 737461727400", "reset 737461727400", "reset 737461727400", "reset 737461727400"},
			metric:     map[string]float64{metrics.AgentFailed: 3},
			escalated:  events.ReasonFeedbackFailed,
		},
		{
			name:       "the PR cannot be checked out: escalated, no agent",
			prepare:    func(w *executorWorld) { w.git.cloneErr = fmt.Errorf("%w: branch name", ErrUnusable) },
			deliveries: []delivery{{outcome: OutcomeEscalated}},
			calls:      []string{"clone 737461727400"},
			escalated:  events.ReasonFeedbackFailed,
		},
		{
			name:       "the review was addressed by an earlier fix: skipped",
			prepare:    func(w *executorWorld) { w.req.Addressed = []string{review.ItemKey(review.KindReview, 41)} },
			deliveries: []delivery{{outcome: OutcomeSkipped}},
			calls:      []string{"clone 737461727400"},
		},
		{
			name:       "no anchor in the request: skipped",
			prepare:    func(w *executorWorld) { w.req.Anchor = time.Time{} },
			deliveries: []delivery{{outcome: OutcomeSkipped}},
			calls:      []string{"clone 737461727400"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newExecutorWorld(t)
			tt.prepare(w)
			for i, d := range tt.deliveries {
				res, err := w.svc.Address(t.Context(), w.req)
				if d.err != "" {
					require.ErrorContains(t, err, d.err, "delivery %d", i+1)
					continue
				}
				require.NoError(t, err, "delivery %d", i+1)
				assert.Equal(t, d.outcome, res.Outcome, "delivery %d", i+1)
			}
			assert.Equal(t, tt.runs, w.agent.count(), "agent runs")
			assert.Equal(t, tt.calls, w.git.calls)
			for result, n := range tt.metric {
				assert.Equal(t, n, metricstest.Value(w.reg, "prloop_feedback_agent_runs_total", "result", result), result)
			}
			if tt.addressed != "" {
				ev := w.rec.Wait(t, w.req.PR, events.TypeFeedbackAddressed, 10*time.Second).Data.(*events.FeedbackAddressed)
				assert.Equal(t, tt.addressed, ev.HeadSHA)
				assert.Equal(t, 1, ev.FixCycle, "one push, one fix cycle")
			}
			if tt.escalated != "" {
				ev := w.rec.Wait(t, w.req.PR, events.TypeEscalationRequested, 10*time.Second).Data.(*events.EscalationRequested)
				assert.Equal(t, tt.escalated, ev.Reason)
				assert.Equal(t, 3, ev.Epoch, "the request's escalation epoch")
			}
			if tt.deliveries[len(tt.deliveries)-1].outcome == OutcomeSkipped {
				ev := w.rec.Wait(t, w.req.PR, events.TypeFeedbackSkipped, 10*time.Second).Data.(*events.FeedbackSkipped)
				assert.Equal(t, "no feedback left to address", ev.Detail)
			}
		})
	}
}

// TestExecutor_ResumeAfterPush_PublishesWithoutPushing: a replica pushed
// the fix and died before publishing it; the redelivery confirms the push
// on GitHub and publishes it with the recorded push time, no agent, no
// second push.
func TestExecutor_ResumeAfterPush_PublishesWithoutPushing(t *testing.T) {
	t.Parallel()
	w := newExecutorWorld(t)
	fix := sha("fix")
	w.git.parent[fix] = w.req.HeadSHA
	w.gh.setHead(fix)
	pushedAt := time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)
	_, err := w.svc.records.put(t.Context(), w.req.PR, Record{
		Key: w.req.Key(), EventID: w.req.EventID, Runs: 1, FixCycle: 1, Phase: PhasePushed, ResultSHA: fix, PushedSHA: fix, PushedAt: pushedAt,
	}, 0)
	require.NoError(t, err)

	res, err := w.svc.Address(t.Context(), Request{PR: w.req.PR, HeadSHA: w.req.HeadSHA, EventID: "ev-redelivered", Anchor: w.req.Anchor})
	require.NoError(t, err)
	assert.Equal(t, Result{Outcome: OutcomeAddressed, NewHead: fix}, res)
	ev := w.rec.Wait(t, w.req.PR, events.TypeFeedbackAddressed, 10*time.Second).Data.(*events.FeedbackAddressed)
	assert.Equal(t, pushedAt, ev.PushedAt.UTC())
	assert.Equal(t, 1, ev.FixCycle)
	assert.Zero(t, w.agent.count())
	assert.Equal(t, []string{"clone 737461727400", "reset 737461727400"}, w.git.calls)
	assert.True(t, strings.HasPrefix(res.NewHead, "666978"))
}
