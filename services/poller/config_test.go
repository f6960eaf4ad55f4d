package poller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
)

func TestConfig_FromEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string
		check   func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c Config) {
				p, err := c.Protocols()
				require.NoError(t, err)
				assert.Equal(t, "emoji", string(p[0]))
				assert.Equal(t, "https://api.github.com/", c.APIURL)
				assert.Equal(t, "human-review-required", c.EscalationLabel)
				assert.False(t, c.ApprovalSurvivesConflictFix, "a resolved conflict is reviewed again")
			},
		},
		{
			name: "the approval survives a conflict fix", env: map[string]string{"PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX": "true"},
			check: func(t *testing.T, c Config) { assert.True(t, c.ApprovalSurvivesConflictFix) },
		},
		{
			name: "set but empty lists mean none",
			env:  map[string]string{"PRLOOP_REPOS": "", "PRLOOP_REVIEWERS": "", "PRLOOP_WATCH_AUTHORS": ""},
		},
		{
			name: "an owner's repositories, discovered", env: map[string]string{"PRLOOP_REPOS": "acme/*,acme/widgets"},
			check: func(t *testing.T, c Config) {
				assert.Equal(t, []string{"acme"}, c.RepoPatterns())
				assert.Len(t, c.RepoRefs(), 1, "the pattern is no repository to check at start")
				assert.True(t, c.Discovers())
				assert.Equal(t, "10m0s", c.DiscoveryInterval.String())
				assert.Equal(t, "10m0s", c.IdleProbeInterval.String())
				assert.Equal(t, 20, c.Concurrency)
			},
		},
		{name: "every repository of the installation needs App auth", env: map[string]string{"PRLOOP_REPOS": "*"}, wantErr: []string{"PRLOOP_REPOS", "GitHub App"}},
		{name: "bad owner pattern", env: map[string]string{"PRLOOP_REPOS": "not an owner/*"}, wantErr: []string{"PRLOOP_REPOS", "owner/*"}},
		{name: "concurrency above GitHub's limit", env: map[string]string{"PRLOOP_GITHUB_CONCURRENCY": "101"}, wantErr: []string{"PRLOOP_GITHUB_CONCURRENCY"}},
		{name: "idle probes more often than the interval", env: map[string]string{"PRLOOP_IDLE_PROBE_INTERVAL": "10s"}, wantErr: []string{"PRLOOP_IDLE_PROBE_INTERVAL"}},
		{name: "bad repo", env: map[string]string{"PRLOOP_REPOS": "acme/widgets,not a repo"}, wantErr: []string{"PRLOOP_REPOS", "not a repo"}},
		{name: "unknown protocol", env: map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "emoji,votes"}, wantErr: []string{"PRLOOP_REVIEW_PROTOCOLS", "votes"}},
		{name: "quorum without reviewers", env: map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "quorum"}, wantErr: []string{"PRLOOP_REQUIRED_REVIEWERS"}},
		{name: "interval too short", env: map[string]string{"PRLOOP_POLL_INTERVAL": "10ms"}, wantErr: []string{"PRLOOP_POLL_INTERVAL"}},
		{name: "bad duration", env: map[string]string{"PRLOOP_REVIEW_TIMEOUT": "two hours"}, wantErr: []string{`PRLOOP_REVIEW_TIMEOUT="two hours"`}},
		{name: "bad API URL", env: map[string]string{"PRLOOP_GITHUB_API_URL": "ftp://x"}, wantErr: []string{"PRLOOP_GITHUB_API_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var c Config
			err := config.Load(&c)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, m := range tt.wantErr {
					assert.Contains(t, err.Error(), m)
				}
				return
			}
			require.NoError(t, err)
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}
