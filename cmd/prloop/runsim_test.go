package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// TestRunSim_EachRunHasStateOfItsOwn: `prloop run -sim` twice in the same
// directory. The simulator is new on every run, so prloop's records must
// be too: before, both runs kept them in ./.prloop, and the second run
// ignored the new demo PR #1 because the first run's record of #1 said it
// was merged. Each run now keeps its state in a directory of its own,
// says where, removes it on exit, and prints what to try as alice; -data
// puts the state where the user says.
func TestRunSim_EachRunHasStateOfItsOwn(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/prloop")
	cwd := t.TempDir()
	stateRE := regexp.MustCompile(`prloop's state for this run: (\S+)`)
	runOnce := func(args ...string) string {
		t.Helper()
		p := proctest.Start(t, "/bin/sh", []string{
			"PRLOOP_NATS_PORT=-1", "PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_NATS_URL=", "PRLOOP_REPOS=",
			"PRLOOP_LOG_FORMAT=json", "PRLOOP_AGENT_CMD=true",
		}, append([]string{"-c", `unset PRLOOP_DATA_DIR; cd "$0" && exec "$@"`, cwd, bin, "run", "-sim"}, args...)...)
		require.Eventually(t, func() bool { return strings.Contains(p.Stderr.String(), `"msg":"ready"`) }, 30*time.Second, 20*time.Millisecond,
			"prloop run -sim never got ready")
		m := stateRE.FindStringSubmatch(p.Stderr.String())
		require.NotNil(t, m, "the run says where its state is")
		for _, want := range []string{"Try, in another terminal, as alice:", "/reactions", "/comments", "Authorization: token "} {
			assert.Contains(t, p.Stderr.String(), want, "the walkthrough")
		}
		assert.DirExists(t, m[1], "the state is where the run says")
		require.NoError(t, p.Signal(syscall.SIGTERM))
		exited, err := p.Wait(30 * time.Second)
		require.True(t, exited, "prloop run -sim did not stop on SIGTERM")
		require.NoError(t, err, p.Stderr.String())
		return m[1]
	}

	first := runOnce()
	assert.NoDirExists(t, first, "a run's own state is removed with its simulator")
	second := runOnce()
	assert.NotEqual(t, first, second, "the second run has state of its own")
	_, err := os.Stat(filepath.Join(cwd, ".prloop"))
	assert.True(t, os.IsNotExist(err), "run -sim left state in the working directory, for the next run to trip on")

	kept := filepath.Join(t.TempDir(), "kept")
	assert.Equal(t, kept, runOnce("-data", kept))
	assert.DirExists(t, kept, "-data keeps the state")
}
