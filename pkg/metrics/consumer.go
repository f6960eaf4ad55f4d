package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prloop/prloop/pkg/events"
)

// Consumer counts the deliveries of the services' durable consumers, as
// their events.ConsumerConfig.Observer.
type Consumer struct {
	deliveries   *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	handled      *prometheus.CounterVec
	panics       *prometheus.CounterVec
	deadLetters  *prometheus.GaugeVec
	duration     *prometheus.HistogramVec
	lag          *prometheus.HistogramVec
}

var (
	_ events.ConsumeObserver = (*Consumer)(nil)
	_ events.LagObserver     = (*Consumer)(nil)
)

// lagBuckets span an idle bus (a millisecond) to a consumer far behind.
var lagBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30}

// handleBuckets span a state update (milliseconds) to an agent run that
// fixes review feedback (tens of minutes).
var handleBuckets = []float64{0.005, 0.025, 0.1, 0.5, 2.5, 10, 60, 300, 900, 3600}

// NewConsumer creates (or finds) the prloop_consumer_* metrics on reg.
func NewConsumer(reg prometheus.Registerer) *Consumer {
	return &Consumer{
		deliveries: counterVec(reg, "consumer_deliveries_total",
			"Events delivered to a durable consumer (redeliveries included), by consumer and event type (unknown when undecodable).",
			"consumer", "type"),
		redeliveries: counterVec(reg, "consumer_redeliveries_total",
			"Events delivered to a durable consumer again (after a handler error, a missed ack or a restart), by consumer and event type.",
			"consumer", "type"),
		handled: counterVec(reg, "consumer_handled_total",
			"Deliveries handled, by consumer, event type and outcome: ack, retry (nak with backoff) or dead_letter.",
			"consumer", "type", "outcome"),
		panics: counterVec(reg, "consumer_panics_total",
			"Handler panics (recovered and retried as errors), by consumer and event type.",
			"consumer", "type"),
		deadLetters: gaugeVec(reg, "dlq_messages",
			"Messages in the dead-letter stream PRLOOP_DLQ, by the consumer that gave up on them; 'prloop dlq list' shows them.",
			"consumer"),
		duration: histogramVec(reg, "consumer_handle_duration_seconds",
			"How long a consumer's handler ran for one delivery.", handleBuckets, "consumer"),
		lag: histogramVec(reg, "consumer_lag_seconds",
			"From an event being stored in the stream to a consumer's handler starting on it (first deliveries).", lagBuckets, "consumer"),
	}
}

// Delivered implements events.ConsumeObserver.
func (c *Consumer) Delivered(durable string, t events.Type, delivered uint64) {
	typ := typeLabel(t)
	c.deliveries.WithLabelValues(durable, typ).Inc()
	if delivered > 1 {
		c.redeliveries.WithLabelValues(durable, typ).Inc()
	}
}

// Started implements events.LagObserver.
func (c *Consumer) Started(durable string, _ events.Type, lag time.Duration) {
	c.lag.WithLabelValues(durable).Observe(lag.Seconds())
}

// Handled implements events.ConsumeObserver.
func (c *Consumer) Handled(durable string, t events.Type, outcome string, d time.Duration) {
	c.handled.WithLabelValues(durable, typeLabel(t), outcome).Inc()
	c.duration.WithLabelValues(durable).Observe(d.Seconds())
}

func typeLabel(t events.Type) string {
	if t == "" {
		return "unknown"
	}
	return oneOf(t, events.Types...)
}

// Panicked implements events.ConsumeObserver.
func (c *Consumer) Panicked(durable string, t events.Type) {
	c.panics.WithLabelValues(durable, typeLabel(t)).Inc()
}

// DeadLetters implements events.ConsumeObserver.
func (c *Consumer) DeadLetters(durable string, n uint64) {
	c.deadLetters.WithLabelValues(durable).Set(float64(n))
}
