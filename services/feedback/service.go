// Package feedback is prloop's feedback service: it turns a change request
// (PRFeedbackReceived) into a pushed fix. It gathers the authorized
// reviewers' comments from GitHub, sanitises them into a prompt, runs the
// coding agent in a checkout of the PR's branch, verifies on GitHub that
// the branch really moved (pushing the agent's commits itself when the agent
// did not), and publishes PRFeedbackAddressed, or PREscalationRequested
// when the agent fails or the PR used up its fix cycles.
//
// One attempt per PR at a time, across replicas, redeliveries and crashes:
// each attempt holds the PR's lease (package kvlease: created with a
// compare-and-set, renewed by compare-and-set on its revision while the
// agent works, expiring when a crashed replica stops renewing it). It
// fences every side effect: the lease is renewed right before each push,
// event and record write, which fails once anyone else took it; and a
// replica that cannot renew kills its agent before the lease can expire in
// the others' eyes. A record per PR keyed by PR, head and fix cycle makes a
// redelivered change request publish nothing new and run no agent. It
// numbers the fix before anything is pushed, so that one push is one fix
// cycle across any resume, and records how far the agent run got, so that
// a resume discards what an interrupted run left in the worktree and pushes
// only the work of a run that ended normally.
//
// It also opens pull requests (PRCreateRequested, open.go): it pushes a
// worktree's branch from its mirror, opens the PR and publishes PRCreated.
//
// The agent gets no GitHub credential: it may commit and try to push, and
// prloop pushes on its behalf with the token in its own git's environment.
package feedback

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/template"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/pkg/sandbox"
)

// Name is the service's name: its durable consumer, its event source
// (/prloop/feedback) and its log attribute.
const Name = "feedback"

// Types are the event types the service consumes.
// PRCreateRequested asks it to push a branch and open its pull request
// (open.go): it owns the mirror and the pushing. PRConflictResolveRequested
// asks it to have the agent resolve a conflict with the base
// (plan_conflict.go, attempt_conflict.go). PRChecksFailed asks it to re-run
// or fix failing checks (plan_checks.go, attempt_checks.go). PRMergeFailed
// with reason candidate_failed hands it a candidate's failure: the agent
// makes the PR pass on the current base (plan_checks.go); every other
// PRMergeFailed is ignored.
var Types = []events.Type{events.TypeCreateRequested, events.TypeFeedbackReceived, events.TypeConflictResolveRequested, events.TypeChecksFailed, events.TypeMergeFailed}

// GitHub is the part of the GitHub client the service uses.
type GitHub interface {
	review.Source
	GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error)
	GetPermission(ctx context.Context, repo ghref.Repo, login string) (string, error)
	GitToken(ctx context.Context) (github.Secret, error)
	// Telling the reviewers that a fix is ready (attempt_notify.go).
	CreateIssueComment(ctx context.Context, pr ghref.PR, body string) (*gh.IssueComment, error)
	ReplyToReviewComment(ctx context.Context, pr ghref.PR, commentID int64, body string) (*gh.PullRequestComment, error)
	RequestReviewers(ctx context.Context, pr ghref.PR, logins ...string) error
	// Opening a pull request (open.go).
	GetRepo(ctx context.Context, repo ghref.Repo) (*gh.Repository, error)
	CreatePull(ctx context.Context, repo ghref.Repo, in github.PullInput) (*gh.PullRequest, error)
	FindOpenPull(ctx context.Context, repo ghref.Repo, branch, base string) (*gh.PullRequest, error)
	AddLabels(ctx context.Context, pr ghref.PR, labels ...string) ([]*gh.Label, error)
	ListBranchRules(ctx context.Context, repo ghref.Repo, branch string) ([]github.BranchRule, error)
}

var _ GitHub = (*github.Client)(nil)

// Deps are the service's dependencies.
type Deps struct {
	GitHub GitHub
	JS     events.JetStreamConsumer
	// KV is the service's bucket (see Bucket and OpenBucket).
	KV  kvlease.KV
	Log *slog.Logger
	// Holder names this replica in the leases it takes; default
	// kvlease.HolderID().
	Holder string
	// Self is prloop's own GitHub login.
	Self string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Environ is the environment agents and git inherit, before credentials
	// are removed; default os.Environ.
	Environ func() []string
	// GitBin is the git executable; default "git".
	GitBin string
	// Metrics counts attempts, agent runs and deliveries; default metrics
	// registered nowhere.
	Metrics *metrics.Feedback
	// Sandbox confines the agent and the git commands in its worktree;
	// default: the one PRLOOP_AGENT_SANDBOX names, probed at New.
	Sandbox Sandbox
}

// Service is the feedback service.
type Service struct {
	cfg     Config
	d       Deps
	records records
	emit    *events.Emitter
	auth    *review.Authorization
	policy  review.Policy
	pol     *policy.Reader // each base's .github/prloop.yml (policy.go)
	tmpl    *template.Template
	agent   Agent
	// spec is the agent's command line (PRLOOP_AGENT and its settings).
	spec agentSpec
	// git is prloop's git with the process's environment (the sweep uses
	// it); newGit gives an attempt one with the attempt's environment.
	git      *realGit
	newGit   func(env []string) Git
	sleep    func(ctx context.Context, d time.Duration) error
	worksDir string
	// sweepCursor is the key of the last PR Sweep checked; only Sweep
	// touches it.
	sweepCursor string
}

// New builds the service. It fails only on a prompt template that does not
// parse or a workspace directory that cannot be resolved.
func New(cfg Config, d Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Environ == nil {
		d.Environ = os.Environ
	}
	if d.GitBin == "" {
		d.GitBin = "git"
	}
	if d.Holder == "" {
		d.Holder = kvlease.HolderID()
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewFeedback(nil)
	}
	if d.Sandbox == nil {
		mode, err := sandbox.ParseMode(cfg.AgentSandbox)
		if err != nil {
			return nil, err
		}
		sb, err := sandbox.New(sandbox.Options{
			Mode: mode, ReadOnly: cfg.AgentReadOnlyPaths, Writable: cfg.AgentWritablePaths,
			MemoryMax: cfg.AgentMemoryMaxMB << 20,
		}, d.Log)
		if err != nil {
			return nil, fmt.Errorf("PRLOOP_AGENT_SANDBOX=%s: %w", cfg.AgentSandbox, err)
		}
		d.Sandbox = sb
	}
	tmpl, err := loadTemplate(cfg.PromptTemplate)
	if err != nil {
		return nil, fmt.Errorf("PRLOOP_PROMPT_TEMPLATE: %w", err)
	}
	agent, err := newAgent(cfg, d.Sandbox)
	if err != nil {
		return nil, err
	}
	dir := cfg.WorkspaceDir
	if dir == "" {
		dir = filepath.Join(cfg.DataDir, "workspace")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("PRLOOP_WORKSPACE_DIR: %w", err)
	}
	s := &Service{
		cfg:     cfg,
		d:       d,
		records: records{kv: d.KV},
		emit:    events.NewEmitter(d.JS, Name),
		auth: cfg.PolicyConfig.Authorization(func(ctx context.Context, repo ghref.Repo, login string) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, apiTimeout)
			defer cancel()
			return d.GitHub.GetPermission(ctx, repo, login)
		}),
		policy:   cfg.Policy(d.Self),
		tmpl:     tmpl,
		agent:    agent,
		spec:     agent.Spec,
		sleep:    ctxtime.Sleep,
		worksDir: dir,
	}
	s.pol = newPolicies(cfg, d.GitHub, s.auth)
	s.git = &realGit{
		Bin: d.GitBin, Name: cfg.GitAuthorName, Email: cfg.GitAuthorEmail, Token: d.GitHub.GitToken,
		Sandbox: d.Sandbox, MaxBundleBytes: cfg.AgentMaxBytes,
	}
	if filepath.IsAbs(d.GitBin) {
		// A git outside the system directories must be visible in the
		// sandbox, where the worktree's git commands run.
		s.git.ReadOnly = []string{filepath.Dir(d.GitBin)}
	}
	s.newGit = func(env []string) Git {
		g := *s.git
		g.Env = env
		return &g
	}
	return s, nil
}

// FromRuntime builds the service for a process: the GitHub client from
// cfg, prloop's own login, and the service's bucket. It fails when the
// agent command's program is not found inside the sandbox (CheckAgent).
func FromRuntime(ctx context.Context, rt *app.Runtime, cfg Config) (*Service, error) {
	client, err := rt.NewGitHub(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	self := rt.SelfLogin(ctx, client, cfg.GitHubLogin)
	kv, err := OpenBucket(ctx, rt.JS, cfg.StreamReplicas)
	if err != nil {
		return nil, err
	}
	s, err := New(cfg, Deps{
		GitHub: client, JS: rt.JS, KV: kv,
		Log: rt.Log.With("component", Name), Self: self, Metrics: metrics.NewFeedback(rt.Registry),
	})
	if err != nil {
		return nil, err
	}
	// A coding agent the sandbox cannot run is found out now, not after
	// the first change request's runs and backoffs.
	if err := s.CheckAgent(ctx); err != nil {
		return nil, err
	}
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	return s, nil
}

var _ app.Service = (*Service)(nil)

// Run consumes change requests until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	// Handlers get the shutdown grace minus the time an agent may take to
	// die, so that a stopped attempt can still kill its agent, release its
	// lease and hand the change request back before the process exits.
	grace := s.cfg.ShutdownGrace - s.cfg.AgentKillGrace - time.Second
	grace = max(grace, s.cfg.ShutdownGrace/4)
	sweepCtx, stopSweep := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() { defer close(swept); s.sweepLoop(sweepCtx, s.cfg.WorkspaceSweepInterval) }()
	defer func() { stopSweep(); <-swept }()
	return events.Consume(ctx, s.d.JS, events.ConsumerConfig{
		Durable: Name, Types: Types, Concurrency: s.cfg.Concurrency,
		AckWait: s.cfg.AckWait, MaxDeliver: s.cfg.MaxDeliver, Backoff: s.cfg.RetryBackoff,
		Grace: grace, Logger: s.d.Log, Observer: s.d.Metrics.Consumer,
	}, s.handle)
}

// handle adapts a delivered event to Address (a change request or a
// conflict) or Open: nil acks, an error
// redelivers.
func (s *Service) handle(ctx context.Context, m *events.Msg) error {
	switch d := m.Data.(type) {
	case *events.FeedbackReceived:
		_, err := s.Address(ctx, requestOf(d, m.Event.ID()))
		return err
	case *events.ConflictResolveRequested:
		_, err := s.Address(ctx, conflictRequestOf(d, m.Event.ID()))
		return err
	case *events.ChecksFailed:
		_, err := s.Address(ctx, checksRequestOf(d, m.Event.ID()))
		return err
	case *events.MergeFailed:
		if d.Reason != events.ReasonCandidateFailed || d.DryRun {
			return nil
		}
		_, err := s.Address(ctx, candidateRequestOf(d, m.Event.ID()))
		return err
	case *events.CreateRequested:
		return s.handleOpen(ctx, d)
	}
	return nil
}
