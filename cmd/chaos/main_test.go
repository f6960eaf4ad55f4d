package main

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim/simci"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		prs     int
		repos   int
		faults  []string
		limit   time.Duration
		wantErr string
	}{
		{name: "defaults", args: nil, prs: 60, repos: 4, faults: faultKinds, limit: 2*time.Minute + 120*time.Second},
		{name: "short", args: []string{"-short"}, prs: 20, repos: 3, faults: faultKinds, limit: 4 * time.Minute},
		{name: "short with prs", args: []string{"-short", "-prs", "5"}, prs: 5, repos: 3, faults: faultKinds, limit: 4 * time.Minute},
		{name: "some faults", args: []string{"-faults", "kill, stop", "-duration-limit", "1m"}, prs: 60, repos: 4, faults: []string{"kill", "stop"}, limit: time.Minute},
		{name: "no faults", args: []string{"-faults", "none"}, prs: 60, repos: 4, limit: 4 * time.Minute},
		{name: "unknown fault", args: []string{"-faults", "kill,flood"}, wantErr: `unknown fault "flood"`},
		{name: "no PRs", args: []string{"-prs", "0"}, wantErr: "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseFlags(append(tt.args, "-seed", "42"))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.prs, o.prs)
			assert.Equal(t, tt.repos, o.repos)
			assert.Equal(t, int64(42), o.seed)
			assert.Equal(t, tt.limit, o.durationLimit)
			var got []string
			for _, f := range faultKinds {
				if o.faults[f] {
					got = append(got, f)
				}
			}
			assert.Equal(t, tt.faults, got)
		})
	}
}

// TestReportCI_EveryHeadUntilMergedOrClosed: the simulated CI reports on
// each new head, an escalation does not stop it (seed 33: a queue waited
// for checks on an escalated, re-approved PR's updated head), and a merge
// or close does.
func TestReportCI_EveryHeadUntilMergedOrClosed(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "chaos", Repo: "r0", Number: 1}
	rec := &recorder{}
	add := func(d events.Data) {
		rec.mu.Lock()
		rec.all = append(rec.all, seen{typ: d.EventType(), data: d})
		rec.mu.Unlock()
	}
	var mu sync.Mutex
	head, reported := "h1", []string{}
	setHead := func(h string) { mu.Lock(); head = h; mu.Unlock() }
	got := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(reported) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		simci.ReportNew(t.Context(), time.Millisecond, func() bool { return rec.ended(pr) },
			func() []string { mu.Lock(); defer mu.Unlock(); return []string{head} },
			func(sha string) error { mu.Lock(); reported = append(reported, sha); mu.Unlock(); return nil })
	}()
	require.Eventually(t, func() bool { return slices.Equal(got(), []string{"h1"}) }, 10*time.Second, time.Millisecond)
	add(&events.Escalated{Base: events.Base{PR: pr}, Reason: events.ReasonReviewTimeout})
	setHead("h2")
	require.Eventually(t, func() bool { return slices.Equal(got(), []string{"h1", "h2"}) }, 10*time.Second, time.Millisecond, "an escalated PR's new head gets its checks")
	add(&events.Merged{Base: events.Base{PR: pr}})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the CI kept running after the merge")
	}
	assert.Equal(t, []string{"h1", "h2"}, got(), "each head once")
}
