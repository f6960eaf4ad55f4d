// Package poller is prloop's poller service: it watches pull requests and turns review signals into status transitions.
//
// This is the service's skeleton: it connects, ensures its durable consumer
// and acknowledges what it receives. Its real work lands in a later change.
package poller

import (
	"context"
	"log/slog"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/events"
)

// Name is the service's name: its durable consumer, its event source
// (/prloop/poller) and its log attribute.
const Name = "poller"

// Config is the poller service's configuration, read from PRLOOP_* variables.
type Config struct {
	config.Common
}

// Validate checks the configuration.
func (c Config) Validate() error { return c.Common.Validate() }

// Types are the event types the service consumes.
var Types = []events.Type{events.TypeWatchRequested, events.TypeFeedbackAddressed, events.TypeEscalated, events.TypeMerged}

// Service is the poller service.
type Service struct {
	js  events.JetStreamConsumer
	log *slog.Logger
}

// New builds the service from the runtime.
func New(rt *app.Runtime, _ Config) *Service {
	rt.AddReadyCheck("consumer "+Name, rt.ConsumerReady(Name))
	return &Service{js: rt.JS, log: rt.Log.With("component", Name)}
}

// Run consumes events until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	return events.Consume(ctx, s.js, events.ConsumerConfig{Durable: Name, Types: Types, Logger: s.log}, s.handle)
}

func (s *Service) handle(_ context.Context, m *events.Msg) error {
	s.log.Info("event received", "pr", m.Data.Ref().String(), "type", m.Event.Type(), "id", m.Event.ID())
	return nil
}
