package merger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Freeze (docs/queue.md, Freeze).
//
// An operator freezes a base's merge queue (`prloop queue freeze`, the
// command PRQueueFreezeRequested); the merger, the one writer of freezes,
// records it in its bucket (so it outlives restarts) and says so with
// PRQueueFrozen. While frozen nothing merges on that base: every merge
// path consults frozen, the pure check, right before it would merge
// (Step, land, and the executor again right before the merge call).
// Approvals still queue, branches are still brought up to date, and
// candidates are still built and tested, so that the queue is ready to
// merge the moment it is unfrozen (`prloop queue unfreeze`, or Until
// passing: thaw).

// Freeze is one freeze record: the merge queue of Base in Repo (AllBases:
// every base) holds its merges.
type Freeze struct {
	Repo ghref.Repo `json:"repo"`
	// Base is the base branch, events.AllBases for every base.
	Base   string `json:"base,omitempty"`
	Reason string `json:"reason"`
	// Until, when set, is when the freeze ends by itself.
	Until time.Time `json:"until,omitzero"`
	Since time.Time `json:"since"`
	Actor string    `json:"actor,omitempty"`
	// Request is the id of the PRQueueFreezeRequested that made it: part
	// of the ids of the events about it.
	Request string `json:"request"`
}

// freezeKey names a freeze in the bucket:
// freeze.<owner>.<repo>.<base token> (events.BaseToken).
func freezeKey(repo ghref.Repo, base string) string {
	return "freeze." + repoID(repo) + "." + events.BaseToken(strings.ToLower(base))
}

// frozen returns the freeze that holds merges on base at now among a
// repository's freezes fs: one of that base (case-folded, as queues are)
// or of every base, whose Until has not passed. It is pure, and the one
// freeze rule: every merge path asks it right before it merges.
func frozen(fs []Freeze, base string, now time.Time) (Freeze, bool) {
	for _, f := range fs {
		if f.Base != events.AllBases && !strings.EqualFold(f.Base, base) {
			continue
		}
		if !f.Until.IsZero() && !now.Before(f.Until) {
			continue
		}
		return f, true
	}
	return Freeze{}, false
}

// expired returns the freezes of fs whose Until passed at now. It is pure.
func expired(fs []Freeze, now time.Time) []Freeze {
	var out []Freeze
	for _, f := range fs {
		if !f.Until.IsZero() && !now.Before(f.Until) {
			out = append(out, f)
		}
	}
	return out
}

// hold is the transition of an entry whose merge a freeze f holds: it
// waits, and looks again after the poll interval. It is pure.
func hold(e Entry, f Freeze) Transition {
	e.Failures = 0 // the pass went through: earlier errors are not in a row
	return Transition{Next: e, Wait: true, Why: "queue frozen: " + f.Reason}
}

// storedFreeze is a freeze with its key and revision.
type storedFreeze struct {
	Freeze
	key string
	rev uint64
}

// freezes reads the freezes of repo (nil repo: of every repository).
func (q queue) freezes(ctx context.Context, repo *ghref.Repo) ([]storedFreeze, error) {
	filter := "freeze.>"
	if repo != nil {
		filter = "freeze." + repoID(*repo) + ".*"
	}
	keys, err := q.keys(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []storedFreeze
	for _, k := range keys {
		e, err := q.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read freeze %s: %w", k, err)
		}
		var f Freeze
		if err := json.Unmarshal(e.Value(), &f); err != nil {
			return nil, fmt.Errorf("decode freeze %s: %w", k, err)
		}
		out = append(out, storedFreeze{Freeze: f, key: k, rev: e.Revision()})
	}
	return out, nil
}

// freezesOf reads repo's freezes for a merge decision.
func (s *Service) freezesOf(ctx context.Context, repo ghref.Repo) ([]Freeze, error) {
	sf, err := s.q.freezes(ctx, &repo)
	if err != nil {
		return nil, err
	}
	out := make([]Freeze, len(sf))
	for i, f := range sf {
		out[i] = f.Freeze
	}
	return out, nil
}

// handleFreeze carries out an operator's PRQueueFreezeRequested: the
// freeze is recorded (or removed) first, then announced, with ids that
// make a redelivery's announcement a duplicate.
func (s *Service) handleFreeze(ctx context.Context, m *events.Msg, d *events.QueueFreezeRequested) error {
	repo := d.PR.RepoRef()
	base := strings.TrimSpace(d.BaseBranch)
	key := freezeKey(repo, base)
	log := s.log.With("repo", repo.String(), "base", base, "actor", d.Actor)
	if d.Unfreeze {
		e, err := s.d.Queue.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			log.Info("unfreeze asked of a queue that is not frozen")
			return nil
		}
		if err != nil {
			return fmt.Errorf("read freeze of %s %s: %w", repo, base, err)
		}
		var f Freeze
		if err := json.Unmarshal(e.Value(), &f); err != nil {
			return fmt.Errorf("decode freeze of %s %s: %w", repo, base, err)
		}
		return s.unfreeze(ctx, storedFreeze{Freeze: f, key: key, rev: e.Revision()}, m.Event.ID(), "lifted by "+nonEmpty(d.Actor, "an operator"), d.Actor)
	}
	if strings.TrimSpace(d.Reason) == "" {
		return events.Permanent(fmt.Errorf("freeze %s %s: a reason is required", repo, base))
	}
	f := Freeze{
		Repo: repo, Base: base, Reason: events.CleanTitle(d.Reason), Until: d.Until.UTC(), Since: s.d.Now().UTC(),
		Actor: d.Actor, Request: m.Event.ID(),
	}
	var cur Freeze
	_, err := kvlease.Update(ctx, s.d.Queue, key, 10, func(body []byte, rev uint64) ([]byte, error) {
		if rev != 0 && json.Unmarshal(body, &cur) == nil && cur.Request == f.Request {
			f = cur // a redelivery: the record stands
			return nil, kvlease.ErrUnchanged
		}
		return json.Marshal(f)
	})
	if err != nil && !errors.Is(err, kvlease.ErrUnchanged) {
		return fmt.Errorf("record freeze of %s %s: %w", repo, base, err)
	}
	if _, _, err := s.emit.Emit(ctx, &events.QueueFrozen{
		Base: events.Base{PR: repo.PR(events.RepoNumber)}, BaseBranch: base, Reason: f.Reason, Until: f.Until, Actor: f.Actor,
	}, events.BaseToken(base), f.Request); err != nil {
		return err
	}
	log.Warn("merge queue frozen: nothing merges on it until it is unfrozen", "reason", f.Reason, "until", f.Until)
	s.Kick()
	return nil
}

// unfreeze says PRQueueUnfrozen, whose id carries what made the freeze
// and what ended it, and then removes the freeze: a retry after a failed
// removal finds the record and says the same (a duplicate JetStream
// drops), while a removal first and a lost announcement would leave every
// view showing the queue frozen. Until the removal the freeze still holds
// merges, a moment longer, which is the safe side.
func (s *Service) unfreeze(ctx context.Context, f storedFreeze, by, detail, actor string) error {
	if _, _, err := s.emit.Emit(ctx, &events.QueueUnfrozen{
		Base: events.Base{PR: f.Repo.PR(events.RepoNumber)}, BaseBranch: f.Base, Detail: detail, Actor: actor,
	}, events.BaseToken(f.Base), f.Request, by); err != nil {
		return err
	}
	err := s.d.Queue.Delete(ctx, f.key, jetstream.LastRevision(f.rev))
	if kvlease.IsConflict(err) {
		return fmt.Errorf("unfreeze %s %s: the freeze changed meanwhile: %w", f.Repo, f.Base, err)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("unfreeze %s %s: %w", f.Repo, f.Base, err)
	}
	s.log.Info("merge queue unfrozen", "repo", f.Repo.String(), "base", f.Base, "detail", detail)
	s.Kick()
	return nil
}

// thaw lifts the freezes whose Until passed. Any replica may: the
// removal is by revision, and the announcement's id is the same.
func (s *Service) thaw(ctx context.Context) error {
	all, err := s.q.freezes(ctx, nil)
	if err != nil {
		return err
	}
	plain := make([]Freeze, len(all))
	for i, f := range all {
		plain[i] = f.Freeze
	}
	due := expired(plain, s.d.Now())
	for _, f := range all {
		for _, d := range due {
			if d.Request == f.Request && d.Repo == f.Repo && d.Base == f.Base {
				if err := s.unfreeze(ctx, f, "expired", "its time ("+f.Until.UTC().Format(time.RFC3339)+") passed", ""); err != nil {
					s.log.Warn("cannot lift an expired freeze yet", "repo", f.Repo.String(), "base", f.Base, "err", err)
				}
			}
		}
	}
	return nil
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
