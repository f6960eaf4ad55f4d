package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
