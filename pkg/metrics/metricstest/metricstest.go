// Package metricstest reads metrics back from a registry in tests.
package metricstest

import (
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value gathers g and returns the sum over the series of family name whose
// labels include labels (name, value pairs): a counter's or gauge's value,
// a histogram's or summary's count of observations. It returns 0 when no
// series matches, and NaN when gathering fails or labels is odd, so that a
// comparison with an expected value fails. Safe to call from any goroutine
// (require.Eventually conditions).
func Value(g prometheus.Gatherer, name string, labels ...string) float64 {
	if len(labels)%2 != 0 {
		return math.NaN()
	}
	mfs, err := g.Gather()
	if err != nil {
		return math.NaN()
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				sum += valueOf(m)
			}
		}
	}
	return sum
}

// Families returns the names of the metric families g gathers, sorted, or
// nil when gathering fails.
func Families(g prometheus.Gatherer) []string {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(mfs))
	for _, mf := range mfs {
		out = append(out, mf.GetName())
	}
	slices.Sort(out)
	return out
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}
