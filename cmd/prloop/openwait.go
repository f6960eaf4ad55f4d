package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/services/feedback"
)

// openPoll is how often prloop open looks for its request's dead letter.
const openPoll = 200 * time.Millisecond

// openOutcome is what became of a request to open a PR: the PRCreated that
// announces its PR, or the reason the feedback service dead-lettered it.
type openOutcome struct {
	created *events.Created
	refusal string
}

// awaitOpen waits until the feedback service answers the request req
// (published as the event id): PRCreated for its branch and head, or the
// request's dead letter. ctx bounds the wait.
func awaitOpen(ctx context.Context, js jetstream.JetStream, req *events.CreateRequested, id string) (openOutcome, error) {
	repo := req.PR.RepoRef()
	filter := events.SubjectPrefix + "." + events.EncodeToken(repo.Owner) + "." + events.EncodeToken(repo.Name) + ".*." + string(events.TypeCreated)
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return openOutcome{}, fmt.Errorf("follow the PRCreated events of %s: %w", repo, err)
	}
	dlq, err := js.Stream(ctx, events.DLQStreamName)
	if err != nil {
		return openOutcome{}, fmt.Errorf("open stream %s: %w", events.DLQStreamName, err)
	}
	var next uint64 = 1 // the next dead letter to read
	for {
		fctx, cancel := context.WithTimeout(ctx, openPoll)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err == nil {
			if _, d, err := events.Decode(msg.Data()); err == nil {
				if c, ok := d.(*events.Created); ok && answers(c, req) {
					return openOutcome{created: c}, nil
				}
			}
			continue // the next PRCreated at once
		}
		if ctx.Err() != nil {
			return openOutcome{}, ctx.Err()
		}
		reason, found, err := refusalOf(ctx, dlq, id, &next)
		if err != nil {
			return openOutcome{}, err
		}
		if found {
			return openOutcome{refusal: reason}, nil
		}
	}
}

// answers reports whether c announces the PR req asked for: the same
// branch at the same head.
func answers(c *events.Created, req *events.CreateRequested) bool {
	return c.Branch == req.Branch && c.HeadSHA == req.HeadSHA
}

// refusalOf reads the feedback service's dead letters from *next on and
// returns the reason of the one holding the event id, advancing *next.
func refusalOf(ctx context.Context, s jetstream.Stream, id string, next *uint64) (string, bool, error) {
	for {
		m, err := s.GetMsg(ctx, *next, jetstream.WithGetMsgSubject(events.DLQSubject(feedback.Name)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", false, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return "", false, ctx.Err()
			}
			return "", false, fmt.Errorf("read the dead letters of %s: %w", feedback.Name, err)
		}
		*next = m.Sequence + 1
		if e, _, err := events.Decode(m.Data); err == nil && e.ID() == id {
			return m.Header.Get(events.HeaderDLQReason), true, nil
		}
	}
}
