// Package configtest runs table tests of service configurations loaded from
// the environment.
package configtest

import (
	"os"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
)

// Case is one row of a configuration test.
type Case[T any] struct {
	Name string
	// Env is set for the row (t.Setenv, so rows cannot run in parallel).
	Env map[string]string
	// WantErr are words the load error must contain; empty means the load
	// must succeed and Check (if set) examines the result.
	WantErr []string
	// NotInErr are words the error must not contain, such as secrets.
	NotInErr []string
	Check    func(t *testing.T, c T)
}

// Run loads a fresh T with config.Load for every case, after setting its
// environment, and checks the outcome.
func Run[T any, P interface {
	*T
	config.Validator
}](t *testing.T, cases []Case[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			for k, v := range tc.Env {
				t.Setenv(k, v)
			}
			var c T
			err := config.Load(P(&c))
			if len(tc.WantErr) > 0 {
				require.Error(t, err)
				for _, w := range tc.WantErr {
					assert.Contains(t, err.Error(), w)
				}
				for _, w := range tc.NotInErr {
					assert.NotContains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			if tc.Check != nil {
				tc.Check(t, c)
			}
		})
	}
}

// DefaultsAreTheTags checks that config.Defaults[T] is what loading T from
// an environment without PRLOOP_* variables gives (validation aside), so
// that the `default:` tags are the one place T's defaults are written and
// Defaults reads them as envconfig does. It unsets the test's PRLOOP_*
// variables (restored after it), so the test cannot run in parallel.
func DefaultsAreTheTags[T any](t *testing.T) T {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix) {
			t.Setenv(k, "") // restored after the test
			require.NoError(t, os.Unsetenv(k))
		}
	}
	var loaded T
	require.NoError(t, envconfig.Process("", &loaded))
	got, err := config.Defaults[T]()
	require.NoError(t, err)
	assert.Equal(t, loaded, got)
	return got
}
