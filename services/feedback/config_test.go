package feedback

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghref"
)

func TestConfig_Defaults(t *testing.T) {
	var cfg Config
	t.Setenv("PRLOOP_REVIEWERS", "alice,bob")
	require.NoError(t, config.Load(&cfg))
	assert.Equal(t, 2, cfg.Concurrency)
	assert.Empty(t, cfg.AgentCmd)
	spec, err := cfg.agentSpec(true)
	require.NoError(t, err)
	assert.Equal(t, []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits", "--max-turns", "101"}, spec.Args,
		"the default agent is the Claude Code preset, its turns bounded")
	assert.Equal(t, 10*time.Minute, cfg.AgentTimeout)
	assert.Equal(t, 3, cfg.AgentAttempts)
	assert.Equal(t, 2, cfg.MaxFixCycles)
	assert.Equal(t, "human-review-required", cfg.EscalationLabel)
	assert.Equal(t, "prloop", cfg.GitAuthorName)
	assert.Equal(t, "prloop@users.noreply.github.com", cfg.GitAuthorEmail)
	assert.Equal(t, []string{"alice", "bob"}, cfg.Reviewers, "the review policy is the poller's")
	assert.Equal(t, []time.Duration{2 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute}, cfg.RetryBackoff)
	assert.True(t, cfg.NotifyReviewers, "reviewers are told of a fix by default")
	assert.False(t, cfg.DryRun)
}

func TestConfig_NotifyReviewers(t *testing.T) {
	tests := []struct {
		name, value string
		want        bool
		wantErr     string
	}{
		{name: "off", value: "false", want: false},
		{name: "on", value: "true", want: true},
		{name: "not a boolean", value: "sometimes", wantErr: "PRLOOP_NOTIFY_REVIEWERS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PRLOOP_NOTIFY_REVIEWERS", tt.value)
			var cfg Config
			err := config.Load(&cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.NotifyReviewers)
			assert.NoError(t, cfg.Validate())
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	tmpl := filepath.Join(t.TempDir(), "bad.tmpl")
	require.NoError(t, os.WriteFile(tmpl, []byte("{{.Ref"), 0o644))
	valid := func() Config {
		var c Config
		require.NoError(t, config.Load(&c))
		return c
	}
	tests := []struct {
		name    string
		mut     func(*Config)
		wantErr string
	}{
		{name: "defaults are valid", mut: func(*Config) {}},
		{name: "command without a command", mut: func(c *Config) { c.Agent, c.AgentCmd = "command", " " }, wantErr: "PRLOOP_AGENT=command needs PRLOOP_AGENT_CMD"},
		{name: "unknown preset", mut: func(c *Config) { c.Agent = "aider" }, wantErr: "PRLOOP_AGENT=aider"},
		{name: "bad prices", mut: func(c *Config) { c.AgentPrices = "gpt=1" }, wantErr: "PRLOOP_AGENT_PRICES"},
		{name: "negative cost budget", mut: func(c *Config) { c.AgentDailyCostUSD = -1 }, wantErr: "PRLOOP_AGENT_DAILY_COST_USD"},
		{name: "no attempts", mut: func(c *Config) { c.AgentAttempts = 0 }, wantErr: "PRLOOP_AGENT_ATTEMPTS=0"},
		{name: "no concurrency", mut: func(c *Config) { c.Concurrency = 0 }, wantErr: "PRLOOP_FEEDBACK_CONCURRENCY=0"},
		{name: "negative cycles", mut: func(c *Config) { c.MaxFixCycles = -1 }, wantErr: "PRLOOP_MAX_FIX_CYCLES=-1"},
		{name: "zero timeout", mut: func(c *Config) { c.AgentTimeout = 0 }, wantErr: "PRLOOP_AGENT_TIMEOUT=0s"},
		{name: "lease too short for the kill grace", mut: func(c *Config) { c.LeaseTTL = 15 * time.Second }, wantErr: "PRLOOP_FEEDBACK_LEASE_TTL=15s: want more than 3 times"},
		{name: "lease under a second", mut: func(c *Config) { c.LeaseTTL = time.Millisecond }, wantErr: "PRLOOP_FEEDBACK_LEASE_TTL=1ms"},
		{name: "bad template", mut: func(c *Config) { c.PromptTemplate = tmpl }, wantErr: "PRLOOP_PROMPT_TEMPLATE"},
		{name: "missing template", mut: func(c *Config) { c.PromptTemplate = "/nope.tmpl" }, wantErr: "PRLOOP_PROMPT_TEMPLATE"},
		{name: "bad protocol", mut: func(c *Config) { c.ReviewProtocols = []string{"vibes"} }, wantErr: "PRLOOP_REVIEW_PROTOCOLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mut(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestRecord_Handled(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	req := Request{PR: pr, HeadSHA: "abc", FixCycle: 0, EventID: "e1"}
	tests := []struct {
		name     string
		rec      Record
		req      Request
		handled  bool
		inFlight bool
	}{
		{name: "no record", rec: Record{}, req: req},
		{name: "in flight", rec: Record{Key: req.Key(), EventID: "e1", Runs: 1}, req: req, inFlight: true},
		{name: "addressed: any copy is a duplicate", rec: Record{Key: req.Key(), EventID: "e0", Outcome: OutcomeAddressed}, req: req, handled: true},
		{name: "escalated: the same event is a duplicate", rec: Record{Key: req.Key(), EventID: "e1", Outcome: OutcomeEscalated}, req: req, handled: true},
		{name: "escalated: a new event after a human's reset is new work", rec: Record{Key: req.Key(), EventID: "e0", Outcome: OutcomeEscalated}, req: req},
		{name: "another head", rec: Record{Key: Request{PR: pr, HeadSHA: "def"}.Key(), Outcome: OutcomeAddressed}, req: req},
		{name: "another cycle", rec: Record{Key: Request{PR: pr, HeadSHA: "abc", FixCycle: 1}.Key(), Outcome: OutcomeAddressed}, req: req},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.handled, tt.rec.Handled(tt.req))
			assert.Equal(t, tt.inFlight, tt.rec.InFlight(tt.req))
		})
	}
}
