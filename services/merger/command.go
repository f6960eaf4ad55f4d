package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Hold is the merger's record of a PR someone took out of the merge queue
// with "/prloop dequeue" or "/prloop stop" (docs/commands.md), under
// holdKey: while Held, no approval of the PR is queued. "/prloop queue"
// writes Held false. The latest command by comment id wins, so a
// redelivered older command never undoes a newer one.
type Hold struct {
	Held      bool      `json:"held"`
	CommentID int64     `json:"comment_id"`
	Command   string    `json:"command"`
	Author    string    `json:"author"`
	At        time.Time `json:"at"`
}

// holdKey is the key of pr's Hold in the queue bucket.
func holdKey(pr ghref.PR) string {
	return "hold." + repoID(pr.RepoRef()) + "." + strconv.Itoa(pr.Number)
}

// noChange says a hold is already as newer commands left it.
var noChange = errors.New("hold unchanged")

// planHold is the Hold a command leaves, from the one stored (nil: none);
// ok is false when the stored one is as new or newer. It is pure.
func planHold(cur *Hold, d *events.CommandReceived, now time.Time) (Hold, bool) {
	if cur != nil && cur.CommentID >= d.CommentID {
		return Hold{}, false
	}
	return Hold{Held: d.Command != events.CommandQueue, CommentID: d.CommentID, Command: d.Command, Author: d.Author, At: now.UTC()}, true
}

// command carries out the merger's part of a "/prloop" command: dequeue
// and stop take the PR out of its queue and keep it out, queue lets it in
// again. Re-entering needs a standing approval: the poller announces the
// approval anew when it takes "/prloop queue", and Enqueue verifies it on
// GitHub as it verifies every approval (the event is a trigger, never an
// authority).
func (s *Service) command(ctx context.Context, d *events.CommandReceived) error {
	switch d.Command {
	case events.CommandDequeue, events.CommandStop, events.CommandQueue:
	default:
		return nil
	}
	log := s.log.With("pr", d.PR.String(), "comment", d.CommentID, "command", d.Command)
	var hold Hold
	_, err := kvlease.Update(ctx, s.d.Queue, holdKey(d.PR), 10, func(cur []byte, _ uint64) ([]byte, error) {
		var old *Hold
		if cur != nil {
			old = &Hold{}
			if err := json.Unmarshal(cur, old); err != nil {
				return nil, fmt.Errorf("decode the hold of %s: %w", d.PR, err)
			}
		}
		next, ok := planHold(old, d, s.d.Now())
		if !ok {
			return nil, noChange
		}
		hold = next
		return json.Marshal(next)
	})
	if errors.Is(err, noChange) {
		log.Info("an older command than the one already recorded; nothing to do")
		return nil
	}
	if err != nil {
		return fmt.Errorf("record /prloop %s on %s: %w", d.Command, d.PR, err)
	}
	if !hold.Held {
		log.Info("the PR may enter its merge queue again once its approval is verified")
		s.Kick()
		return nil
	}
	return s.dequeue(ctx, d, log)
}

// dequeue takes a held PR's entries out of its queues with
// PRMergeFailed (reason dequeued), first the event (its id is the
// comment's, so a retry publishes nothing new) and then the entries. An
// entry in the middle of a step that changes GitHub (an Intent) is left to
// finish it: its pass finds out what happened and the hold keeps the PR
// from being queued again.
func (s *Service) dequeue(ctx context.Context, d *events.CommandReceived, log *slog.Logger) error {
	keys, err := s.q.keys(ctx, "q."+repoID(d.PR.RepoRef())+".*."+strconv.Itoa(d.PR.Number))
	if err != nil {
		return err
	}
	var entries []stored
	for _, k := range keys {
		st, err := s.q.get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		entries = append(entries, st)
	}
	if len(entries) == 0 {
		log.Info("not queued; the hold keeps the PR out of its queue")
		return nil
	}
	for _, st := range entries {
		if _, _, err := s.emit.Emit(ctx, &events.MergeFailed{
			Base:   events.Base{PR: d.PR, HeadSHA: st.Head},
			Reason: events.ReasonDequeued, Detail: fmt.Sprintf("/prloop %s by %s", d.Command, d.Author), DryRun: s.cfg.DryRun,
		}, string(events.ReasonDequeued), strconv.FormatInt(d.CommentID, 10), st.Base); err != nil {
			return err
		}
		if st.Intent != nil {
			log.Info("the entry is in the middle of a step; it finishes it, and is not queued again", "base", st.Base)
			continue
		}
		if err := s.q.remove(ctx, st); err != nil {
			return err
		}
		log.Info("taken out of the merge queue", "base", st.Base)
	}
	s.Kick()
	return nil
}

// held reports whether pr is held out of its queue by a command.
func (s *Service) held(ctx context.Context, pr ghref.PR) (Hold, error) {
	e, err := s.d.Queue.Get(ctx, holdKey(pr))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Hold{}, nil
	}
	if err != nil {
		return Hold{}, fmt.Errorf("read the hold of %s: %w", pr, err)
	}
	var h Hold
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return Hold{}, fmt.Errorf("decode the hold of %s: %w", pr, err)
	}
	return h, nil
}
