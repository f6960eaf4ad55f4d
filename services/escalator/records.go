package escalator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Record is the escalator's own record of one PR, in ClaimBucket under
// RecordKey. No other service reads or writes it: the escalator learns
// what it needs about a PR from events.
type Record struct {
	// Resolved is the latest escalation epoch a human started by removing
	// the label (PREscalationResolved): requests of older epochs are old
	// news.
	Resolved int `json:"resolved,omitempty"`
	// Done holds the escalation done for each reason: a request of that
	// epoch (or an older one) is not done again.
	Done map[events.Reason]Done `json:"done,omitempty"`
}

// Done is one escalation the escalator finished.
type Done struct {
	Epoch int       `json:"epoch"`
	At    time.Time `json:"at"`
}

// RecordKey is the key of the escalator's record of pr in ClaimBucket.
// Claims are <PRKey>.<reason>; the "escalations." prefix keeps records
// apart from them.
func RecordKey(pr ghref.PR) string { return "escalations." + events.PRKey(pr) }

// claimKey is the claim's key: the PR's key and the reason.
func claimKey(r Request) string {
	return events.PRKey(r.PR) + "." + events.EncodeToken(string(r.Reason))
}

// skip says why r needs nothing done, or "" when it must be escalated.
func (rec Record) skip(r Request) string {
	if r.Epoch < rec.Resolved {
		return fmt.Sprintf("old news: the request belongs to escalation epoch %d, and a human resolved the escalation since (epoch %d)", r.Epoch, rec.Resolved)
	}
	if d, ok := rec.Done[r.Reason]; ok && d.Epoch >= r.Epoch {
		return fmt.Sprintf("already escalated in epoch %d", d.Epoch)
	}
	return ""
}

// recordAttempts bounds the compare-and-set retries on one PR's record:
// only the escalator's own replicas write it, one event at a time each.
const recordAttempts = 10

// record reads the escalator's record of pr; none is an empty record.
func (s *Service) record(ctx context.Context, pr ghref.PR) (Record, error) {
	e, err := s.d.Claims.Get(ctx, RecordKey(pr))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, nil
	}
	if err != nil {
		return Record{}, fmt.Errorf("read escalation record of %s: %w", pr, err)
	}
	return decodeRecord(pr, e.Value())
}

func decodeRecord(pr ghref.PR, body []byte) (Record, error) {
	var rec Record
	if len(body) == 0 {
		return rec, nil
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return Record{}, fmt.Errorf("decode escalation record of %s: %w", pr, err)
	}
	return rec, nil
}

// changeRecord applies fn to pr's record with compare-and-set; fn returns
// false to leave it as it is.
func (s *Service) changeRecord(ctx context.Context, pr ghref.PR, fn func(*Record) bool) error {
	_, err := kvlease.Update(ctx, s.d.Claims, RecordKey(pr), recordAttempts, func(cur []byte, _ uint64) ([]byte, error) {
		rec, err := decodeRecord(pr, cur)
		if err != nil {
			return nil, err
		}
		if !fn(&rec) {
			return nil, kvlease.ErrUnchanged
		}
		body, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("encode escalation record of %s: %w", pr, err)
		}
		return body, nil
	})
	if err != nil && !errors.Is(err, kvlease.ErrUnchanged) {
		return fmt.Errorf("record escalation of %s: %w", pr, err)
	}
	return nil
}

// recordDone records r as done, unless a human resolved its epoch
// meanwhile: the label is gone already, and the next escalation of the
// reason is news.
func (s *Service) recordDone(ctx context.Context, r Request, at time.Time) error {
	return s.changeRecord(ctx, r.PR, func(rec *Record) bool {
		if rec.skip(r) != "" {
			return false
		}
		if rec.Done == nil {
			rec.Done = map[events.Reason]Done{}
		}
		rec.Done[r.Reason] = Done{Epoch: r.Epoch, At: at}
		return true
	})
}

// resolved records that a human resolved the PR's escalation, starting
// epoch.
func (s *Service) resolved(ctx context.Context, pr ghref.PR, epoch int) error {
	return s.changeRecord(ctx, pr, func(rec *Record) bool {
		if epoch <= rec.Resolved {
			return false
		}
		rec.Resolved = epoch
		return true
	})
}

// forget deletes the escalator's record of a closed or merged PR, so that
// the bucket holds records of open PRs only.
func (s *Service) forget(ctx context.Context, pr ghref.PR) error {
	// Most closed PRs were never escalated: a read spares them the delete
	// marker a blind delete would write.
	if _, err := s.d.Claims.Get(ctx, RecordKey(pr)); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	err := s.d.Claims.Delete(ctx, RecordKey(pr))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget escalation record of %s: %w", pr, err)
	}
	return nil
}
