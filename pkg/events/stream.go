package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names. StreamName captures every event (pr.>); DLQStreamName keeps
// poison messages (prloop.dlq.>) so they can be inspected and replayed.
const (
	StreamName    = "PRLOOP"
	DLQStreamName = "PRLOOP_DLQ"
)

// StreamOptions tune the streams; the zero value gives the defaults.
type StreamOptions struct {
	// Replicas is the stream replication factor: 1 for a single server, 3 on a
	// three-node cluster.
	Replicas int
	// MaxAge bounds how long events are kept. Default 30 days.
	MaxAge time.Duration
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Ids to drop
	// retried publishes. Default 2 hours: long enough to cover a service that
	// crashed between publishing and recording that it published.
	DuplicateWindow time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 30 * 24 * time.Hour
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 2 * time.Hour
	}
	return o
}

// StreamManager is the part of jetstream.JetStream that EnsureStreams needs.
type StreamManager interface {
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

var _ StreamManager = (jetstream.JetStream)(nil)

// EnsureStreams creates or updates the event stream and the dead-letter
// stream. Every service calls it at start, so whichever starts first creates
// them; calling it again is harmless.
func EnsureStreams(ctx context.Context, js StreamManager, opts StreamOptions) error {
	o := opts.withDefaults()
	cfgs := []jetstream.StreamConfig{
		{
			Name:        StreamName,
			Description: "prloop PR lifecycle CloudEvents",
			Subjects:    []string{SubjectPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      o.MaxAge,
			Duplicates:  o.DuplicateWindow,
			Replicas:    o.Replicas,
		},
		{
			Name:        DLQStreamName,
			Description: "prloop messages a consumer gave up on, with the reason in headers",
			Subjects:    []string{DLQPrefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.MaxAge,
			Duplicates:  o.DuplicateWindow,
			Replicas:    o.Replicas,
		},
	}
	for _, cfg := range cfgs {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
