package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Bucket is the feedback service's KV bucket. Per PR it holds the lease of
// the attempt in flight (lease.<pr key>, a kvlease.Record) and the record of
// what was done about the PR's latest change request (attempt.<pr key>),
// which makes a redelivered change request cheap and harmless.
const Bucket = "PRLOOP_FEEDBACK"

// Key prefixes of the bucket's two kinds of records.
const (
	leasePrefix  = "lease."
	recordPrefix = "attempt."
)

func leaseKey(pr ghref.PR) string  { return leasePrefix + events.PRKey(pr) }
func recordKey(pr ghref.PR) string { return recordPrefix + events.PRKey(pr) }

// OpenBucket creates or updates the bucket.
func OpenBucket(ctx context.Context, js kvlease.BucketManager, replicas int) (jetstream.KeyValue, error) {
	return kvlease.EnsureBucket(ctx, js, Bucket, "prloop feedback: per-PR attempt leases and what was done about each PR's latest change request", replicas)
}

// Outcome is how a change request ended.
type Outcome string

// Outcomes. A record with an outcome is final: a redelivered change request
// for it publishes nothing new and runs no agent.
const (
	// OutcomeAddressed: a fix was pushed and PRFeedbackAddressed published.
	OutcomeAddressed Outcome = "addressed"
	// OutcomeEscalated: PREscalationRequested was published instead.
	OutcomeEscalated Outcome = "escalated"
	// OutcomeSkipped: nothing to do (PR closed, escalation label, head
	// moved on, no feedback left); only logged.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeDuplicate: a redelivery of a change request already handled.
	OutcomeDuplicate Outcome = "duplicate"
)

// Phase is how far an attempt's latest agent run got.
type Phase string

// Phases, in order. A resume discards the worktree in every phase: an
// agent run that did not end normally (shutdown, lost lease, crash) left
// half-finished work, and a finished run's work is in the mirror.
const (
	// PhaseAgentStarted: a run started; no work of it was taken in. A
	// resume runs the agent again.
	PhaseAgentStarted Phase = "agent-started"
	// PhaseAgentFinished: a run ended normally and its work is ResultSHA
	// in the mirror. A resume checks and pushes that, when the mirror
	// has it, and runs the agent again otherwise.
	PhaseAgentFinished Phase = "agent-finished"
	// PhasePushed: prloop pushed PushedSHA. A resume publishes the fix.
	PhasePushed Phase = "pushed"
)

// Request is one change request: the content of a PRFeedbackReceived,
// everything the service knows of the poller's view of the PR.
type Request struct {
	PR      ghref.PR
	HeadSHA string
	// FixCycle is the poller's count of the fixes pushed to the PR: it
	// asks again about a fix's head only after it counted that fix.
	FixCycle int
	// EventID is the PRFeedbackReceived's id: a redelivery repeats it, a
	// new change request on the same head and cycle (after an escalation
	// was resolved) does not.
	EventID string
	// Epoch is the PR's escalation epoch, carried into every escalation
	// request the change request leads to.
	Epoch int
	// Worktree and ContextPath are the watch request's.
	Worktree, ContextPath string
	// Anchor and Addressed are the poller's anchor of the head and the
	// feedback earlier fixes addressed (see events.FeedbackReceived).
	Anchor    time.Time
	Addressed []string
	// Conflict is set for a PRConflictResolveRequested (plan_conflict.go): the
	// agent resolves the head's conflict with the base instead of review
	// feedback.
	Conflict *Conflict
	// Checks is set for a PRChecksFailed (plan_checks.go): the agent makes the
	// failing checks pass (and addresses the change request on the head
	// too when one stands).
	Checks *ChecksFailure
	// FailedChecks are the failing checks the prompt quotes: a
	// PRChecksFailed's, or those a PRFeedbackReceived carried.
	FailedChecks []events.FailedCheck
	// Command is the "/prloop fix" comment that made the change request
	// (events.FeedbackReceived.CommandID), 0 for none.
	Command int64
}

// requestOf reads a change request from its event.
func requestOf(d *events.FeedbackReceived, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Worktree: d.Worktree, ContextPath: d.ContextPath, Anchor: d.Anchor, Addressed: d.AddressedItems,
		FailedChecks: d.FailedChecks, Command: d.CommandID,
	}
}

// Key is the change request's idempotency key: PR, head and fix cycle,
// and for a conflict the base tip the merger saw it with.
func (r Request) Key() string {
	k := r.PR.Key() + "@" + r.HeadSHA + "#" + strconv.Itoa(r.FixCycle)
	if r.Conflict != nil {
		k += "+conflict@" + r.Conflict.BaseSHA
	}
	if r.Checks != nil {
		k += "+checks#" + strconv.Itoa(r.Checks.Round)
	}
	if c := r.candidate(); c != nil {
		k += "+candidate@" + c.SHA
	}
	return k
}

// Record is the durable trace of the attempt on a PR's latest change request.
type Record struct {
	// Key is the change request's Request.Key, EventID the event that
	// started the attempt.
	Key     string `json:"key"`
	EventID string `json:"event_id,omitempty"`
	// Runs counts agent runs started for it, across replicas and crashes,
	// so that PRLOOP_AGENT_ATTEMPTS bounds them all.
	Runs int `json:"runs"`
	// AgentSpent is the agent wall time spent on the PR so far, across
	// change requests: what PRLOOP_AGENT_BUDGET bounds. It is carried over
	// when a new change request starts a fresh record.
	AgentSpent time.Duration `json:"agent_spent_ns,omitempty"`
	// CIFixes counts the attempts to fix failing checks on the PR, carried
	// over like AgentSpent: what PRLOOP_MAX_CI_FIX_CYCLES bounds.
	CIFixes int `json:"ci_fixes,omitempty"`
	// AgentCostUSD is what a preset's runs on the PR cost so far, across
	// change requests: what PRLOOP_AGENT_MAX_COST_USD bounds, carried over
	// like AgentSpent.
	AgentCostUSD float64 `json:"agent_cost_usd,omitempty"`
	// AgentWaitUntil is when the wait for the day's agent budget that this
	// change request announced (PRAgentWaiting, state waiting) ends, until
	// its end is announced too: a resume after a crash in the wait still
	// tells the views that the run starts.
	AgentWaitUntil time.Time `json:"agent_wait_until,omitzero"`
	// FixCycle is the number of the fix this change request's push is, or
	// will be: fixed when the record is made, before anything is pushed,
	// so that one push counts as one fix cycle however often the change
	// request is resumed (the poller counts the push once it saw
	// PRFeedbackAddressed, and a redelivery may come after that).
	FixCycle int `json:"fix_cycle,omitempty"`
	// Phase is how far the latest agent run got, for a resume to know
	// what the worktree and the mirror hold; ResultSHA is the work of a run
	// that ended normally, as prloop's mirror took it in.
	Phase     Phase  `json:"phase,omitempty"`
	ResultSHA string `json:"result_sha,omitempty"`
	// Worktree is the watch request's worktree the attempt works in ("" for
	// prloop's own clone), and UserFiles its untracked files from before
	// the attempt: a resume resets the worktree and must tell the user's
	// files from an interrupted agent's.
	Worktree  string   `json:"worktree,omitempty"`
	UserFiles []string `json:"user_files,omitempty"`
	// PushedSHA and PushedAt record prloop's own push of the fix.
	PushedSHA string `json:"pushed_sha,omitempty"`
	// ConflictBase is the base tip a conflict resolution merges into the
	// head, fixed when the attempt first reads it, so that a resume checks
	// the agent's merge against the base it was given.
	ConflictBase string `json:"conflict_base,omitempty"`
	// BaseMerge is prloop's merge of ConflictBase into the head, made
	// before a run on a failed candidate: the agent's work starts there,
	// and is checked from there (the base's commits are not the agent's).
	BaseMerge string    `json:"base_merge,omitempty"`
	PushedAt  time.Time `json:"pushed_at,omitempty"`
	// Audience is whom the note about the fix is for, decided from the
	// feedback gathered for the agent (see plan_notify.go).
	Audience *Audience `json:"audience,omitempty"`
	// Outcome is set once the result was published.
	Outcome   Outcome `json:"outcome,omitempty"`
	NewHead   string  `json:"new_head,omitempty"`
	LastError string  `json:"last_error,omitempty"`
	// Holder is the replica that last wrote the record.
	Holder    string    `json:"holder,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Handled reports whether req needs no work: a fix for its head and cycle
// was pushed, or this very event already ended otherwise. An escalated or
// skipped change request may come again as a new event once a human
// resolved it, and is then worked on afresh.
func (r Record) Handled(req Request) bool {
	if r.Key != req.Key() || r.Outcome == "" {
		return false
	}
	return r.Outcome == OutcomeAddressed || r.EventID == req.EventID
}

// InFlight reports whether r is an unfinished attempt on req: one that a
// replica started and did not end (a crash, a shutdown, a lost lease).
func (r Record) InFlight(req Request) bool { return r.Key == req.Key() && r.Outcome == "" }

// records reads and writes attempt records, with compare-and-set.
type records struct{ kv kvlease.KV }

// get returns pr's record and its revision (zero and 0 when none).
func (rs records) get(ctx context.Context, pr ghref.PR) (Record, uint64, error) {
	e, err := rs.kv.Get(ctx, recordKey(pr))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, nil
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("read feedback record of %s: %w", pr, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		// A record that cannot be read must not block the PR forever:
		// start over, as if there were none.
		return Record{}, e.Revision(), nil
	}
	return r, e.Revision(), nil
}

// put stores r if pr's record is still at revision rev (0: none), and
// returns the new revision.
func (rs records) put(ctx context.Context, pr ghref.PR, r Record, rev uint64) (uint64, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("encode feedback record of %s: %w", pr, err)
	}
	next, err := kvlease.Put(ctx, rs.kv, recordKey(pr), body, rev)
	if err != nil {
		return 0, fmt.Errorf("write feedback record of %s (revision %d): %w", pr, rev, err)
	}
	return next, nil
}

// drop deletes pr's record, if any.
func (rs records) drop(ctx context.Context, pr ghref.PR) error {
	if err := rs.kv.Delete(ctx, recordKey(pr)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete feedback record of %s: %w", pr, err)
	}
	return nil
}
