package prstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// TestFact: the board folds what a publisher publishes, and not a type the
// table in pkg/events does not give it (prloop emit-test's PRReviewPending
// as the CLI).
func TestFact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		source string
		typ    events.Type
		want   bool
	}{
		{name: "the poller's review status", source: events.Source(events.PublisherPoller), typ: events.TypeReviewPending, want: true},
		{name: "the CLI's watch request", source: events.Source(events.PublisherCLI), typ: events.TypeWatchRequested, want: true},
		{name: "emit-test's review status as the CLI", source: events.Source(events.PublisherCLI), typ: events.TypeReviewPending},
		{name: "the merger's merge as the escalator", source: events.Source(events.PublisherEscalator), typ: events.TypeMerged},
		{name: "a source the table does not list", source: events.Source("demo-agent"), typ: events.TypeWatchRequested, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, Fact(tc.source, tc.typ))
		})
	}
}

// TestRow_MergedAfterEscalationNeedsNoHuman: a row says a human is needed
// only while the PR is open.
func TestRow_MergedAfterEscalationNeedsNoHuman(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBoard()
	b.Apply(&events.Escalated{Base: events.Base{PR: pr, HeadSHA: "0123456789abcdef"}, Reason: events.ReasonReviewTimeout}, at)
	r, ok := b.Row(pr, Options{})
	assert.True(t, ok)
	assert.Equal(t, events.ReasonReviewTimeout, r.Escalation)
	assert.Equal(t, Error, r.Line.State)
	b.Apply(&events.Merged{Base: events.Base{PR: pr, HeadSHA: "0123456789abcdef"}, MergeSHA: "feedfacecafe"}, at.Add(time.Minute))
	r, _ = b.Row(pr, Options{})
	assert.Empty(t, r.Escalation)
	assert.Equal(t, Success, r.Line.State)
	assert.Equal(t, "1m0s", r.Age(at.Add(2*time.Minute)))
}
