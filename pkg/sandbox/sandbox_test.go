package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prloop/prloop/pkg/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// helperEnv makes a re-executed test binary act as a helper process (see
// TestMain) instead of running tests.
const helperEnv = "PRLOOP_SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	Init()
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

// runHelper runs in a re-executed test binary. "sleeper <mode> <dir> <marker>":
// start a sandboxed sleeper with a setsid child and wait forever (the test
// kills this process with SIGKILL). "probe <mode> <dir>": run checks in the
// sandbox as whatever user this process is, print their output. "fds <mode>
// <dir>": print what this process's descriptor 4 is, then list the
// sandboxed command's descriptors.
func runHelper(h string) int {
	args := strings.Fields(h)
	sb, err := New(Options{Mode: Mode(args[1])}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := Cmd{Dir: args[2], Env: []string{"PATH=/usr/bin:/bin"}, Stdout: os.Stdout, Stderr: os.Stderr}
	switch args[0] {
	case "sleeper":
		c.Args = []string{"sh", "-c", "setsid sh -c 'echo up > child; sleep 1000 # " + args[3] + "' & sleep 1000 # " + args[3]}
	case "probe":
		c.Args = []string{"sh", "-c", "id -u; ls /proc | grep -c '^[0-9]*$'; echo w > written && echo wrote; ls -A /work /root 2>&1 | head -1"}
	case "fds":
		fd4, err := os.Readlink("/proc/self/fd/4")
		fmt.Printf("helper fd 4: %s (%v)\n", fd4, err)
		c.Args = []string{"ls", "-l", "/proc/self/fd/"}
	}
	if err := sb.Run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// requireSandbox reports whether CI demands every backend (then a missing
// one fails instead of skipping).
func requireSandbox() bool { return os.Getenv("PRLOOP_TEST_REQUIRE_SANDBOX") == "1" }

// realBackends are the isolating backends every property is proved for.
var realBackends = []Mode{Bwrap, Namespaces}

// newSandbox returns a Sandbox of mode m, skipping the test when m does
// not work on this machine (failing under PRLOOP_TEST_REQUIRE_SANDBOX=1).
func newSandbox(t *testing.T, m Mode, opts ...func(*Options)) *Sandbox {
	t.Helper()
	o := Options{Mode: m}
	for _, f := range opts {
		f(&o)
	}
	sb, err := New(o, slog.New(slog.DiscardHandler))
	if err != nil {
		if requireSandbox() {
			require.NoError(t, err, "PRLOOP_TEST_REQUIRE_SANDBOX=1 and the %s sandbox does not work", m)
		}
		t.Skipf("%s sandbox unavailable: %v", m, err)
	}
	require.Equal(t, m, sb.Mode())
	return sb
}

// eachBackend runs test in parallel subtests, one per mode that works.
func eachBackend(t *testing.T, modes []Mode, test func(t *testing.T, m Mode, sb *Sandbox)) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			test(t, m, newSandbox(t, m))
		})
	}
}

// sh runs script with sh -c in sb and returns its stdout and stderr.
func sh(t *testing.T, ctx context.Context, sb *Sandbox, c Cmd, script string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	c.Args = []string{"sh", "-c", script}
	if c.Env == nil {
		c.Env = []string{"PATH=/usr/bin:/bin"}
	}
	c.Stdout, c.Stderr = &out, &errb
	if c.KillGrace == 0 {
		c.KillGrace = time.Second
	}
	err := sb.Run(ctx, c)
	return out.String(), errb.String(), err
}

func uniqueMarker(t *testing.T) string {
	return fmt.Sprintf("prloop-sbx-mark-%d-%d", os.Getpid(), time.Now().UnixNano())
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     Mode
		wantErr  bool
	}{
		{name: "empty is auto", in: "", want: Auto},
		{name: "auto", in: "auto", want: Auto},
		{name: "bwrap", in: "bwrap", want: Bwrap},
		{name: "namespaces", in: "namespaces", want: Namespaces},
		{name: "none", in: "none", want: None},
		{name: "unknown", in: "docker", wantErr: true},
		{name: "case matters", in: "BWRAP", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseMode(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "PRLOOP_AGENT_SANDBOX")
				assert.Contains(t, err.Error(), "auto, bwrap, namespaces, none")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNewAutoPicksBwrapWhenPresent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if requireSandbox() {
			t.Fatal("PRLOOP_TEST_REQUIRE_SANDBOX=1 and bwrap is not on PATH")
		}
		t.Skip("bwrap not installed")
	}
	var logs bytes.Buffer
	sb, err := New(Options{Mode: Auto}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	assert.Equal(t, Bwrap, sb.Mode())
	assert.Contains(t, logs.String(), "mode=bwrap")
}

// Not parallel: changes PATH.
func TestNewExplicitModeErrors(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(Options{Mode: Bwrap}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "install bubblewrap")

	var logs bytes.Buffer
	sb, err := New(Options{Mode: None}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	assert.Equal(t, None, sb.Mode())
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "setsid")

	_, err = New(Options{Mode: "podman"}, nil)
	require.ErrorContains(t, err, "PRLOOP_AGENT_SANDBOX")
}

// Not parallel: puts a secret in this process's environment, as prloop's
// GITHUB_TOKEN is, and proves no backend lets the command read it.
func TestSecretsUnreachable(t *testing.T) {
	const secret = "prloop-sbx-secret-value-4f1c"
	t.Setenv("PRLOOP_SBX_TEST_SECRET", secret)
	secretDir := t.TempDir()
	secretFile := filepath.Join(secretDir, "token")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret), 0o600))

	for _, m := range realBackends {
		t.Run(string(m), func(t *testing.T) {
			sb := newSandbox(t, m)
			dir := t.TempDir()
			ctx := t.Context()

			t.Run("env is exactly what was given", func(t *testing.T) {
				var out bytes.Buffer
				err := sb.Run(ctx, Cmd{Args: []string{"env"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "A=1", "HOME=/root"}, Stdout: &out})
				require.NoError(t, err)
				got := strings.Split(strings.TrimSpace(out.String()), "\n")
				assert.ElementsMatch(t, []string{"PATH=/usr/bin:/bin", "A=1", "HOME=/home/agent", "TMPDIR=/tmp", "PWD=" + dir}, got)
			})

			t.Run("proc shows only the sandbox", func(t *testing.T) {
				pid := strconv.Itoa(os.Getpid())
				out, _, err := sh(t, ctx, sb, Cmd{Dir: dir}, `
					ls /proc | grep '^[0-9]*$' | tr '\n' ' '; echo
					cat /proc/`+pid+`/environ /proc/`+pid+`/cmdline 2>/dev/null; true
					cat /proc/*/environ 2>/dev/null; true`)
				require.NoError(t, err)
				lines := strings.SplitN(out, "\n", 2)
				pids := strings.Fields(lines[0])
				// sh, ls and grep (and the init) at most: none of the host's.
				assert.LessOrEqual(t, len(pids), 5, "pids in /proc: %v", pids)
				assert.NotContains(t, pids, pid)
				for _, p := range pids {
					n, _ := strconv.Atoi(p)
					// The namespace's own numbering (the init's threads take some).
					assert.Less(t, n, 100, "pid %d in the sandbox's /proc", n)
				}
				assert.NotContains(t, out, secret)
				assert.NotContains(t, out, "test.run")
			})

			t.Run("host files and HOME are private", func(t *testing.T) {
				out, errOut, err := sh(t, ctx, sb, Cmd{Dir: dir}, `
					cat `+secretFile+` 2>&1; ls -A `+secretDir+` 2>&1
					for d in /root /work /var/lib /run /srv /home/agent/.ssh; do [ -e $d ] && echo "visible $d"; done
					echo "home=$HOME:$(ls -A $HOME | wc -l) homes=$(ls -A /home)"
					echo x > $HOME/f && echo x > /tmp/f && echo writable
					grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t' ' '`)
				require.NoError(t, err, errOut)
				assert.NotContains(t, out, secret)
				assert.NotContains(t, out, "visible")
				assert.Contains(t, out, "home=/home/agent:0 homes=agent\n")
				assert.Contains(t, out, "writable")
				// No capabilities to remount or mount with, none to regain.
				assert.Contains(t, out, "CapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1\n")
			})
		})
	}
}

func TestMountsWritableAndReadOnly(t *testing.T) {
	t.Parallel()
	for _, m := range realBackends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			extraRW := t.TempDir()
			sb := newSandbox(t, m, func(o *Options) {
				o.Writable = []string{extraRW, filepath.Join(extraRW, "missing-is-skipped")}
			})
			dir, ro, rw := t.TempDir(), t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(ro, "prompt"), []byte("fix it"), 0o644))
			c := Cmd{Dir: dir, ReadOnly: []string{ro}, Writable: []string{rw}}
			out, errOut, err := sh(t, t.Context(), sb, c, `
				pwd; echo made > made; echo more > `+rw+`/more; echo extra > `+extraRW+`/extra
				cat `+ro+`/prompt; echo
				if echo no > `+ro+`/prompt 2>/dev/null; then echo RO-WRITABLE; fi
				if echo no > /usr/x 2>/dev/null || echo no > /etc/x 2>/dev/null; then echo SYS-WRITABLE; fi
				if echo no > /x 2>/dev/null; then echo ROOT-WRITABLE; fi`)
			require.NoError(t, err, errOut)
			assert.Equal(t, dir+"\nfix it\n", out)
			for path, want := range map[string]string{
				filepath.Join(dir, "made"): "made\n", filepath.Join(rw, "more"): "more\n",
				filepath.Join(extraRW, "extra"): "extra\n", filepath.Join(ro, "prompt"): "fix it",
			} {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, want, string(b), path)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	eachBackend(t, append([]Mode{None}, realBackends...), func(t *testing.T, m Mode, sb *Sandbox) {
		_, _, err := sh(t, t.Context(), sb, Cmd{Dir: t.TempDir()}, "exit 3")
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 3, ee.ExitCode())

		err = sb.Run(t.Context(), Cmd{Args: []string{"no-such-agent"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin"}})
		require.Error(t, err)
	})
}

func TestSetsidChildDiesWithRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, realBackends, func(t *testing.T, m Mode, sb *Sandbox) {
		dir := t.TempDir()
		marker := uniqueMarker(t)
		_, errOut, err := sh(t, t.Context(), sb, Cmd{Dir: dir}, `
			setsid sh -c 'while :; do echo x >> beat; sleep 0.05; done # `+marker+`' >/dev/null 2>&1 &
			( setsid sh -c 'sleep 1000 # `+marker+`' & ) >/dev/null 2>&1
			while [ ! -s beat ]; do sleep 0.01; done`)
		require.NoError(t, err, errOut)
		assert.Empty(t, proctest.WithMarker(marker), "processes of the sandbox alive after Run returned")
		proctest.RequireStopsGrowing(t, filepath.Join(dir, "beat"))
	})
}

func TestTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	eachBackend(t, append([]Mode{None}, realBackends...), func(t *testing.T, m Mode, sb *Sandbox) {
		dir := t.TempDir()
		marker := uniqueMarker(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const grace = 300 * time.Millisecond
		// The command ignores SIGTERM, so only the SIGKILL after the
		// grace ends it; None cannot reach a setsid child, so it gets
		// only a child in its process group.
		child := `setsid sh -c 'trap "" TERM; while :; do echo x >> beat; sleep 0.05; done # ` + marker + `' >/dev/null 2>&1 &`
		if m == None {
			child = `sh -c 'trap "" TERM; while :; do echo x >> beat; sleep 0.05; done # ` + marker + `' &`
		}
		errc := make(chan error, 1)
		go func() {
			_, _, err := sh(t, ctx, sb, Cmd{Dir: dir, KillGrace: grace}, child+`
				trap "" TERM
				while :; do sleep 0.05; done`)
			errc <- err
		}()
		// The deadline comes once the child runs (whatever the load).
		require.Eventually(t, func() bool { fi, err := os.Stat(filepath.Join(dir, "beat")); return err == nil && fi.Size() > 0 },
			20*time.Second, 10*time.Millisecond, "the child never ran")
		start := time.Now()
		cancel()
		var err error
		select {
		case err = <-errc:
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of its end (grace is 300ms)")
		}
		require.ErrorIs(t, err, context.Canceled)
		assert.GreaterOrEqual(t, time.Since(start), grace, "SIGKILL only after the grace")
		assert.Empty(t, proctest.WithMarker(marker))
		proctest.RequireStopsGrowing(t, filepath.Join(dir, "beat"))
	})
}

func TestCancelSendsSIGTERMFirst(t *testing.T) {
	t.Parallel()
	eachBackend(t, append([]Mode{None}, realBackends...), func(t *testing.T, m Mode, sb *Sandbox) {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, err := sh(t, ctx, sb, Cmd{Dir: dir, KillGrace: time.Minute},
				`trap 'echo bye > termed; exit 0' TERM; echo up > up; while :; do sleep 0.05; done`)
			errc <- err
		}()
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "up")); return err == nil }, 10*time.Second, 10*time.Millisecond)
		cancel()
		select {
		case err := <-errc:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of SIGTERM (grace is a minute)")
		}
		b, err := os.ReadFile(filepath.Join(dir, "termed"))
		require.NoError(t, err, "the command got no SIGTERM")
		assert.Equal(t, "bye\n", string(b))
	})
}

// TestCancel_EveryProcessGetsSIGTERMAndItsGrace: a shell's child that left
// the session gets SIGTERM too, and its trap runs to the end although the
// shell itself, the command, exits at once.
func TestCancel_EveryProcessGetsSIGTERMAndItsGrace(t *testing.T) {
	t.Parallel()
	eachBackend(t, realBackends, func(t *testing.T, m Mode, sb *Sandbox) {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, err := sh(t, ctx, sb, Cmd{Dir: dir, KillGrace: time.Minute},
				`setsid sh -c 'trap "sleep 0.3; echo bye > termed; exit 0" TERM; echo up > up; while :; do sleep 0.05; done' & wait`)
			errc <- err
		}()
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "up")); return err == nil }, 10*time.Second, 10*time.Millisecond)
		cancel()
		select {
		case <-errc:
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of SIGTERM (grace is a minute)")
		}
		b, err := os.ReadFile(filepath.Join(dir, "termed"))
		require.NoError(t, err, "the setsid child got no SIGTERM, or no time to clean up")
		assert.Equal(t, "bye\n", string(b))
	})
}

func TestKillingParentKillsSandbox(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, m := range realBackends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			newSandbox(t, m) // skip where unavailable
			dir := t.TempDir()
			marker := uniqueMarker(t)
			helper := exec.Command(exe)
			helper.Env = append(os.Environ(), helperEnv+"=sleeper "+string(m)+" "+dir+" "+marker)
			var out bytes.Buffer
			helper.Stdout, helper.Stderr = &out, &out
			// A surviving sleeper would hold the output pipe open forever.
			helper.WaitDelay = time.Second
			require.NoError(t, helper.Start())
			waited := make(chan error, 1)
			go func() { waited <- helper.Wait() }()
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(dir, "child"))
				return err == nil && len(proctest.WithMarker(marker)) >= 2
			}, 20*time.Second, 10*time.Millisecond, "sandboxed sleepers did not start: %s", &out)

			require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
			<-waited
			require.Eventually(t, func() bool { return len(proctest.WithMarker(marker)) == 0 },
				10*time.Second, 10*time.Millisecond, "sandboxed processes outlived their killed parent")
		})
	}
}

// TestInheritedDescriptorsDoNotReachTheCommand starts prloop (here the
// test binary) as a careless parent would, with a file and a directory
// open and not close-on-exec. The sandboxed command must see neither: a
// host directory's descriptor is a way out of the sandbox's mounts.
func TestInheritedDescriptorsDoNotReachTheCommand(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, m := range append(realBackends, None) {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			newSandbox(t, m) // skip where unavailable
			host := t.TempDir()
			marker := uniqueMarker(t)
			f, err := os.Create(filepath.Join(host, marker))
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close() })
			d, err := os.Open(host)
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })

			helper := exec.Command(exe)
			helper.Env = append(os.Environ(), helperEnv+"=fds "+string(m)+" "+t.TempDir())
			// Descriptors 4 and 5, inherited. The backends put their own
			// pipe on 3, which would hide an inherited 3 by accident.
			helper.ExtraFiles = []*os.File{f, f, d}
			var stderr bytes.Buffer
			helper.Stderr = &stderr
			out, err := helper.Output()
			require.NoError(t, err, "helper: %s", &stderr)
			helperLine, listing, _ := strings.Cut(string(out), "\n")
			require.Contains(t, helperLine, marker, "the helper inherited the file: the test sets up what it claims")
			assert.NotContains(t, listing, marker, "the inherited file reached the sandboxed command")
			assert.NotContains(t, listing, "-> "+host+"\n", "the inherited directory reached the sandboxed command")
		})
	}
}

// TestUnprivileged runs the sandbox as uid 65534 (nobody): the path an
// unprivileged prloop takes, through a user namespace.
func TestUnprivileged(t *testing.T) {
	t.Parallel()
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		t.Skip("needs root and setpriv to drop to an unprivileged user")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	// nobody must be able to run the test binary and write its Dir.
	shared, err := os.MkdirTemp("", "prloop-sbx-unpriv-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	bin := filepath.Join(shared, "sandbox.test")
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	for _, m := range realBackends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(shared, string(m))
			require.NoError(t, os.Mkdir(dir, 0o777))
			require.NoError(t, os.Chmod(dir, 0o777))
			cmd := exec.CommandContext(t.Context(), setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin)
			cmd.Env = []string{"PATH=/usr/bin:/bin", helperEnv + "=probe " + string(m) + " " + dir}
			out, err := cmd.CombinedOutput()
			if err != nil && strings.Contains(string(out), "does not work here") && !requireSandbox() {
				t.Skipf("%s sandbox unavailable to an unprivileged user: %s", m, out)
			}
			require.NoError(t, err, "%s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Len(t, lines, 4, "%s", out)
			n, err := strconv.Atoi(lines[1])
			require.NoError(t, err)
			assert.LessOrEqual(t, n, 5, "pids in /proc")
			assert.Equal(t, "wrote", lines[2])
			assert.Contains(t, lines[3], "No such file")
			fi, err := os.Stat(filepath.Join(dir, "written"))
			require.NoError(t, err)
			assert.Equal(t, uint32(65534), fi.Sys().(*syscall.Stat_t).Uid, "files written in Dir belong to the unprivileged user")
		})
	}
}

func TestMemoryMaxUnavailableIsIgnored(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	sb, err := New(Options{Mode: None, MemoryMax: 64 << 20}, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	_, _, err = sh(t, t.Context(), sb, Cmd{Dir: t.TempDir()}, "true")
	require.NoError(t, err)
	if sb.cg == nil {
		assert.Contains(t, logs.String(), "memory limit not applied")
	}
}

func TestRunRejectsEmptyCmd(t *testing.T) {
	t.Parallel()
	sb, err := New(Options{Mode: None}, nil)
	require.NoError(t, err)
	tests := []struct {
		name string
		c    Cmd
	}{
		{name: "no args", c: Cmd{Dir: "/"}},
		{name: "no dir", c: Cmd{Args: []string{"true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, sb.Run(t.Context(), tt.c))
		})
	}
}

func BenchmarkRunTrue(b *testing.B) {
	b.Run("plain-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []Mode{None, Bwrap, Namespaces} {
		b.Run(string(m), func(b *testing.B) {
			sb, err := New(Options{Mode: m}, nil)
			if err != nil {
				b.Skip(err)
			}
			c := Cmd{Args: []string{"true"}, Dir: b.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
			for b.Loop() {
				if err := sb.Run(context.Background(), c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCloseOnExecEach: the fallback for kernels without
// CLOSE_RANGE_CLOEXEC marks a descriptor opened without the flag. Not
// parallel: another test's Run would mark the descriptor first.
func TestCloseOnExecEach(t *testing.T) {
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	require.Zero(t, flags&unix.FD_CLOEXEC, "opened without the flag")

	require.NoError(t, closeOnExecEach())
	flags, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	assert.NotZero(t, flags&unix.FD_CLOEXEC)
}
