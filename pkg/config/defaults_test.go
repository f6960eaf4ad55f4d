package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/config/configtest"
)

// sample declares one variable of each kind a configuration uses.
type sample struct {
	config.Common
	Inner struct {
		Depth int `envconfig:"PRLOOP_TEST_DEPTH" default:"3"`
	}
	Name      string          `envconfig:"PRLOOP_TEST_NAME" default:"prloop"`
	On        bool            `envconfig:"PRLOOP_TEST_ON" default:"true"`
	Wait      time.Duration   `envconfig:"PRLOOP_TEST_WAIT" default:"90s"`
	Cost      float64         `envconfig:"PRLOOP_TEST_COST" default:"2.5"`
	Bytes     uint32          `envconfig:"PRLOOP_TEST_BYTES" default:"0x400"`
	Words     []string        `envconfig:"PRLOOP_TEST_WORDS" default:"a,b"`
	Waits     []time.Duration `envconfig:"PRLOOP_TEST_WAITS" default:"1s,2s"`
	NoDefault int             `envconfig:"PRLOOP_TEST_NO_DEFAULT"`
}

func (sample) Validate() error { return nil }

func TestDefaults_AreTheTags(t *testing.T) {
	got := configtest.DefaultsAreTheTags[sample](t)
	assert.Equal(t, "prloop", got.Name)
	assert.True(t, got.On)
	assert.Equal(t, 90*time.Second, got.Wait)
	assert.Equal(t, 3, got.Inner.Depth, "an untagged struct field is descended into")
	assert.Equal(t, uint32(1024), got.Bytes)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, got.Waits)
	assert.Equal(t, 8*time.Second, got.ShutdownGrace, "embedded Common")
	assert.Zero(t, got.NoDefault)
}

func TestDefaults_MalformedTagIsAnError(t *testing.T) {
	t.Parallel()
	type bad struct {
		N int `envconfig:"PRLOOP_TEST_N" default:"many"`
	}
	_, err := config.Defaults[bad]()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PRLOOP_TEST_N")
	assert.Panics(t, func() { config.MustDefaults[bad]() })
}

func TestDefaultZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    sample
		names []string
		check func(t *testing.T, got sample)
	}{
		{name: "a zero setting takes its default", names: []string{"PRLOOP_TEST_WAIT", "PRLOOP_TEST_DEPTH"},
			check: func(t *testing.T, got sample) {
				assert.Equal(t, 90*time.Second, got.Wait)
				assert.Equal(t, 3, got.Inner.Depth)
			}},
		{name: "a set one is kept", in: sample{Wait: time.Second}, names: []string{"PRLOOP_TEST_WAIT"},
			check: func(t *testing.T, got sample) { assert.Equal(t, time.Second, got.Wait) }},
		{name: "only the named ones change", names: []string{"PRLOOP_TEST_NAME"},
			check: func(t *testing.T, got sample) {
				assert.Equal(t, "prloop", got.Name)
				assert.Zero(t, got.Wait)
				assert.False(t, got.On)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.in
			config.DefaultZero(&got, tt.names...)
			tt.check(t, got)
		})
	}
}

func TestDefaultZero_UnknownNamePanics(t *testing.T) {
	t.Parallel()
	assert.Panics(t, func() { config.DefaultZero(&sample{}, "PRLOOP_NO_SUCH") })
}
