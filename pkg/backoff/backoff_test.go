package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/backoff"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	const s, m = time.Second, time.Minute
	tests := []struct {
		name string
		p    backoff.Policy
		n    []int
		want []time.Duration
	}{
		{name: "doubles from the base", p: backoff.Policy{Base: s, MaxDoublings: 10},
			n: []int{1, 2, 3, 4}, want: []time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{name: "n below 1 counts as 1", p: backoff.Policy{Base: s, MaxDoublings: 10},
			n: []int{-3, 0}, want: []time.Duration{s, s}},
		{name: "stops doubling after MaxDoublings", p: backoff.Policy{Base: s, MaxDoublings: 4},
			n: []int{5, 6, 100}, want: []time.Duration{16 * s, 16 * s, 16 * s}},
		{name: "no doublings keeps the base", p: backoff.Policy{Base: 3 * s},
			n: []int{1, 2, 9}, want: []time.Duration{3 * s, 3 * s, 3 * s}},
		{name: "capped at Max", p: backoff.Policy{Base: 10 * s, MaxDoublings: 20, Max: 5 * m},
			n: []int{5, 6, 7, 21, 1000}, want: []time.Duration{160 * s, 5 * m, 5 * m, 5 * m, 5 * m}},
		{name: "a base over Max is Max", p: backoff.Policy{Base: 10 * m, MaxDoublings: 3, Max: 5 * m},
			n: []int{1, 2}, want: []time.Duration{5 * m, 5 * m}},
		{name: "never overflows", p: backoff.Policy{Base: time.Hour, MaxDoublings: 100},
			n: []int{60, 101}, want: []time.Duration{math.MaxInt64, math.MaxInt64}},
		{name: "zero base waits nothing", p: backoff.Policy{MaxDoublings: 5, Jitter: 0.5},
			n: []int{1, 3}, want: []time.Duration{0, 0}},
		{name: "jitter from a seeded source is repeatable", p: backoff.Policy{Base: s, MaxDoublings: 4, Jitter: 0.25,
			Rand: func(n int64) int64 { return n - 1 }},
			n: []int{1, 2, 5}, want: []time.Duration{s + s/4, 2*s + s/2, 16*s + 4*s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, n := range tt.n {
				assert.Equal(t, tt.want[i], tt.p.Delay(n), "Delay(%d)", n)
			}
		})
	}
}
