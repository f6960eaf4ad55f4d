// Package proctest builds prloop's binaries and runs them as real processes
// in tests, capturing their output for assertions.
package proctest

import (
	"bytes"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/benchrun"
)

// Root returns the repository root: the nearest directory above the working
// directory that holds go.work.
func Root(t testing.TB) string {
	t.Helper()
	root, err := benchrun.Root()
	require.NoError(t, err)
	return root
}

var (
	buildMu  sync.Mutex
	binaries = map[string]string{}
	binDir   string
)

// Build compiles the main package at pkg (relative to the repository root,
// e.g. "./services/merger/cmd/merger") once per test binary and returns the
// executable's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := binaries[pkg]; ok {
		return p
	}
	if binDir == "" {
		d, err := os.MkdirTemp("", "prloop-bin-")
		require.NoError(t, err)
		binDir = d
	}
	out := filepath.Join(binDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_"))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = Root(t)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s:\n%s", pkg, b)
	binaries[pkg] = out
	return out
}

// Buffer is a goroutine-safe output buffer.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is a running binary.
type Process struct {
	Cmd    *exec.Cmd
	Stdout *Buffer
	Stderr *Buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args and the given extra environment (KEY=VALUE), in
// its own process group, and kills the group when the test ends.
func Start(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout = p.Stdout
	p.Cmd.Stderr = p.Stderr
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, p.Cmd.Start())
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(bin), p.Stderr.String())
		}
	})
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to d for the process to exit and returns whether it did and
// its exit error.
func (p *Process) Wait(d time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WithMarker lists the host's processes whose command line contains marker,
// as "pid: command line": a test names the processes it starts with a
// marker (a shell comment, $0) to find them even in other PID namespaces.
// Zombies have an empty command line and never match.
func WithMarker(marker string) []string {
	var found []string
	for pid, b := range cmdlines() {
		if bytes.Contains(b, []byte(marker)) {
			found = append(found, pid+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// cmdlines yields the host's processes' pids and command lines
// (NUL-separated arguments), skipping those gone meanwhile.
func cmdlines() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && !yield(e.Name(), b) {
				return
			}
		}
	}
}

// RequireStopsGrowing proves nothing writes path any more: it exists and
// its size stays the same over checks spanning 500 ms, many periods of the
// writers tests use. It polls in the test's own goroutine (testify's Never
// leaves its last check running after it returns, which would then stat a
// removed TempDir).
func RequireStopsGrowing(t testing.TB, path string) {
	t.Helper()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	before := size()
	require.GreaterOrEqual(t, before, int64(0), "%s was never written", path)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); <-tick.C {
		require.Equal(t, before, size(), "%s still grows", path)
	}
}

// ScanCmdlines reads every process's command line every few milliseconds
// until the returned function is called, which reports the command lines
// that contained a secret, and how many scans saw one naming marker: a
// command line is visible to every user of the host, so a secret must
// never be an argument. The marker proves the scan saw the processes it
// was meant to.
func ScanCmdlines(t testing.TB, marker string, secrets ...string) func() (hits []string, sawMarker int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var hits []string
	saw := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, cmdline := range cmdlines() {
				mu.Lock()
				if bytes.Contains(cmdline, []byte(marker)) {
					saw++
				}
				for _, s := range secrets {
					if bytes.Contains(cmdline, []byte(s)) {
						hits = append(hits, string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
					}
				}
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop := func() (h []string, n int) {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return hits, saw
	}
	t.Cleanup(func() { stop() })
	return stop
}
