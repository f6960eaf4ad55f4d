package merger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
	"github.com/prloop/prloop/pkg/metrics"
)

// Bucket is the KV bucket holding the merge queues and their locks.
//
// Keys, with tokens encoded as in event subjects (events.EncodeToken):
//
//	pending.<owner>.<repo>.<seq>       an approval not yet queued (a Pending)
//	q.<owner>.<repo>.<base>.<number>   a queued PR (an Entry), ordered by Entry.Seq
//	lock.<owner>.<repo>.<base>         the base's merge lock (a kvlease.Record)
//	batch.<owner>.<repo>.<base>        the speculative queue's candidates (a Batch)
//	ci.<owner>.<repo>.<base>           the base's measured CI times (CITimes, eta.go)
//
// Base names are case-folded in keys, so bases that differ only in case
// share a queue: that serialises a little more than needed, never less.
const Bucket = "PRLOOP_MERGE_QUEUE"

// Entry is one approved PR waiting in (or at the front of) its base's queue.
type Entry struct {
	PR   ghref.PR `json:"pr"`
	Base string   `json:"base"`
	// Seq is the approval's stream sequence: the queue's order among
	// equals (queueOrder).
	Seq uint64 `json:"seq"`
	// Priority says the PR carried the priority label when the merger last
	// read it: it goes ahead of every PR without it (priority.go);
	// Reprioritised counts the changes announced since it was queued.
	Priority      bool `json:"priority,omitempty"`
	Reprioritised int  `json:"reprioritised,omitempty"`
	// ApprovedHead is the head the approval was given on; Head is the head
	// it applies to now: ApprovedHead, or the head prloop made from it by
	// updating the branch.
	ApprovedHead string    `json:"approved_head"`
	Head         string    `json:"head"`
	Approvers    []string  `json:"approvers,omitempty"`
	QueuedAt     time.Time `json:"queued_at"`
	// SeenChecks names every check that reported on a head of the PR the
	// merger looked at: each must report on later heads too before a merge.
	SeenChecks []string `json:"seen_checks,omitempty"`
	// Anchor is when ApprovedHead became the head, as the approval said:
	// reactions and comments older than it do not count. Zero when
	// unknown, and then none counts (native reviews still do).
	Anchor time.Time `json:"anchor,omitzero"`
	// BaseSince is when the poller saw the PR retargeted to Base, as the
	// approval said (zero: never): approvals older than it do not count.
	// Base itself is the base the approval is for (CheckApproval).
	BaseSince time.Time `json:"base_since,omitzero"`
	// Epoch is the PR's escalation epoch the approval belongs to: the
	// merger's escalation requests carry it, so that the escalator can
	// tell a request a human already answered.
	Epoch int `json:"epoch,omitempty"`
	// FixCycle is the fixes prloop pushed to the PR before the approval,
	// as the poller counted them: a conflict resolution is the next one.
	FixCycle int `json:"fix_cycle,omitempty"`

	// Intent is the step that changes GitHub (a branch update, a merge)
	// the entry started and has not seen through, written before the
	// step, so that a replica taking over after a crash knows what may
	// have happened (Step's recovery cases).
	Intent *Intent `json:"intent,omitempty"`
	// Outbox holds the events Step decided, stored with the entry and
	// published after it is stored; Leaving, when set, says the entry
	// leaves its queue (a metrics result) once they are out. A crash in
	// between leaves them here, and the next pass publishes them first.
	Outbox  []cloudevents.Event `json:"outbox,omitempty"`
	Leaving string              `json:"leaving,omitempty"`

	// The fields below record what was said and how the entry fares.

	// UpdateAnnounced is the head prloop made whose PRBranchUpdated was
	// published: Head is saved first, so a publish lost to a crash or an
	// error is made on the next pass (see announceUpdate).
	UpdateAnnounced string `json:"update_announced,omitempty"`
	// WaitingFor are the checks PRMergeWaiting last said WaitingHead waits
	// for; Announced counts those events (part of their ids).
	WaitingHead string   `json:"waiting_head,omitempty"`
	WaitingFor  []string `json:"waiting_for,omitempty"`
	Announced   int      `json:"announced,omitempty"`
	// WaitingSince is when the merger began waiting on Head.
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	// Refusals counts refused merges and branch updates (405, 409, 422).
	Refusals int `json:"refusals,omitempty"`
	// Failures counts transient errors; NotBefore delays the next attempt.
	Failures  int       `json:"failures,omitempty"`
	NotBefore time.Time `json:"not_before,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// Pending is an approval the consumer recorded and the worker has not yet
// queued: queuing reads GitHub, which may fail for one repository while
// the others are fine, so it happens outside the consumer (see Service).
type Pending struct {
	Approval
	// Failures counts failed attempts to queue it; NotBefore delays the
	// next one.
	Failures  int       `json:"failures,omitempty"`
	NotBefore time.Time `json:"not_before,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// storedPending is a Pending with its key and KV revision.
type storedPending struct {
	Pending
	key string
	rev uint64
}

// QueueKV is the part of jetstream.KeyValue the queue uses.
type QueueKV interface {
	kvlease.KV
	ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error)
	WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
}

var _ QueueKV = (jetstream.KeyValue)(nil)

// EnsureQueue creates or updates the queue bucket.
func EnsureQueue(ctx context.Context, js kvlease.BucketManager, replicas int) (jetstream.KeyValue, error) {
	return kvlease.EnsureBucket(ctx, js, Bucket, "prloop merge queues (one per repository and base branch) and their locks", replicas)
}

// queueID names one repository's base branch in keys: <owner>.<repo>.<base>.
func queueID(repo ghref.Repo, base string) string {
	return events.EncodeToken(repo.Owner) + "." + events.EncodeToken(repo.Name) + "." + events.EncodeToken(base)
}

func entryKey(pr ghref.PR, base string) string {
	return "q." + queueID(pr.RepoRef(), base) + "." + strconv.Itoa(pr.Number)
}

func lockKey(qid string) string { return "lock." + qid }

// repoID names a repository in keys: <owner>.<repo>.
func repoID(repo ghref.Repo) string {
	return events.EncodeToken(repo.Owner) + "." + events.EncodeToken(repo.Name)
}

func pendingKey(a Approval) string {
	return "pending." + repoID(a.PR.RepoRef()) + "." + strconv.FormatUint(a.Seq, 10)
}

// record stores an approval as pending. A redelivered approval finds its
// record there and leaves it (with its failures) as it is.
func (q queue) record(ctx context.Context, a Approval) error {
	body, err := json.Marshal(Pending{Approval: a})
	if err != nil {
		return fmt.Errorf("encode pending approval of %s: %w", a.PR, err)
	}
	if _, err := q.kv.Create(ctx, pendingKey(a), body); err != nil && !kvlease.IsConflict(err) {
		return fmt.Errorf("record approval of %s: %w", a.PR, err)
	}
	return nil
}

// pending returns the pending approvals by repository id, each repository's
// first come first.
func (q queue) pending(ctx context.Context) (map[string][]storedPending, error) {
	keys, err := q.keys(ctx, "pending.>")
	if err != nil {
		return nil, err
	}
	out := map[string][]storedPending{}
	for _, k := range keys {
		e, err := q.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // queued meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read pending approval %s: %w", k, err)
		}
		var p Pending
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("decode pending approval %s: %w", k, err)
		}
		id := repoID(p.PR.RepoRef())
		out[id] = append(out[id], storedPending{Pending: p, key: k, rev: e.Revision()})
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b storedPending) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out, nil
}

// settle removes a pending approval once it is queued (or found not to
// need queuing); a record another replica settled meanwhile is fine.
func (q queue) settle(ctx context.Context, p storedPending) error {
	err := q.kv.Delete(ctx, p.key, jetstream.LastRevision(p.rev))
	if err != nil && !kvlease.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("settle pending approval of %s: %w", p.PR, err)
	}
	return nil
}

// postpone records a failed attempt to queue p.
func (q queue) postpone(ctx context.Context, p storedPending) error {
	body, err := json.Marshal(p.Pending)
	if err != nil {
		return fmt.Errorf("encode pending approval of %s: %w", p.PR, err)
	}
	if _, err := q.kv.Update(ctx, p.key, body, p.rev); err != nil && !kvlease.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("postpone pending approval of %s: %w", p.PR, err)
	}
	return nil
}

// queueOfKey returns the queue id of an entry key.
func queueOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "q.")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", false
	}
	return rest[:i], true
}

// stored is an entry with its key and KV revision, for compare-and-set.
type stored struct {
	Entry
	key string
	rev uint64
}

// queue is the merge queues in the KV bucket.
type queue struct {
	kv QueueKV
}

var errReplaced = errors.New("queue entry changed meanwhile")

func (q queue) get(ctx context.Context, key string) (stored, error) {
	e, err := q.kv.Get(ctx, key)
	if err != nil {
		return stored{}, err
	}
	var en Entry
	if err := json.Unmarshal(e.Value(), &en); err != nil {
		return stored{}, fmt.Errorf("decode queue entry %s: %w", key, err)
	}
	if en.Intent == nil {
		en.Intent = legacyIntent(e.Value())
	}
	return stored{Entry: en, key: key, rev: e.Revision()}, nil
}

// list returns the entries of one queue in order (queueOrder: those
// riding in candidates or with a step under way, then priority, then
// first come first).
func (q queue) list(ctx context.Context, qid string) ([]stored, error) {
	keys, err := q.keys(ctx, "q."+qid+".*")
	if err != nil {
		return nil, err
	}
	var out []stored
	for _, k := range keys {
		s, err := q.get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // merged or dropped meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list queue %s: %w", qid, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := q.batch(ctx, qid)
	if err != nil {
		return nil, err
	}
	return queueOrder(out, pinnedOf(out, b)), nil
}

// batch reads the queue's candidates (empty when there are none, or when
// the record cannot be read: the speculative pass rebuilds it then).
func (q queue) batch(ctx context.Context, qid string) (Batch, error) {
	e, err := q.kv.Get(ctx, batchKey(qid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Batch{}, nil
	}
	if err != nil {
		return Batch{}, fmt.Errorf("read the candidates of %s: %w", qid, err)
	}
	var b Batch
	if json.Unmarshal(e.Value(), &b) != nil {
		return Batch{}, nil
	}
	return b, nil
}

// queues returns the ids of the queues that hold entries, and how many
// each holds.
func (q queue) queues(ctx context.Context) ([]string, map[string]int, error) {
	keys, err := q.keys(ctx, "q.>")
	if err != nil {
		return nil, nil, err
	}
	var out []string
	depth := map[string]int{}
	for _, k := range keys {
		id, ok := queueOfKey(k)
		if !ok {
			continue
		}
		if depth[id] == 0 {
			out = append(out, id)
		}
		depth[id]++
	}
	return out, depth, nil
}

// queueName turns a queue id back into the repository ("owner/name") and
// base branch it names, case-folded as in keys.
func queueName(qid string) (metrics.Queue, bool) {
	parts := strings.Split(qid, ".")
	if len(parts) != 3 {
		return metrics.Queue{}, false
	}
	var names [3]string
	for i, p := range parts {
		n, err := events.DecodeToken(p)
		if err != nil {
			return metrics.Queue{}, false
		}
		names[i] = n
	}
	return metrics.Queue{Repo: names[0] + "/" + names[1], Base: names[2]}, true
}

func (q queue) keys(ctx context.Context, filter string) ([]string, error) {
	l, err := q.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list %s keys %s: %w", Bucket, filter, err)
	}
	defer l.Stop()
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// enqueue adds e to its queue, or keeps the entry already there for the
// same approval (a redelivery, or an approval of the head prloop itself
// made). An entry for an older approval of the PR is replaced: the new
// approval queues at its own place. It returns the stored entry and whether
// it was already queued.
func (q queue) enqueue(ctx context.Context, e Entry) (stored, bool, error) {
	key := entryKey(e.PR, e.Base)
	var queued *stored // the entry already there for this approval
	rev, err := kvlease.Update(ctx, q.kv, key, 10, func(body []byte, rev uint64) ([]byte, error) {
		queued = nil
		if rev != 0 {
			var cur Entry
			if err := json.Unmarshal(body, &cur); err != nil {
				return nil, fmt.Errorf("decode queue entry %s: %w", key, err)
			}
			if cur.ApprovedHead == e.ApprovedHead || cur.Head == e.ApprovedHead {
				queued = &stored{Entry: cur, key: key}
				if !queued.refresh(e) {
					return nil, kvlease.ErrUnchanged
				}
				body, err := json.Marshal(queued.Entry)
				if err != nil {
					return nil, fmt.Errorf("encode queue entry for %s: %w", e.PR, err)
				}
				return body, nil
			}
			e.SeenChecks = union(e.SeenChecks, cur.SeenChecks)
		}
		body, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode queue entry for %s: %w", e.PR, err)
		}
		return body, nil
	})
	switch {
	case queued != nil && (err == nil || errors.Is(err, kvlease.ErrUnchanged)):
		queued.rev = rev
		return *queued, true, nil
	case errors.Is(err, kvlease.ErrContended):
		return stored{}, false, fmt.Errorf("queue %s: %w too often", e.PR, errReplaced)
	case err != nil:
		return stored{}, false, fmt.Errorf("queue %s: %w", e.PR, err)
	}
	return stored{Entry: e, key: key, rev: rev}, false, nil
}

// refresh takes what a newer announcement e of the entry's approval
// knows: a later escalation epoch (a human resolved an escalation since,
// so a failure is news again) and an anchor the entry lacked. It reports
// whether the entry changed.
func (en *Entry) refresh(e Entry) bool {
	changed := false
	if e.Epoch > en.Epoch {
		en.Epoch, changed = e.Epoch, true
	}
	if en.Anchor.IsZero() && !e.Anchor.IsZero() && en.ApprovedHead == e.ApprovedHead {
		en.Anchor, changed = e.Anchor, true
	}
	return changed
}

// position is the 1-based place of pr in its queue, in queue order (1 is
// the PR being merged or next to be), and the numbers of the PRs ahead of
// it.
func (q queue) position(ctx context.Context, qid string, pr ghref.PR) (int, []int, error) {
	all, err := q.list(ctx, qid)
	if err != nil {
		return 0, nil, err
	}
	pos, ahead := placeIn(all, pr)
	return pos, ahead, nil
}

// save writes s back if nobody changed it meanwhile (errReplaced otherwise).
func (q queue) save(ctx context.Context, s *stored) error {
	body, err := json.Marshal(s.Entry)
	if err != nil {
		return fmt.Errorf("encode queue entry for %s: %w", s.PR, err)
	}
	rev, err := q.kv.Update(ctx, s.key, body, s.rev)
	if kvlease.IsConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("save queue entry for %s: %w", s.PR, errReplaced)
	}
	if err != nil {
		return fmt.Errorf("save queue entry for %s: %w", s.PR, err)
	}
	s.rev = rev
	return nil
}

// saveAs writes next in place of s's entry if nobody changed it
// meanwhile, and only then makes it s's entry.
func (q queue) saveAs(ctx context.Context, s *stored, next Entry) error {
	w := stored{Entry: next, key: s.key, rev: s.rev}
	if err := q.save(ctx, &w); err != nil {
		return err
	}
	*s = w
	return nil
}

// remove deletes s if nobody changed it meanwhile; an entry replaced by a
// newer approval stays.
func (q queue) remove(ctx context.Context, s stored) error {
	err := q.kv.Delete(ctx, s.key, jetstream.LastRevision(s.rev))
	if err != nil && !kvlease.IsConflict(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("remove %s from the merge queue: %w", s.PR, err)
	}
	return nil
}

// legacyIntent reads the half-done step of an entry an earlier version
// wrote (separate updating_* and merging_* fields), so that an upgrade in
// the middle of a merge still recognises prloop's own step.
func legacyIntent(body []byte) *Intent {
	var old struct {
		UpdatingFrom string `json:"updating_from"`
		UpdatingTo   string `json:"updating_to"`
		MergingHead  string `json:"merging_head"`
		MergingTree  string `json:"merging_tree"`
	}
	if json.Unmarshal(body, &old) != nil {
		return nil
	}
	switch {
	case old.MergingHead != "":
		return &Intent{Kind: intentMerge, Head: old.MergingHead, Tree: old.MergingTree}
	case old.UpdatingFrom != "":
		return &Intent{Kind: intentUpdate, Head: old.UpdatingFrom, To: old.UpdatingTo}
	}
	return nil
}
