package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
	"github.com/prloop/prloop/pkg/state"
)

// FromRuntime builds the poller for a process: the GitHub client from cfg,
// prloop's own login, the state store and the webhook route.
func FromRuntime(ctx context.Context, rt *app.Runtime, cfg Config) (*Service, error) {
	client, err := rt.NewGitHub(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	// A repository GitHub does not show would be polled, and refused, for
	// ever: refuse it at start instead.
	if err := rt.CheckRepos(ctx, client, cfg.RepoRefs()); err != nil {
		return nil, err
	}
	self := rt.SelfLogin(ctx, client, cfg.GitHubLogin)
	js := rt.JS
	log := rt.Log.With("component", Name)
	leases, err := EnsureLeases(ctx, js, cfg.StreamReplicas)
	if err != nil {
		return nil, err
	}
	// The PR records are the poller's alone (see package state).
	store, err := state.Ensure(ctx, js, cfg.StreamReplicas)
	if err != nil {
		return nil, err
	}
	prs, err := kvlease.OpenBucket(ctx, js, state.Bucket)
	if err != nil {
		return nil, err
	}
	var status *StatusWriter
	sharder := NewSharder(leases, leaseTTL(cfg.PollInterval), log)
	if cfg.PostStatus {
		opts := cfg.StatusOptions()
		opts.Owns = sharder.Owns
		status = NewStatusWriter(opts, client, js, log.With("part", "status"))
	}
	s := New(cfg, Deps{
		GitHub: client, Store: store, JS: js, Log: log, Self: self, Now: rt.Now,
		Merged: MergedByPrloop(js),
		Shard:  sharder, Status: status,
		Kicks:   natsKicks{nc: rt.Conn.NC},
		NewPRs:  WatchNewPRs(prs),
		Metrics: metrics.NewPoller(rt.Registry),
	})
	if !cfg.Discovers() {
		log.Warn(NoReposWarning)
	}
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	if cfg.WebhookSecret != "" {
		rt.Handle("POST /webhook", WebhookHandler([]byte(cfg.WebhookSecret.Reveal()), s, rt.Log.With("component", "webhook")))
	}
	return s, nil
}

// NoReposWarning is logged at start when PRLOOP_REPOS names no
// repository: a legitimate setup (an orchestrator asks for each PR), and a
// silent one for whoever forgot to set it.
const NoReposWarning = "PRLOOP_REPOS is empty: prloop discovers no PRs and watches only those named by 'prloop watch', 'prloop open' or a PRWatchRequested event " +
	"(a webhook only hurries a PR already watched); set PRLOOP_REPOS=owner/repo,… to watch every open PR of those repositories"

// StatusWriter is the poller's commit status writer (nil when
// PRLOOP_POST_STATUS is off).
func (s *Service) StatusWriter() *StatusWriter { return s.d.Status }

// StreamReader is the part of jetstream.JetStream that MergedByPrloop reads.
type StreamReader interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// MergedByPrloop checks the event stream for a PRMerged event about the PR.
func MergedByPrloop(js StreamReader) MergedChecker {
	return func(ctx context.Context, pr ghref.PR) (bool, error) {
		st, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return false, fmt.Errorf("open stream %s: %w", events.StreamName, err)
		}
		_, err = st.GetLastMsgForSubject(ctx, events.Subject(pr, events.TypeMerged))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		return err == nil, err
	}
}

var _ app.Service = (*Service)(nil)

// leaseTTL is how long a repository lease lives unless renewed: one poll
// interval (at least 2 s, well above clock skew between hosts, which lease
// expiry depends on), so a dead replica's repositories are taken over
// within about 1.25 intervals and probed at once.
func leaseTTL(interval time.Duration) time.Duration { return max(interval, 2*time.Second) }

// KickSubject carries kicks between poller replicas (core NATS: a lost kick
// is made up by the next probe).
const KickSubject = "prloop.poller.kick"

type natsKicks struct{ nc *nats.Conn }

var _ KickBus = natsKicks{}

func (k natsKicks) Publish(pr ghref.PR) error { return k.nc.Publish(KickSubject, []byte(pr.String())) }

func (k natsKicks) Subscribe(ctx context.Context, kick func(ghref.PR)) error {
	sub, err := k.nc.Subscribe(KickSubject, func(m *nats.Msg) {
		if pr, err := ghref.ParsePR(string(m.Data)); err == nil {
			kick(pr)
		}
	})
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = sub.Unsubscribe() }()
	return nil
}

// KeyWatcher is the part of jetstream.KeyValue WatchNewPRs uses.
type KeyWatcher interface {
	WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
}

// WatchNewPRs reports PRs whose state appears in the bucket after the
// watch starts: how a replica learns of PRs another replica was asked to
// watch.
func WatchNewPRs(kv KeyWatcher) func(ctx context.Context, found func(ghref.PR)) error {
	return func(ctx context.Context, found func(ghref.PR)) error {
		w, err := kv.WatchAll(ctx, jetstream.MetaOnly(), jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
		if err != nil {
			return fmt.Errorf("watch kv bucket %s: %w", state.Bucket, err)
		}
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case e, ok := <-w.Updates():
				if !ok {
					return errors.New("state watch closed")
				}
				if e == nil {
					continue
				}
				if pr, err := state.ParseKey(e.Key()); err == nil {
					found(pr)
				}
			}
		}
	}
}
