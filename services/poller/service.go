package poller

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// FromRuntime builds the poller for a process: the GitHub client from cfg,
// prloop's own login, the state store and the webhook route.
func FromRuntime(ctx context.Context, rt *app.Runtime, cfg Config) (*Service, error) {
	client, err := github.New(ctx, cfg.Config, github.Options{Logger: rt.Log})
	if err != nil {
		return nil, err
	}
	self := cfg.GitHubLogin
	if self == "" {
		if self, err = client.CurrentUser(ctx); err != nil {
			rt.Log.Warn("cannot tell prloop's own login; set PRLOOP_GITHUB_LOGIN so its own comments never count as reviews", "err", err)
		}
	}
	js := rt.JS
	s := New(cfg, Deps{
		GitHub: client, Store: rt.Store, JS: js, Log: rt.Log.With("component", Name), Self: self,
		Merged: MergedByPrloop(js),
	})
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	if cfg.WebhookSecret != "" {
		rt.Handle("POST /webhook", WebhookHandler([]byte(cfg.WebhookSecret.Reveal()), s, rt.Log.With("component", "webhook")))
	}
	return s, nil
}

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
