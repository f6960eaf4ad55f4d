package events

import (
	"fmt"
	"reflect"
	"slices"
)

// registry is the one table of prloop's event types, in lifecycle order.
//
// Adding a type is a row here and its data struct (embedding Base), then
// 'go generate ./pkg/events'. Everything else comes from the row: the
// constant Type<Struct> and the struct's EventType method
// (registry_gen.go), Types, decoding (newData), who may publish it
// (PublishedBy, which the Emitters and the NATS permissions of
// deploy/ follow), the table in doc.go and docs/events.md.
// TestRegistry_GeneratedCodeIsCurrent fails when a generated file is stale.
var registry = []registered{
	{"PRCreateRequested", CreateRequested{}, by(PublisherCLI), "command: push this branch, open its PR, then watch it"},
	{"PRCreated", Created{}, by(PublisherFeedback), "prloop pushed the branch and opened (or found) its PR"},
	{"PRWatchRequested", WatchRequested{}, by(PublisherCLI), "command: start watching this PR"},
	{"PRReviewPending", ReviewPending{}, by(PublisherPoller), "watched, no review signal on the current head yet"},
	{"PRReviewInProgress", ReviewInProgress{}, by(PublisherPoller), `a reviewer signalled "in review" (👀), or part of the quorum responded`},
	{"PRFeedbackReceived", FeedbackReceived{}, by(PublisherPoller), "changes requested on the current head"},
	{"PRFeedbackAddressed", FeedbackAddressed{}, by(PublisherFeedback), "the agent's fix is pushed; head_sha is the new head"},
	{"PRFeedbackSkipped", FeedbackSkipped{}, by(PublisherFeedback), "the change request on head_sha needs no fix any more"},
	{"PRReviewApproved", ReviewApproved{}, by(PublisherPoller), "approved on head_sha"},
	{"ReviewTimeout", ReviewTimeout{}, by(PublisherPoller), "no approval within the review timeout"},
	{"PRMergeQueued", MergeQueued{}, by(PublisherMerger), "entered the merge queue of its base branch"},
	{"PRMergeWaiting", MergeWaiting{}, by(PublisherMerger), "first in its queue, waits for these checks on head_sha"},
	{"PRMerged", Merged{}, by(PublisherMerger), "merged by prloop"},
	{"PRMergeFailed", MergeFailed{}, by(PublisherMerger), "not merged: not queued, or left the queue without a merge"},
	{"PRClosed", Closed{}, by(PublisherPoller), "closed or merged outside prloop; watching stops"},
	{"PREscalationRequested", EscalationRequested{}, by(PublisherPoller, PublisherFeedback, PublisherMerger), "a human is needed"},
	{"PREscalated", Escalated{}, by(PublisherEscalator), "the human was called (label, comment, webhook)"},
	{"PREscalationResolved", EscalationResolved{}, by(PublisherPoller), "a human removed the escalation label; the loop resumes"},
	{"PRBranchUpdated", BranchUpdated{}, by(PublisherMerger), "prloop brought the approved head up to date with its base"},
	{"PRMergeCandidate", MergeCandidate{}, by(PublisherMerger), "speculative queue (PRLOOP_QUEUE_MODE=speculative): the candidate the PR rides in, built or gone"},
	{"PRConflictResolveRequested", ConflictResolveRequested{}, by(PublisherMerger), "command (PRLOOP_RESOLVE_CONFLICTS): the agent resolves head_sha's conflict with the base"},
	{"PRChecksFailed", ChecksFailed{}, by(PublisherPoller), "gating checks failed on head_sha (not prloop's own status)"},
	{"PRAgentWaiting", AgentWaiting{}, by(PublisherFeedback), "the agent's next run waits (the day's budget), or starts"},
	{"PRQueueFreezeRequested", QueueFreezeRequested{}, by(PublisherCLI), "command (`prloop queue freeze`/`unfreeze`): freeze or unfreeze a base's merge queue; about the repository (#0)"},
	{"PRQueueFrozen", QueueFrozen{}, by(PublisherMerger), "nothing merges on the base until it is unfrozen (or until `until`); approvals still queue, CI still runs"},
	{"PRQueueUnfrozen", QueueUnfrozen{}, by(PublisherMerger), "the base's freeze is over: lifted, or its `until` passed"},
	{"PRCommandReceived", CommandReceived{}, by(PublisherPoller), `command: a "/prloop <command>" comment by someone who may approve, taken once per comment`},
}

// registered is one row of the registry.
type registered struct {
	// Type is the CloudEvent type and the subject's last token.
	Type Type
	// Data is the payload's zero value: a struct embedding Base, whose
	// name makes the constant's (Merged: TypeMerged).
	Data any
	// PublishedBy are the publishers (the Publisher constants) allowed
	// to publish the type.
	PublishedBy []string
	// Doc says in one line what the event means, for people: doc.go's
	// table, docs/events.md and the constant's comment.
	Doc string
}

// by lists a row's publishers.
func by(publishers ...string) []string { return publishers }

// Types lists every event type, in lifecycle order (the registry's).
var Types = typesOf(registry)

// dataTypes are the payload struct types by event type, for decoding.
var dataTypes = dataTypesOf(registry)

// publishedBy is the registry's "published by" column by publisher: the
// NATS permissions of each service's user are derived from it (and
// checked against it), and an Emitter of a listed publisher refuses other
// types, so the table, the services and the permissions cannot drift apart.
var publishedBy = publishersOf(registry)

func typesOf(rows []registered) []Type {
	out := make([]Type, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Type)
	}
	return out
}

func dataTypesOf(rows []registered) map[Type]reflect.Type {
	out := make(map[Type]reflect.Type, len(rows))
	for _, r := range rows {
		out[r.Type] = reflect.TypeOf(r.Data)
	}
	return out
}

func publishersOf(rows []registered) map[string][]Type {
	out := map[string][]Type{}
	for _, r := range rows {
		for _, p := range r.PublishedBy {
			if !slices.Contains(out[p], r.Type) {
				out[p] = append(out[p], r.Type)
			}
		}
	}
	return out
}

// newData returns an empty payload for t, for decoding.
func newData(t Type) (Data, error) {
	rt, ok := dataTypes[t]
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", t)
	}
	d, ok := reflect.New(rt).Interface().(Data)
	if !ok {
		return nil, fmt.Errorf("event type %s: %s has no EventType method: run 'go generate ./pkg/events'", t, rt)
	}
	return d, nil
}
