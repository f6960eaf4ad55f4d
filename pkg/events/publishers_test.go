package events_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/natsx/natstest"
)

// docTable reads the "published by" column of the table in doc.go.
func docTable(t *testing.T) map[events.Type][]string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	out := map[events.Type][]string{}
	for _, line := range strings.Split(string(src), "\n") {
		row, ok := strings.CutPrefix(line, "//\t|")
		if !ok {
			continue
		}
		cells := strings.Split(row, "|")
		typ := strings.TrimSpace(cells[0])
		if typ == "type" || strings.Trim(typ, "-") == "" {
			continue
		}
		var pubs []string
		for _, p := range strings.Split(cells[1], ",") {
			pubs = append(pubs, strings.TrimSpace(p))
		}
		out[events.Type(typ)] = pubs
	}
	return out
}

func TestPublishedBy_AgreesWithTheDocTable(t *testing.T) {
	t.Parallel()
	table := docTable(t)
	require.Len(t, table, len(events.Types), "doc.go: one row per type")
	fromCode := map[events.Type][]string{}
	for _, p := range events.Publishers() {
		for _, typ := range events.PublishedBy(p) {
			fromCode[typ] = append(fromCode[typ], p)
		}
	}
	for _, typ := range events.Types {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			want := slices.Sorted(slices.Values(table[typ]))
			assert.Equal(t, want, fromCode[typ], "doc.go's table and events.PublishedBy disagree on %s", typ)
		})
	}
	assert.Nil(t, events.PublishedBy("nobody"))
}

func TestEmitter_RefusesTypesItsPublisherDoesNotPublish(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	tests := []struct {
		name      string
		publisher string
		data      events.Data
		wantErr   bool
	}{
		{"poller approves", events.PublisherPoller, &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}, false},
		{"escalator approves", events.PublisherEscalator, &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}, true},
		{"cli merges", events.PublisherCLI, &events.Merged{Base: events.Base{PR: pr}, MergeSHA: "m"}, true},
		{"an unlisted tool is left to NATS", "test", &events.Merged{Base: events.Base{PR: pr}, MergeSHA: "m"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := events.NewEmitter(conn.JS, tc.publisher).Emit(t.Context(), tc.data, tc.name)
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "does not publish")
				return
			}
			require.NoError(t, err)
		})
	}
}

// A publisher allowed one subject must not get another type past a consumer
// by putting it in the body: consumers filter by subject.
func TestConsume_BodyDisagreeingWithSubjectDeadLettered(t *testing.T) {
	t.Parallel()
	other := ghref.PR{Owner: "acme", Repo: "other", Number: 1}
	tests := []struct {
		name    string
		subject string
		data    events.Data
	}{
		{"approval on an escalation subject", events.Subject(pr, events.TypeEscalated), &events.ReviewApproved{Base: events.Base{PR: pr}, Status: events.StatusApproved}},
		{"another PR's approval", events.Subject(pr, events.TypeReviewApproved), &events.ReviewApproved{Base: events.Base{PR: other}, Status: events.StatusApproved}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := natstest.Start(t)
			e, err := events.New("forger", tc.data, time.Now())
			require.NoError(t, err)
			m, err := events.Message(e)
			require.NoError(t, err)
			m.Subject = tc.subject
			_, err = conn.JS.PublishMsg(t.Context(), m)
			require.NoError(t, err)
			_, typ, err := events.ParseSubject(tc.subject)
			require.NoError(t, err)
			var calls atomic.Int32
			runConsumer(t, conn.JS, events.ConsumerConfig{Durable: "strict", Types: []events.Type{typ}}, func(context.Context, *events.Msg) error {
				calls.Add(1)
				return nil
			})
			dlq := waitDLQ(t, conn.JS, "strict")
			assert.Zero(t, calls.Load(), "the handler never sees a forged event")
			assert.Contains(t, dlq.Header.Get(events.HeaderDLQReason), "malformed event")
		})
	}
}
