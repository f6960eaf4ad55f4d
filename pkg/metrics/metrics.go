// Package metrics defines prloop's Prometheus metrics, once, for every
// service: names prefixed prloop_, each with its help text and a small,
// fixed set of labels (never a PR number or a SHA).
//
// Metrics are created on a registry passed in, never on client_golang's
// global default registry: a process has one registry (app.Runtime makes
// it), which the services of the all-in-one binary share, and a test makes
// its own. The constructors (NewGitHub, NewConsumer, NewPoller …) may be
// called more than once on the same registry: the second call returns
// metrics backed by the collectors the first registered, so two services
// that both consume events count into the same prloop_consumer_* families.
// A nil registry gives working metrics that are exported nowhere.
//
// Packages events and github stay free of Prometheus: they expose observer
// interfaces (events.ConsumeObserver, github.Observer and
// github.RetryObserver), which Consumer and GitHub implement.
package metrics

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every prloop metric.
const namespace = "prloop"

// NewRegistry returns an empty registry with the Go runtime and process
// collectors (go_*, process_*) registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus text (or OpenMetrics) format. A
// collector that fails is reported in the response and the rest is still
// served.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg, // promhttp_metric_handler_errors_total
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// register registers c on reg and returns it, or returns the equal
// collector registered before. Any other failure is a programming error in
// this package's definitions (a name clash, bad label names), which the
// tests catch, so it panics as prometheus.MustRegister does.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("metrics: register: %v", err))
}

func counterVec(reg prometheus.Registerer, name, help string, labels ...string) *prometheus.CounterVec {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels))
}

func gaugeVec(reg prometheus.Registerer, name, help string, labels ...string) *prometheus.GaugeVec {
	return register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels))
}

func histogramVec(reg prometheus.Registerer, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels))
}

// oneOf returns v when it is one of known, else "other": label values that
// come from data (an event's reason code) must not add series without bound.
func oneOf[S ~string](v S, known ...S) string {
	for _, k := range known {
		if v == k {
			return string(v)
		}
	}
	return "other"
}
