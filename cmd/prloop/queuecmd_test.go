package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

func TestParseUntil_ATimeOrADurationFromNow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, in string
		want     time.Time
		usage    bool
	}{
		{name: "none: until unfrozen", in: ""},
		{name: "a duration", in: "2h", want: now.Add(2 * time.Hour)},
		{name: "an RFC 3339 time", in: "2026-11-28T18:00:00+01:00", want: time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)},
		{name: "a time in the past", in: "2026-11-27T11:00:00Z", usage: true},
		{name: "a negative duration", in: "-1h", usage: true},
		{name: "neither", in: "tomorrow", usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseUntil(tc.in, now)
			if tc.usage {
				require.Error(t, err)
				assert.True(t, errors.Is(err, errUsage), err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "%s, want %s", got, tc.want)
		})
	}
}

func TestPrintQueues_FreezesThenEachQueueInMergeOrder(t *testing.T) {
	t.Parallel()
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	b := prstatus.NewBoard()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, d := range []events.Data{
		&events.ReviewApproved{Base: events.Base{PR: repo.PR(1), HeadSHA: "a"}, Status: events.StatusApproved},
		&events.MergeQueued{Base: events.Base{PR: repo.PR(1), HeadSHA: "a"}, BaseBranch: "main", Position: 1},
		&events.ReviewApproved{Base: events.Base{PR: repo.PR(2), HeadSHA: "b"}, Status: events.StatusApproved},
		&events.MergeQueued{Base: events.Base{PR: repo.PR(2), HeadSHA: "b"}, BaseBranch: "main", Position: 1, Priority: true},
		&events.QueueFrozen{Base: events.Base{PR: repo.PR(events.RepoNumber)}, BaseBranch: "main", Reason: "release 2.0", Actor: "cli"},
	} {
		b.Apply(d, at.Add(time.Duration(i)*time.Second))
	}
	var out bytes.Buffer
	require.NoError(t, printQueues(&out, b))
	assert.Equal(t, `FROZEN        BASE  REASON       UNTIL     BY
acme/widgets  main  release 2.0  unfrozen  cli

QUEUE              POS  PR              STATUS
acme/widgets main  1    acme/widgets#2  queue frozen: release 2.0 — approved — 1st in the merge queue for main (priority)
acme/widgets main  2    acme/widgets#1  queue frozen: release 2.0 — approved — 2nd in the merge queue for main
`, out.String())
}
