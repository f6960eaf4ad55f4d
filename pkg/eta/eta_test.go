package eta

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func samples(mins ...int) Samples {
	var s Samples
	for i, m := range mins {
		s = append(s, Sample{SHA: "sha" + strconv.Itoa(i), Took: time.Duration(m) * time.Minute})
	}
	return s
}

func TestSamples_RollingMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		have  Samples
		add   Sample
		added bool
		want  Stat
	}{
		{name: "first measurement", add: Sample{SHA: "a", Took: 10 * time.Minute}, added: true, want: Stat{Median: 10 * time.Minute, N: 1}},
		{name: "odd count: the middle one", have: samples(30, 10), add: Sample{SHA: "c", Took: 12 * time.Minute}, added: true, want: Stat{Median: 12 * time.Minute, N: 3}},
		{name: "even count: the mean of the middle two", have: samples(10, 20, 40), add: Sample{SHA: "d", Took: 30 * time.Minute}, added: true, want: Stat{Median: 25 * time.Minute, N: 4}},
		{name: "a commit measured twice counts once", have: samples(10, 20, 40), add: Sample{SHA: "sha1", Took: 99 * time.Minute}, added: false, want: Stat{Median: 20 * time.Minute, N: 3}},
		{name: "no duration is no measurement", have: samples(10), add: Sample{SHA: "z"}, added: false, want: Stat{Median: 10 * time.Minute, N: 1}},
		{name: "the window drops the oldest", have: samples(100, 100, 100, 100, 100, 100, 100, 1, 1, 1, 1, 1, 1, 1, 1), add: Sample{SHA: "new", Took: time.Minute}, added: true, want: Stat{Median: time.Minute, N: Window}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, added := tt.have.Add(tt.add)
			assert.Equal(t, tt.added, added)
			assert.Equal(t, tt.want, got.Stat())
			assert.LessOrEqual(t, len(got), Window)
		})
	}
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	ten := Stat{Median: 10 * time.Minute, N: 3}
	few := Stat{Median: 5 * time.Minute, N: 2}
	tests := []struct {
		name            string
		position, depth int
		stats           []Stat
		want            time.Duration
		ok              bool
	}{
		{name: "serial, next", position: 1, depth: 1, stats: []Stat{ten}, want: 10 * time.Minute, ok: true},
		{name: "serial, third: one CI run per PR", position: 3, depth: 1, stats: []Stat{ten}, want: 30 * time.Minute, ok: true},
		{name: "speculative, in the first batch", position: 4, depth: 4, stats: []Stat{ten}, want: 10 * time.Minute, ok: true},
		{name: "speculative, in the second batch", position: 5, depth: 4, stats: []Stat{ten}, want: 20 * time.Minute, ok: true},
		{name: "depth 0 is serial", position: 2, depth: 0, stats: []Stat{ten}, want: 20 * time.Minute, ok: true},
		{name: "unknown below three measurements", position: 1, depth: 1, stats: []Stat{few}},
		{name: "the first known median in order of preference", position: 2, depth: 1, stats: []Stat{few, ten}, want: 20 * time.Minute, ok: true},
		{name: "nothing measured", position: 1, depth: 4},
		{name: "not queued", position: 0, depth: 1, stats: []Stat{ten}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Estimate(tt.position, tt.depth, tt.stats...)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestApprox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{name: "under a minute", d: 20 * time.Second, want: "~1m"},
		{name: "minutes, rounded", d: 13*time.Minute + 40*time.Second, want: "~14m"},
		{name: "hours and minutes", d: 65 * time.Minute, want: "~1h05m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Approx(tt.d))
		})
	}
}
