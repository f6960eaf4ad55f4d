package merger

import (
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/events"
)

// minutes is a window of measurements of the given minutes.
func minutes(prefix string, ms ...int) eta.Samples {
	var s eta.Samples
	for i, m := range ms {
		s = append(s, eta.Sample{SHA: prefix + string(rune('a'+i)), Took: time.Duration(m) * time.Minute})
	}
	return s
}

// TestQueueETA_WhatPRMergeQueuedSays: the estimate from the position, the
// batch it rides in and the base's median CI time, unknown below three
// measurements; a speculative queue prefers its candidates' CI time, a
// serial one its heads'.
func TestQueueETA_WhatPRMergeQueuedSays(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		pos   int
		mode  string
		depth int
		ci    CITimes
		want  events.QueueETA
	}{
		{name: "nothing measured: unknown", pos: 1, mode: QueueSerial, depth: 4, want: events.QueueETA{Depth: 1}},
		{name: "two measurements: still unknown", pos: 1, mode: QueueSerial, ci: CITimes{Heads: minutes("h", 10, 12)}, want: events.QueueETA{Depth: 1, Measurements: 2}},
		{name: "serial, third: three CI runs", pos: 3, mode: QueueSerial, depth: 4, ci: CITimes{Heads: minutes("h", 9, 10, 30)},
			want: events.QueueETA{Known: true, Seconds: 1800, CIMedianSeconds: 600, Measurements: 3, Depth: 1}},
		{name: "speculative, fifth at depth 4: the second batch", pos: 5, mode: QueueSpeculative, depth: 4,
			ci:   CITimes{Candidates: minutes("c", 8, 8, 8), Heads: minutes("h", 60, 60, 60)},
			want: events.QueueETA{Known: true, Seconds: 960, CIMedianSeconds: 480, Measurements: 3, Depth: 4}},
		{name: "speculative without candidate times: the heads'", pos: 2, mode: QueueSpeculative, depth: 4,
			ci:   CITimes{Candidates: minutes("c", 8), Heads: minutes("h", 5, 5, 5)},
			want: events.QueueETA{Known: true, Seconds: 300, CIMedianSeconds: 300, Measurements: 3, Depth: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, *queueETA(tt.pos, tt.mode, tt.depth, tt.ci))
		})
	}
}

// TestCandidateSamples_FromThePushToTheVerdict: a kept candidate whose
// checks are conclusive is measured from its push; pending ones and new
// ones are not.
func TestCandidateSamples_FromThePushToTheVerdict(t *testing.T) {
	t.Parallel()
	now := stepT0.Add(time.Hour)
	c := func(sha string, ago time.Duration) Candidate {
		return Candidate{SHA: sha, BuiltAt: now.Add(-ago)}
	}
	chain := []Candidate{c("green", 10*time.Minute), c("failed", 4*time.Minute), c("pending", 2*time.Minute), c("new", 0)}
	checks := []Checks{{State: ChecksGreen}, {State: ChecksFailed}, {State: ChecksPending}, {State: ChecksGreen}}
	got := candidateSamples(chain, checks, 3, now)
	assert.Equal(t, []eta.Sample{{SHA: "green", Took: 10 * time.Minute}, {SHA: "failed", Took: 4 * time.Minute}}, got)
}

// TestHeadSample_OnlyHeadsPrloopPushed: the serial queue measures a head
// from its branch update to a conclusive verdict; a head it did not push
// (its CI began before prloop knew) and a pending one are not measured.
func TestHeadSample_OnlyHeadsPrloopPushed(t *testing.T) {
	t.Parallel()
	f := newStepFixture()
	since := stepT0
	ci := func(state string) *ChecksInput {
		return &ChecksInput{Own: DefaultStatusContext, Combined: &gh.CombinedStatus{Statuses: []*gh.RepoStatus{{Context: gh.String("ci"), State: gh.String(state)}}}}
	}
	pushed := f.e
	pushed.Head, pushed.UpdateAnnounced, pushed.WaitingSince = "h2", "h2", since
	notPushed := pushed
	notPushed.UpdateAnnounced = ""
	tests := []struct {
		name   string
		e      Entry
		checks *ChecksInput
		head   string
		want   time.Duration
		ok     bool
	}{
		{name: "green on the head prloop pushed", e: pushed, checks: ci("success"), head: "h2", want: 7 * time.Minute, ok: true},
		{name: "failed counts too: a verdict", e: pushed, checks: ci("failure"), head: "h2", want: 7 * time.Minute, ok: true},
		{name: "pending: not yet", e: pushed, checks: ci("pending"), head: "h2"},
		{name: "a head prloop did not push", e: notPushed, checks: ci("success"), head: "h2"},
		{name: "the head moved", e: pushed, checks: ci("success"), head: "h3"},
		{name: "checks not read", e: pushed, head: "h2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := Observation{Now: since.Add(7 * time.Minute), PR: PRView{Open: true, HeadSHA: tt.head}, Checks: tt.checks}
			got, ok := headSample(tt.e, o, Policy{RequireChecks: true})
			assert.Equal(t, tt.ok, ok)
			if tt.ok {
				assert.Equal(t, eta.Sample{SHA: "h2", Took: tt.want}, got)
			}
		})
	}
}
