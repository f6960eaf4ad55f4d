package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDescribeVersion: a release's stamp wins, then the module version go
// install records, then the commit of a build from a checkout.
func TestDescribeVersion(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified, at string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}, {Key: "vcs.time", Value: at}}
	}
	tests := []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{name: "release stamp", stamped: "v1.2.3", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, want: "v1.2.3"},
		{name: "go install of a tag", stamped: "dev", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, want: "v0.4.0"},
		{name: "checkout, clean", stamped: "dev", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "false", "2026-11-26T10:00:00Z")},
			want: "dev+0123456789ab (2026-11-26T10:00:00Z)"},
		{name: "checkout, changed", stamped: "dev", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "true", "")},
			want: "dev+0123456789ab-dirty"},
		{name: "no build information (go run outside a checkout)", stamped: "dev", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, want: "dev"},
		{name: "none at all", stamped: "dev", want: "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, describeVersion(tt.stamped, tt.info))
		})
	}
}
