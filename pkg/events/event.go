package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/ghref"
)

// ContentType is the NATS Content-Type header of a structured-mode CloudEvent.
const ContentType = "application/cloudevents+json"

// ErrMalformed is wrapped by Decode's errors: the message is not a valid
// prloop event and retrying will not make it one.
var ErrMalformed = errors.New("malformed event")

// Source is the CloudEvent source of events published by service.
func Source(service string) string { return "/prloop/" + service }

// ID derives an event id (and Nats-Msg-Id) from what the event is about: the
// PR, the type, and the parts that make this occurrence unique (head SHA,
// fix cycle, transition number …). Two publishes of the same occurrence get
// the same id, so JetStream drops the second.
func ID(pr ghref.PR, t Type, parts ...string) string {
	id := pr.Key() + ":" + string(t)
	for _, p := range parts {
		id += ":" + p
	}
	return id
}

// EpochPart is the id part that names a PR's escalation epoch (state.PR's
// Epoch: how many escalations a human resolved by removing the label). The
// ids of ReviewTimeout, PREscalationRequested, PREscalated and
// PRMergeFailed for a failure carry it or another part that changes
// exactly when a new request is legitimate; see "Event ids" in the package
// documentation.
func EpochPart(epoch int) string { return "e" + strconv.Itoa(epoch) }

// New builds and validates a CloudEvent for d, published by service, whose id
// is ID(d.Ref(), d.EventType(), parts...).
func New(service string, d Data, now time.Time, parts ...string) (cloudevents.Event, error) {
	pr := d.Ref()
	if err := CheckRef(pr, d.EventType()); err != nil {
		return cloudevents.Event{}, fmt.Errorf("build %s event: %w", d.EventType(), err)
	}
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(ID(pr, d.EventType(), parts...))
	e.SetSource(Source(service))
	e.SetType(string(d.EventType()))
	e.SetSubject(pr.String())
	e.SetTime(now.UTC())
	if err := e.SetData(cloudevents.ApplicationJSON, d); err != nil {
		return cloudevents.Event{}, fmt.Errorf("encode %s data for %s: %w", d.EventType(), pr, err)
	}
	if err := e.Validate(); err != nil {
		return cloudevents.Event{}, fmt.Errorf("validate %s event for %s: %w", d.EventType(), pr, err)
	}
	return e, nil
}

// Message renders e as a structured-mode NATS message on its subject.
func Message(e cloudevents.Event) (*nats.Msg, error) {
	d, err := DataOf(e)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID(), err)
	}
	m := nats.NewMsg(Subject(d.Ref(), d.EventType()))
	m.Header.Set("Content-Type", ContentType)
	m.Header.Set(jetstream.MsgIDHeader, e.ID())
	m.Data = body
	return m, nil
}

// Publisher is the part of jetstream.JetStream that Publish needs.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

var _ Publisher = (jetstream.JetStream)(nil)

// Publish sends e to JetStream in structured mode with Nats-Msg-Id = e.ID().
// A publish JetStream recognises as a duplicate returns an ack with Duplicate
// set and no error: the event was already recorded.
func Publish(ctx context.Context, js Publisher, e cloudevents.Event) (*jetstream.PubAck, error) {
	m, err := Message(e)
	if err != nil {
		return nil, err
	}
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(e.ID()), jetstream.WithExpectStream(StreamName))
	if err != nil {
		return nil, fmt.Errorf("publish %s for %s: %w", e.Type(), e.Subject(), err)
	}
	return ack, nil
}

// Emitter publishes events on behalf of one service. It is the usual way for
// a service to publish: it stamps the source and the time.
type Emitter struct {
	js      Publisher
	service string
	now     func() time.Time
}

// NewEmitter returns an Emitter for service publishing through js.
func NewEmitter(js Publisher, service string) *Emitter {
	return &Emitter{js: js, service: service, now: time.Now}
}

// Emit builds the event for d (see New for parts) and publishes it. It
// returns the event and whether JetStream dropped it as a duplicate.
func (em *Emitter) Emit(ctx context.Context, d Data, parts ...string) (cloudevents.Event, bool, error) {
	e, err := em.Build(d, parts...)
	if err != nil {
		return e, false, err
	}
	dup, err := em.Send(ctx, e)
	return e, dup, err
}

// Build makes the event Emit would publish for d, without publishing it:
// for a service that records its decisions and their events together and
// publishes after the record is stored (an outbox, see package state).
func (em *Emitter) Build(d Data, parts ...string) (cloudevents.Event, error) {
	if err := checkPublisher(em.service, d.EventType()); err != nil {
		return cloudevents.Event{}, err
	}
	return New(em.service, d, em.now(), parts...)
}

// Send publishes an event Build made, and reports whether JetStream dropped
// it as a duplicate: sending the same event again is harmless.
func (em *Emitter) Send(ctx context.Context, e cloudevents.Event) (bool, error) {
	if err := checkPublisher(em.service, Type(e.Type())); err != nil {
		return false, err
	}
	ack, err := Publish(ctx, em.js, e)
	if err != nil {
		return false, err
	}
	return ack.Duplicate, nil
}

// Decode parses a structured-mode message body into the CloudEvent and its
// typed data (a pointer, e.g. *ReviewApproved). It checks that the event is
// valid, that its type is known and that its subject matches its data.
func Decode(body []byte) (cloudevents.Event, Data, error) {
	var e cloudevents.Event
	if err := json.Unmarshal(body, &e); err != nil {
		return e, nil, fmt.Errorf("%w: not a JSON CloudEvent: %v", ErrMalformed, err)
	}
	if err := e.Validate(); err != nil {
		return e, nil, fmt.Errorf("%w: event %q: %v", ErrMalformed, e.ID(), err)
	}
	d, err := DataOf(e)
	if err != nil {
		return e, nil, err
	}
	if !strings.EqualFold(e.Subject(), d.Ref().String()) {
		return e, nil, fmt.Errorf("%w: event %q: subject %q does not match data.pr %s", ErrMalformed, e.ID(), e.Subject(), d.Ref())
	}
	return e, d, nil
}

// DataOf decodes the typed data of e.
func DataOf(e cloudevents.Event) (Data, error) {
	d, err := newData(Type(e.Type()))
	if err != nil {
		return nil, fmt.Errorf("%w: event %q: %v", ErrMalformed, e.ID(), err)
	}
	if err := json.Unmarshal(e.Data(), d); err != nil {
		return nil, fmt.Errorf("%w: event %q: data of %s: %v", ErrMalformed, e.ID(), e.Type(), err)
	}
	if err := CheckRef(d.Ref(), d.EventType()); err != nil {
		return nil, fmt.Errorf("%w: event %q: data.pr: %v", ErrMalformed, e.ID(), err)
	}
	return d, nil
}
