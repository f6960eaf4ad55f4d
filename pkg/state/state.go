// Package state keeps the poller's record of each watched PR in a JetStream
// KV bucket, one key per PR, updated only by compare-and-set on the entry's
// revision so that the poller's replicas never overwrite each other.
//
// # One writer
//
// The record is the poller's: only the poller writes it, and the other
// services neither write nor read it (they do not import this package, and
// their NATS users may not publish to $KV.PRLOOP_PRS). What they need of it
// travels in the poller's events, and what they did reaches the poller as
// their events, which its reduce folds into the record. The operator's
// commands (prloop status, explain) read it.
//
// # Side effects: the outbox
//
// A decision and its events are stored together: the compare-and-set
// function decides and appends the events it decided to the record's
// Outbox, and nothing leaves the process inside it (it may run more than
// once). Only after the record is stored are the Outbox's events published,
// in order, and then removed from it. A crash in between leaves them in the
// Outbox, and whoever next touches the PR (or the poller at start) publishes
// them first: an event is never lost, and never published before the state
// it follows from is stored. Their ids are deterministic, so publishing one
// twice is harmless (JetStream drops the repeat).
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Bucket is the KV bucket holding PR state.
const Bucket = "PRLOOP_PRS"

// ErrNotFound says no state is recorded for the PR.
var ErrNotFound = errors.New("no state recorded")

// PR is the durable state of one watched pull request.
type PR struct {
	PR ghref.PR `json:"pr"`
	// Status is the review status the poller last published.
	Status events.Status `json:"status"`
	// HeadSHA is the head commit the status applies to.
	HeadSHA string `json:"head_sha"`
	// HeadAnchor is when HeadSHA became the head as far as prloop knows: the
	// head commit's committer date when watching began, the moment prloop
	// first saw a new head, or the moment of a push prloop made itself.
	// Review signals older than the anchor do not count.
	HeadAnchor time.Time `json:"head_anchor"`
	// BaseRef is the PR's base branch as the poller last saw it;
	// BaseSince is when it saw the PR retargeted to it (zero: the base has
	// not changed while watched). An approval is for a head on a base:
	// approvals older than BaseSince do not count.
	BaseRef   string    `json:"base_ref,omitempty"`
	BaseSince time.Time `json:"base_since,omitzero"`
	// LastPushAt is when prloop last pushed a fix to the PR.
	LastPushAt time.Time `json:"last_push_at,omitempty"`
	// WatchedSince is when watching began; the review timeout counts from it.
	WatchedSince time.Time `json:"watched_since"`
	// FixCycle counts the fixes prloop has pushed.
	FixCycle int `json:"fix_cycle"`
	// Transitions counts published status transitions; it makes each
	// transition's event id unique and a retried publish a duplicate.
	Transitions int `json:"transitions"`
	// FeedbackHeadSHA is the head whose change request is being addressed;
	// no second PRFeedbackReceived for it is published meanwhile.
	FeedbackHeadSHA string `json:"feedback_head_sha,omitempty"`
	// AskedItems are the keys (review.ItemKey) of the feedback the last
	// PRFeedbackReceived carried; when a fix addresses that change request
	// they join AddressedItems, which never ask for changes again.
	AskedItems     []string `json:"asked_items,omitempty"`
	AddressedItems []string `json:"addressed_items,omitempty"`
	// PushedHeadSHA and PushedAt record prloop's own last push (from
	// PRFeedbackAddressed): when the poller sees that head, its anchor is the
	// push moment rather than the moment of observation.
	PushedHeadSHA string    `json:"pushed_head_sha,omitempty"`
	PushedAt      time.Time `json:"pushed_at,omitempty"`
	// MergeUpdatedHeadSHA is a head the merger made by bringing an approved
	// head up to date with its base (update-branch or rebase) before merging.
	// prloop made that change itself, so the approval carries over to it: it
	// is not a new, unreviewed push.
	MergeUpdatedHeadSHA string `json:"merge_updated_head_sha,omitempty"`
	// ConflictHeadSHA is the head whose conflict with its base the feedback
	// service is resolving (from PRConflictResolveRequested, until
	// PRFeedbackAddressed, PRFeedbackSkipped or PREscalationRequested ends
	// it); ConflictFixHeadSHA the head its resolution made, which keeps the
	// approval only with PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX.
	ConflictHeadSHA    string `json:"conflict_head_sha,omitempty"`
	ConflictFixHeadSHA string `json:"conflict_fix_head_sha,omitempty"`
	// Author is the PR's author, whose signals never count.
	Author string `json:"author,omitempty"`
	// MissingReviewers are the quorum reviewers that had not responded on
	// the head at the last evaluation.
	MissingReviewers []string `json:"missing_reviewers,omitempty"`
	// PolicyHold is why the repository's policy holds the PR's verdict
	// back (an invalid .github/prloop.yml on the base, a change of that
	// file without a human approval), as last published with its pending
	// status; "" when nothing holds it.
	PolicyHold string `json:"policy_hold,omitempty"`
	// WorkflowFailedHead is the head for which a failed review workflow was
	// escalated, so it is escalated once per head.
	WorkflowFailedHead string `json:"workflow_failed_head,omitempty"`
	// Checks is what the poller published about failing checks
	// (PRChecksFailed): a head's failures are handled once.
	Checks ChecksRecord `json:"checks,omitzero"`
	// Fingerprint summarises what the last probe saw of the PR (head,
	// updated_at, comment count, reactions); an unchanged fingerprint means
	// nothing to fetch, across restarts too.
	Fingerprint string `json:"fingerprint,omitempty"`
	// RecheckAt, when set, is when the probe evaluates the PR again though
	// its fingerprint did not change: the fingerprint was taken within a
	// few seconds of the PR's last activity, and GitHub's updated_at, in
	// whole seconds, may not show an activity in the same second.
	RecheckAt time.Time `json:"recheck_at,omitzero"`
	// ClosedAt is when the PR was seen closed.
	ClosedAt time.Time `json:"closed_at,omitempty"`
	// Worktree and ContextPath come from the watch request.
	Worktree    string `json:"worktree,omitempty"`
	ContextPath string `json:"context_path,omitempty"`
	// Closed is set when the PR was closed or merged; watching stops.
	Closed bool `json:"closed,omitempty"`
	// Merged is set when the PR was merged (by prloop or not).
	Merged bool `json:"merged,omitempty"`
	// ReviewTimeoutSent records that ReviewTimeout was published.
	ReviewTimeoutSent bool `json:"review_timeout_sent,omitempty"`
	// EscalationLabelSeen records that the poller knows the escalation label
	// is on the PR: it saw it, or it read the PR after the escalator said it
	// applied it (PREscalated). A later read that lacks it means a human
	// removed it, which resets the fix cycle and resumes the loop.
	EscalationLabelSeen bool `json:"escalation_label_seen,omitempty"`
	// EscalationLabelSeenAt is GitHub's updated_at of the read that showed
	// the label: a read older than that cannot tell that it was removed.
	EscalationLabelSeenAt time.Time `json:"escalation_label_seen_at,omitempty"`
	// Epoch counts the escalations a human resolved by removing the label;
	// the poller increments it when it resumes the loop. The ids of the
	// events that ask for a human, and of PREscalated, carry it, so that a
	// failure after the resume is a new event and not a duplicate (see
	// "Event ids" in package events).
	Epoch int `json:"epoch,omitempty"`
	// Escalations maps reason codes to when the escalation was done in the
	// current Epoch; the resume clears it.
	Escalations map[events.Reason]time.Time `json:"escalations,omitempty"`
	// Commands are the "/prloop" comments the poller handled (taken,
	// refused or ignored), so that each is handled once whatever restarts
	// and replicas (services/poller/commands.go).
	Commands CommandsRecord `json:"commands,omitzero"`
	// Stopped is set by "/prloop stop": the poller no longer evaluates the
	// PR, across restarts, until a watch request starts it again.
	Stopped bool `json:"stopped,omitempty"`
	// FixCommandHead is the head a "/prloop fix" asked the agent to fix:
	// the change request stands on it until the fix ends, whatever the
	// reviewers' verdict says meanwhile.
	FixCommandHead string `json:"fix_command_head,omitempty"`
	// LastEventID, LastEventType and LastEventAt describe the last event
	// prloop published about the PR.
	LastEventID   string      `json:"last_event_id,omitempty"`
	LastEventType events.Type `json:"last_event_type,omitempty"`
	LastEventAt   time.Time   `json:"last_event_at,omitempty"`
	// Outbox holds events decided with this record and not yet known to be
	// published, oldest first (see "Side effects" above).
	Outbox []cloudevents.Event `json:"outbox,omitempty"`
	// UpdatedAt is when this record last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxCommandsKept bounds CommandsRecord.Handled: older ids are folded into
// its Floor.
const MaxCommandsKept = 64

// CommandsRecord is which command comments the poller handled: every id in
// Handled, and every id at or below Floor (GitHub's comment ids grow).
type CommandsRecord struct {
	Handled []int64 `json:"handled,omitempty"`
	Floor   int64   `json:"floor,omitempty"`
}

// Has reports whether the comment id was handled.
func (c CommandsRecord) Has(id int64) bool {
	return id <= c.Floor || slices.Contains(c.Handled, id)
}

// Add records id as handled, folding the oldest ids into Floor beyond
// MaxCommandsKept.
func (c *CommandsRecord) Add(id int64) {
	if c.Has(id) {
		return
	}
	c.Handled = append(slices.Clone(c.Handled), id)
	slices.Sort(c.Handled)
	for len(c.Handled) > MaxCommandsKept {
		c.Floor, c.Handled = max(c.Floor, c.Handled[0]), c.Handled[1:]
	}
}

// MaxAddressedItems bounds AddressedItems: the oldest are forgotten first,
// and by then they are far older than any head they could still match.
const MaxAddressedItems = 500

// Addressed returns AddressedItems as a set, for review.Head.
func (p PR) Addressed() map[string]bool {
	if len(p.AddressedItems) == 0 {
		return nil
	}
	out := make(map[string]bool, len(p.AddressedItems))
	for _, k := range p.AddressedItems {
		out[k] = true
	}
	return out
}

// Escalated reports whether any escalation is recorded.
func (p PR) Escalated() bool { return len(p.Escalations) > 0 }

// Key is the KV key of a PR (events.PRKey).
func Key(pr ghref.PR) string { return events.PRKey(pr) }

// ParseKey is the inverse of Key (events.ParsePRKey).
func ParseKey(key string) (ghref.PR, error) { return events.ParsePRKey(key) }

// KV is the part of jetstream.KeyValue the store uses.
type KV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error)
}

var _ KV = (jetstream.KeyValue)(nil)

// Store reads and updates PR state.
type Store struct {
	kv  KV
	now func() time.Time
}

// BucketManager is the part of jetstream.JetStream that Ensure needs.
type BucketManager interface {
	kvlease.StreamGetter
	CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error)
}

// Ensure creates or updates the bucket and returns a store on it.
func Ensure(ctx context.Context, js BucketManager, replicas int) (*Store, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "prloop per-PR state",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    max(1, replicas),
	})
	if err != nil {
		return nil, fmt.Errorf("ensure kv bucket %s: %w", Bucket, err)
	}
	// List must see every PR, also one whose record is being written.
	exact, err := kvlease.Exact(ctx, js, kv)
	if err != nil {
		return nil, err
	}
	return NewStore(exact), nil
}

// NewStore returns a store on kv.
func NewStore(kv KV) *Store { return &Store{kv: kv, now: time.Now} }

// Get returns the PR's state and its revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, pr ghref.PR) (PR, uint64, error) {
	e, err := s.kv.Get(ctx, Key(pr))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return PR{}, 0, fmt.Errorf("state of %s: %w", pr, ErrNotFound)
	}
	if err != nil {
		return PR{}, 0, fmt.Errorf("read state of %s: %w", pr, err)
	}
	var p PR
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return PR{}, 0, fmt.Errorf("decode state of %s (revision %d): %w", pr, e.Revision(), err)
	}
	return p, e.Revision(), nil
}

// ErrNoChange may be returned by an Update function to leave the record as it is.
var ErrNoChange = errors.New("no change")

// Update applies fn to the PR's state (a zero record with PR set when none
// exists) and stores the result with compare-and-set, re-reading and
// re-applying fn when another writer got there first. fn must be free of side
// effects: it may run more than once. It returns the stored record, or the
// unchanged one when fn returns ErrNoChange.
func (s *Store) Update(ctx context.Context, pr ghref.PR, fn func(*PR) error) (PR, error) {
	var cur, next PR
	var fnErr error // fn's own or the decoding's, returned as it is
	_, err := kvlease.Update(ctx, s.kv, Key(pr), 51, func(body []byte, rev uint64) ([]byte, error) {
		cur = PR{PR: pr}
		if rev != 0 {
			cur = PR{}
			if err := json.Unmarshal(body, &cur); err != nil {
				fnErr = fmt.Errorf("decode state of %s (revision %d): %w", pr, rev, err)
				return nil, fnErr
			}
		}
		next = cur
		next.Escalations = maps.Clone(cur.Escalations)
		next.Outbox = slices.Clone(cur.Outbox)
		next.AskedItems, next.AddressedItems = slices.Clone(cur.AskedItems), slices.Clone(cur.AddressedItems)
		if fnErr = fn(&next); fnErr != nil {
			return nil, fnErr
		}
		next.UpdatedAt = s.now().UTC()
		return json.Marshal(next)
	})
	switch {
	case errors.Is(fnErr, ErrNoChange):
		return cur, nil
	case fnErr != nil:
		return cur, fnErr
	case err != nil:
		return cur, fmt.Errorf("write state of %s: %w", pr, err)
	}
	return next, nil
}

// List returns every recorded PR state.
func (s *Store) List(ctx context.Context) ([]PR, error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list state keys: %w", err)
	}
	defer lister.Stop()
	var out []PR
	for key := range lister.Keys() {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read state %s: %w", key, err)
		}
		var p PR
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("decode state %s: %w", key, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Forget deletes the PR's record if it is still at revision rev: a closed
// PR's record past its retention, unless something wrote it meanwhile (a
// reopen). It reports whether it deleted it.
func (s *Store) Forget(ctx context.Context, pr ghref.PR, rev uint64) (bool, error) {
	err := s.kv.Delete(ctx, Key(pr), jetstream.LastRevision(rev))
	switch {
	case err == nil:
		return true, nil
	case kvlease.IsConflict(err), errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, fmt.Errorf("forget state of %s: %w", pr, err)
}

// ChecksRecord is the poller's record of a PR's failing checks
// (PRChecksFailed, issue #32).
type ChecksRecord struct {
	// HeadSHA is the head whose failures were published, Round how many
	// times (a failure after a re-run is round 2), and Key the failing
	// checks' fingerprint last published: the same failure is news once.
	HeadSHA string `json:"head_sha,omitempty"`
	Round   int    `json:"round,omitempty"`
	Key     string `json:"key,omitempty"`
	// Failing names the checks last published as failing, for prloop
	// explain.
	Failing []string `json:"failing,omitempty"`
	// Passed says the checks of HeadSHA passed after its failure was
	// published: a flaky pass, counted once in FlakyPasses.
	Passed      bool `json:"passed,omitempty"`
	FlakyPasses int  `json:"flaky_passes,omitempty"`
}
