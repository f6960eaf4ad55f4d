// Package golden keeps a generated file in the repository equal to what
// the code generates: the tests of docs/configuration.md and
// docs/events.md compare with it, and rewrite it when asked.
package golden

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Check compares the file at path with got, or writes got there when
// update is set (a test's -update flag, which go generate passes). refresh
// is the command that does so, for the failure message.
func Check(t testing.TB, path, got string, update bool, refresh string) {
	t.Helper()
	if update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, got, string(want), "%s is stale: run '%s'", path, refresh)
}
