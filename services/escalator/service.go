// Package escalator is prloop's escalator service: when the loop is stuck
// it brings in a human, once per PR, reason and escalation epoch. It
// consumes ReviewTimeout and PREscalationRequested, labels the PR
// (PRLOOP_ESCALATION_LABEL), posts one comment that says why, what was
// tried and what to do next, notifies an optional webhook, publishes
// PREscalated and records the escalation in its own record of the PR.
//
// The escalator reads and writes no other service's records: what it
// needs to know about a PR comes as events, and what it remembers lives in
// its own bucket, PRLOOP_ESCALATIONS (ClaimBucket), next to its claims:
// one Record per PR (RecordKey) with the escalation done per reason and
// epoch, and the latest epoch a human resolved (PREscalationResolved). It
// deletes the record when it learns the PR was closed or merged (PRClosed,
// PRMerged), so the bucket holds open PRs only.
//
// Exactly once, across redeliveries, replicas and crashes:
//
//   - The escalation epoch comes from the request (the event that asked
//     carries it), and everything the escalation leaves behind carries it
//     too (the comment's marker, the webhook's key, PREscalated's id and
//     data). A request of an epoch older than the latest one resolved is
//     old news: it is logged and acked, nothing else. An escalation done
//     for the reason in the request's epoch is not done again. An
//     escalation is recorded only if its epoch was not resolved
//     meanwhile, so that a label removed while the escalator was still at
//     work does not suppress the next escalation of the reason.
//   - One replica at a time works on a PR and reason: it holds a lease in
//     the same bucket (package kvlease); another replica gets the request
//     redelivered later and then finds it recorded.
//   - The label is idempotent; the comment starts with a hidden marker
//     (Marker) that is looked for before posting, so a crash between
//     posting and recording does not post twice; PREscalated has an id
//     derived from PR, reason, head and epoch, so JetStream drops a
//     republish.
//
// A webhook that is down is retried with backoff and then given up on: it
// never holds back the label or the comment, which come first.
package escalator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/policy"
)

// Name is the service's name: its durable consumer, its event source
// (/prloop/escalator) and its log attribute.
const Name = "escalator"

// Types are the event types the service consumes: the requests, and what
// keeps its records of a PR current.
var Types = []events.Type{
	events.TypeReviewTimeout, events.TypeEscalationRequested, events.TypeEscalationResolved, events.TypeClosed, events.TypeMerged,
	events.TypeCommandReceived,
}

// ClaimBucket is the escalator's KV bucket: its claims (leases) and its
// records of PRs (Record).
const ClaimBucket = "PRLOOP_ESCALATIONS"

// GitHub is the part of the GitHub client the escalator uses.
type GitHub interface {
	AddLabels(ctx context.Context, pr ghref.PR, labels ...string) ([]*gh.Label, error)
	ListIssueComments(ctx context.Context, pr ghref.PR, since time.Time) ([]*gh.IssueComment, error)
	CreateIssueComment(ctx context.Context, pr ghref.PR, body string) (*gh.IssueComment, error)
}

var _ GitHub = (*github.Client)(nil)

// Notifier delivers the webhook summary.
type Notifier interface {
	Post(ctx context.Context, key string, body any) error
}

var _ Notifier = Webhook{}

// Deps are the escalator's dependencies.
type Deps struct {
	GitHub GitHub
	JS     events.JetStreamConsumer
	// Claims is the PRLOOP_ESCALATIONS bucket (EnsureClaims): claims and
	// records.
	Claims kvlease.KV
	// Webhook is nil when no webhook is configured.
	Webhook Notifier
	Log     *slog.Logger
	// Holder names this replica in claims; default kvlease.HolderID.
	Holder string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics counts escalations, webhook deliveries and deliveries of
	// events; default metrics registered nowhere.
	Metrics *metrics.Escalator
}

// Service is the escalator.
type Service struct {
	cfg  Config
	d    Deps
	emit *events.Emitter
	log  *slog.Logger
	// pol reads each base's .github/prloop.yml (policy.go).
	pol *policy.Reader
}

var _ app.Service = (*Service)(nil)

// New builds the escalator.
func New(cfg Config, d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	config.DefaultZero(&cfg, "PRLOOP_ESCALATION_LABEL")
	if d.Metrics == nil {
		d.Metrics = metrics.NewEscalator(nil)
	}
	return &Service{cfg: cfg, d: d, emit: events.NewEmitter(d.JS, Name), log: d.Log, pol: newPolicies(cfg, d.GitHub)}
}

// WebhookOf returns the configured webhook, or nil.
func WebhookOf(cfg Config) Notifier {
	if cfg.WebhookURL == "" {
		return nil
	}
	return Webhook{URL: cfg.WebhookURL, Client: &http.Client{}, Retries: cfg.WebhookRetries, Backoff: cfg.WebhookBackoff, Timeout: cfg.WebhookTimeout}
}

// EnsureClaims creates or updates the escalator's bucket.
func EnsureClaims(ctx context.Context, js kvlease.BucketManager, replicas int) (jetstream.KeyValue, error) {
	return kvlease.EnsureBucket(ctx, js, ClaimBucket, "prloop escalations: in progress (leases) and done, per PR", replicas)
}

// FromRuntime builds the escalator for a process: the GitHub client from
// cfg, the claims bucket, the webhook and the readiness check.
func FromRuntime(ctx context.Context, rt *app.Runtime, cfg Config) (*Service, error) {
	client, err := rt.NewGitHub(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	kv, err := EnsureClaims(ctx, rt.JS, rt.Common.StreamReplicas)
	if err != nil {
		return nil, err
	}
	// Exact drops the marker of a deleted record or released claim, so
	// that keys of closed PRs do not pile up as markers.
	claims, err := kvlease.Exact(ctx, rt.JS, kv)
	if err != nil {
		return nil, err
	}
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	return New(cfg, Deps{
		GitHub: client, JS: rt.JS, Claims: claims, Webhook: WebhookOf(cfg), Log: rt.Log.With("component", Name),
		Metrics: metrics.NewEscalator(rt.Registry),
	}), nil
}

// Run consumes escalation requests until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("escalator started", "label", s.cfg.Label, "mentions", s.cfg.Mentions, "webhook", s.d.Webhook != nil)
	return events.Consume(ctx, s.d.JS, events.ConsumerConfig{
		Durable: Name, Types: Types, Logger: s.log, Concurrency: 2, Observer: s.d.Metrics.Consumer, Backoff: s.cfg.RetryBackoff,
	}, s.handle)
}

// handle adapts a consumed event to Escalate, or to the change of the
// PR's record it implies.
func (s *Service) handle(ctx context.Context, m *events.Msg) error {
	switch d := m.Data.(type) {
	case *events.EscalationResolved:
		return s.resolved(ctx, d.PR, d.Epoch)
	case *events.CommandReceived:
		if d.Command == events.CommandRetry {
			return s.retry(ctx, d)
		}
		return nil
	case *events.Closed:
		return s.forget(ctx, d.PR)
	case *events.Merged:
		if d.DryRun {
			return nil // nothing merged: the PR is still open
		}
		return s.forget(ctx, d.PR)
	}
	r, ok, err := RequestOf(m.Data)
	if !ok {
		return nil
	}
	if err != nil {
		return events.Permanent(err)
	}
	if r.PR.URL == "" {
		r.PR.URL = m.Data.Ref().URL
	}
	return s.Escalate(ctx, r)
}

// errInProgress says another replica is escalating the same PR and reason;
// the request is retried later and then finds the escalation recorded.
var errInProgress = errors.New("escalation in progress elsewhere")

// Escalate brings in a human for r, unless that was done already for the
// PR, reason and epoch, or a human resolved the request's epoch since:
// label, comment, webhook, PREscalated, record.
func (s *Service) Escalate(ctx context.Context, r Request) error {
	log := s.log.With("pr", r.PR.String(), "reason", r.Reason, "severity", r.Severity, "epoch", r.Epoch)
	if skip, err := s.skip(ctx, r, log); err != nil || skip {
		return err
	}
	lease, err := kvlease.Acquire(ctx, s.d.Claims, claimKey(r), s.d.Holder, kvlease.Options{
		TTL: s.cfg.ClaimTTL, Now: s.d.Now, Note: "escalating " + r.PR.String() + " " + string(r.Reason), Log: log,
	})
	if errors.Is(err, kvlease.ErrHeld) {
		return fmt.Errorf("escalate %s (%s): %w", r.PR, r.Reason, errInProgress)
	}
	if err != nil {
		return fmt.Errorf("escalate %s (%s): %w", r.PR, r.Reason, err)
	}
	lctx, release := lease.Hold(ctx)
	defer release()
	// Someone may have finished between the first look and the claim.
	if skip, err := s.skip(lctx, r, log); err != nil || skip {
		return err
	}
	epoch := r.Epoch
	key := claimKey(r) + "." + events.EpochPart(epoch)

	opts := s.optionsFor(lctx, r.PR, log)
	if _, err := s.d.GitHub.AddLabels(lctx, r.PR, opts.Label); err != nil {
		if errors.Is(err, github.ErrNotFound) {
			log.Warn("PR not found on GitHub; cannot escalate", "err", err)
			return nil
		}
		return fmt.Errorf("escalate %s: %w", r.PR, err)
	}
	actions := []string{"label"}
	posted, err := s.comment(lctx, r, epoch, opts)
	if err != nil {
		return fmt.Errorf("escalate %s: %w", r.PR, err)
	}
	actions = append(actions, "comment")
	if m := mentions(opts.Mentions); m != "" {
		actions = append(actions, "mention")
	}
	detail := ""
	if s.d.Webhook != nil {
		err := s.d.Webhook.Post(lctx, key, PayloadOf(r, opts, actions))
		if lctx.Err() == nil {
			s.d.Metrics.Webhook(err)
		}
		if err != nil {
			log.Warn("escalation webhook failed; the label and comment stand", "err", err)
			detail = "webhook failed: " + err.Error()
		} else {
			actions = append(actions, "webhook")
		}
	}
	if _, _, err := s.emit.Emit(lctx, &events.Escalated{
		Base: events.Base{PR: r.PR, HeadSHA: r.HeadSHA}, Reason: r.Reason, Severity: r.Severity, Actions: actions, Detail: detail,
		Epoch: epoch,
	}, string(r.Reason), r.HeadSHA, events.EpochPart(epoch)); err != nil {
		return err
	}
	if err := s.recordDone(lctx, r, s.d.Now().UTC()); err != nil {
		return err
	}
	s.d.Metrics.Escalated(r.Reason, r.Severity)
	log.Info("escalated", "actions", actions, "comment_posted", posted)
	return nil
}

// skip reports, with a log line, that r needs nothing done: it was done
// already, or it is old news.
func (s *Service) skip(ctx context.Context, r Request, log *slog.Logger) (bool, error) {
	rec, err := s.record(ctx, r.PR)
	if err != nil {
		return false, err
	}
	why := rec.skip(r)
	if why != "" {
		log.Info("nothing to escalate", "why", why)
	}
	return why != "", nil
}

// comment posts the escalation comment unless one with its marker is
// already there (posted before a crash). It reports whether it posted.
func (s *Service) comment(ctx context.Context, r Request, epoch int, opts CommentOptions) (bool, error) {
	marker := Marker(r.Reason, r.HeadSHA, epoch)
	existing, err := s.d.GitHub.ListIssueComments(ctx, r.PR, time.Time{})
	if err != nil {
		return false, err
	}
	for _, c := range existing {
		if s.cfg.GitHubLogin != "" && !strings.EqualFold(c.GetUser().GetLogin(), s.cfg.GitHubLogin) {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(c.GetBody()), marker) {
			return false, nil
		}
	}
	if _, err := s.d.GitHub.CreateIssueComment(ctx, r.PR, RenderComment(r, epoch, opts)); err != nil {
		return false, err
	}
	return true, nil
}
