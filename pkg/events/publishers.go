package events

import (
	"fmt"
	"slices"
)

// Publishers: the names of the services (and the CLI) that publish events.
// They equal the services' Name constants and the NATS users of
// deploy/nats/nats.conf.
const (
	PublisherPoller    = "poller"
	PublisherFeedback  = "feedback"
	PublisherMerger    = "merger"
	PublisherEscalator = "escalator"
	PublisherCLI       = "cli"
)

// publishedBy is the "published by" column of the table in doc.go, as data:
// the NATS permissions of each service's user are derived from it (and
// checked against it), and an Emitter of a listed publisher refuses other
// types, so the table, the services and the permissions cannot drift apart.
var publishedBy = map[string][]Type{
	PublisherPoller: {
		TypeReviewPending, TypeReviewInProgress, TypeFeedbackReceived, TypeReviewApproved,
		TypeReviewTimeout, TypeClosed, TypeEscalationRequested, TypeEscalationResolved,
		TypeChecksFailed, TypeCommandReceived,
	},
	PublisherFeedback:  {TypeCreated, TypeFeedbackAddressed, TypeFeedbackSkipped, TypeEscalationRequested, TypeAgentWaiting},
	PublisherMerger:    {TypeMergeQueued, TypeMergeWaiting, TypeMerged, TypeMergeFailed, TypeEscalationRequested, TypeBranchUpdated, TypeMergeCandidate, TypeConflictResolveRequested},
	PublisherEscalator: {TypeEscalated},
	PublisherCLI:       {TypeCreateRequested, TypeWatchRequested},
}

// Publishers lists every publisher of the table in doc.go, sorted.
func Publishers() []string {
	out := make([]string, 0, len(publishedBy))
	for p := range publishedBy {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// PublishedBy returns the event types publisher may publish, in lifecycle
// order, or nil for a publisher the table does not list.
func PublishedBy(publisher string) []Type {
	types := publishedBy[publisher]
	if types == nil {
		return nil
	}
	out := make([]Type, 0, len(types))
	for _, t := range Types {
		if slices.Contains(types, t) {
			out = append(out, t)
		}
	}
	return out
}

// checkPublisher refuses an event a listed publisher does not publish: a
// service emitting a type the table does not give it would be refused by
// NATS in a deployment with per-service users anyway, later and less
// clearly. Publishers the table does not list (tests, tools) are not
// checked here; NATS permissions still apply to them.
func checkPublisher(publisher string, t Type) error {
	types, listed := publishedBy[publisher]
	if listed && !slices.Contains(types, t) {
		return fmt.Errorf("%s does not publish %s (events.PublishedBy, the table in doc.go)", publisher, t)
	}
	return nil
}
