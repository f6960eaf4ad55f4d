package config

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svcConfig is a service config as services declare them.
type svcConfig struct {
	Common
	// PollInterval is a service-specific setting.
	PollInterval time.Duration `envconfig:"PRLOOP_POLL_INTERVAL" default:"30s" desc:"how often each repository is probed"`
}

func (c svcConfig) Validate() error { return c.Common.Validate() }

func TestLoad_Defaults(t *testing.T) {
	for _, k := range []string{"PRLOOP_DATA_DIR", "PRLOOP_NATS_URL", "PRLOOP_LOG_LEVEL"} {
		t.Setenv(k, "") // restored after the test
		require.NoError(t, os.Unsetenv(k))
	}
	t.Setenv("NATS_URL", "nats://elsewhere:4222") // an unprefixed name is not ours
	t.Setenv("LOG_LEVEL", "loud")
	var c svcConfig
	require.NoError(t, Load(&c))
	assert.Equal(t, "", c.NATSURL)
	assert.Equal(t, "./.prloop", c.DataDir)
	assert.Equal(t, "info", c.LogLevel)
	assert.Equal(t, 30*time.Second, c.PollInterval)
	assert.Equal(t, 8*time.Second, c.ShutdownGrace)
	assert.Equal(t, 1, c.StreamReplicas)
}

func TestLoad_Errors(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		wantMsgs []string
	}{
		{name: "bad duration", env: map[string]string{"PRLOOP_POLL_INTERVAL": "soon"}, wantMsgs: []string{`PRLOOP_POLL_INTERVAL="soon"`, "Duration"}},
		{name: "bad int", env: map[string]string{"PRLOOP_STREAM_REPLICAS": "three"}, wantMsgs: []string{`PRLOOP_STREAM_REPLICAS="three"`}},
		{name: "bad level", env: map[string]string{"PRLOOP_LOG_LEVEL": "loud"}, wantMsgs: []string{`PRLOOP_LOG_LEVEL="loud"`, "debug, info, warn or error"}},
		{name: "bad format", env: map[string]string{"PRLOOP_LOG_FORMAT": "xml"}, wantMsgs: []string{"PRLOOP_LOG_FORMAT"}},
		{name: "replicas out of range", env: map[string]string{"PRLOOP_STREAM_REPLICAS": "7"}, wantMsgs: []string{"PRLOOP_STREAM_REPLICAS=7", "1 to 5"}},
		{name: "bad http addr", env: map[string]string{"PRLOOP_HTTP_ADDR": "8080"}, wantMsgs: []string{"PRLOOP_HTTP_ADDR", "host:port"}},
		{name: "no data dir", env: map[string]string{"PRLOOP_DATA_DIR": " "}, wantMsgs: []string{"PRLOOP_DATA_DIR is empty"}},
		{name: "several at once", env: map[string]string{"PRLOOP_LOG_LEVEL": "x", "PRLOOP_SHUTDOWN_GRACE": "-1s"}, wantMsgs: []string{"PRLOOP_LOG_LEVEL", "PRLOOP_SHUTDOWN_GRACE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var c svcConfig
			err := Load(&c)
			if len(tt.wantMsgs) == 0 {
				return
			}
			require.Error(t, err)
			for _, m := range tt.wantMsgs {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

func TestUsage_ListsEachVariableOnce(t *testing.T) {
	t.Parallel()
	u := Usage(&svcConfig{}, &svcConfig{})
	assert.Contains(t, u, "PRLOOP_POLL_INTERVAL (default 30s)")
	assert.Equal(t, 1, countLines(u, "PRLOOP_NATS_URL"))
}

func countLines(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}

func TestCheckBackoff_NamesTheVariableAndEveryBadDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		delays []time.Duration
		want   []string
	}{
		{name: "none set"},
		{name: "all positive", delays: []time.Duration{time.Second, time.Minute}},
		{name: "zero", delays: []time.Duration{time.Second, 0}, want: []string{"PRLOOP_X_BACKOFF: 0s is not a positive duration"}},
		{name: "negative and zero", delays: []time.Duration{-time.Second, 0}, want: []string{"-1s is not", "0s is not"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckBackoff("PRLOOP_X_BACKOFF", tc.delays)
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestUsage_DescribesEachVariable: --help says what each variable is, from
// its desc tag (issue #30: run -h listed 60 names without a word each).
func TestUsage_DescribesEachVariable(t *testing.T) {
	t.Parallel()
	u := Usage(&svcConfig{})
	assert.Contains(t, u, "  PRLOOP_POLL_INTERVAL (default 30s)\n      how often each repository is probed\n")
	assert.Contains(t, u, "  PRLOOP_NATS_URL\n      NATS server or cluster")
}

// TestVars_FirstDeclarationWins: a variable several configurations read is
// listed once, as the first declares it.
func TestVars_FirstDeclarationWins(t *testing.T) {
	t.Parallel()
	type other struct {
		PollInterval time.Duration `envconfig:"PRLOOP_POLL_INTERVAL" default:"1m" desc:"another"`
		Extra        []string      `envconfig:"PRLOOP_EXTRA" desc:"an extra"`
	}
	vars, err := Vars(&svcConfig{}, &other{})
	require.NoError(t, err)
	byName := map[string]Var{}
	for _, v := range vars {
		assert.NotContains(t, byName, v.Name, "listed once")
		byName[v.Name] = v
	}
	assert.Equal(t, Var{Name: "PRLOOP_POLL_INTERVAL", Default: "30s", Desc: "how often each repository is probed", Type: "Duration"}, byName["PRLOOP_POLL_INTERVAL"])
	assert.Equal(t, "Comma-separated list of String", byName["PRLOOP_EXTRA"].Type)
	assert.Equal(t, "PRLOOP_NATS_URL", vars[0].Name, "in declaration order")
}
