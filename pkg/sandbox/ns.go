package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// initArg0 is argv[0] of a re-executed sandbox init. The spec travels on
// fd 3, never in the environment the command could read.
const initArg0 = "prloop-sandbox-init"

// initSetupFailed is the init's exit status when it cannot build the
// sandbox (as docker uses 125 for its own failures).
const initSetupFailed = 125

// nsSpec is what the parent tells the sandbox's init.
type nsSpec struct {
	Root   string // an empty host directory to build the new root on
	Args   []string
	Dir    string
	Env    []string
	System []systemPath
	Paths  []mountPath
}

// nsProc runs the command under a re-exec of this binary as pid 1 of new
// PID, mount, IPC and UTS namespaces (and a user namespace when not root).
type nsProc struct {
	c     *exec.Cmd
	root  string
	specW *os.File
	spec  []byte
}

func (s *Sandbox) nsBackend(c Cmd) (backend, error) {
	root, err := os.MkdirTemp("", "prloop-sandbox-root-")
	if err != nil {
		return nil, fmt.Errorf("make sandbox root: %w", err)
	}
	spec, err := json.Marshal(nsSpec{
		Root: root, Args: c.Args, Dir: filepath.Clean(c.Dir), Env: sandboxEnv(c),
		System: hostSystemPaths(), Paths: s.userPaths(c),
	})
	if err != nil {
		_ = os.Remove(root)
		return nil, fmt.Errorf("encode sandbox spec: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = os.Remove(root)
		return nil, fmt.Errorf("make sandbox spec pipe: %w", err)
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{initArg0}, Env: []string{}, Dir: "/"}
	cmd.ExtraFiles = []*os.File{r}
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if uid := os.Getuid(); uid != 0 {
		// Root in the new user namespace is this user outside: the init
		// keeps the capabilities it needs to mount, the command gets none.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	return &nsProc{c: cmd, root: root, specW: w, spec: spec}, nil
}

func (p *nsProc) cmd() *exec.Cmd { return p.c }

func (p *nsProc) started() error {
	_ = p.c.ExtraFiles[0].Close()
	_, err := p.specW.Write(p.spec)
	_ = p.specW.Close()
	if err != nil {
		return fmt.Errorf("send sandbox spec: %w", err)
	}
	return nil
}

// term reaches the command through the init, which forwards SIGTERM.
func (p *nsProc) term() { _ = p.c.Process.Signal(syscall.SIGTERM) }

// kill kills the init; the kernel then kills everything else in its PID
// namespace before the init's exit completes. os.Process signals through a
// pidfd, so this is safe after Wait.
func (p *nsProc) kill()     { _ = p.c.Process.Kill() }
func (p *nsProc) waitGone() {}

func (p *nsProc) cleanup() {
	_ = p.c.ExtraFiles[0].Close()
	_ = p.specW.Close()
	_ = os.Remove(p.root)
}

// Init must be called first thing in main() and in TestMain of every
// package whose tests use the Namespaces mode. When this process was
// started as a sandbox's init it builds the sandbox, runs the command,
// and exits with the command's status; otherwise it returns at once.
func Init() {
	if len(os.Args) != 1 || os.Args[0] != initArg0 {
		return
	}
	os.Exit(runInit())
}

func runInit() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "prloop sandbox init: %v\n", err)
		return initSetupFailed
	}
	f := os.NewFile(3, "spec")
	var spec nsSpec
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		return fail(fmt.Errorf("read spec: %w", err))
	}
	_ = f.Close()
	if err := buildRoot(spec); err != nil {
		return fail(err)
	}
	return superviseCommand(spec)
}

// buildRoot makes the sandbox's filesystem on a tmpfs at spec.Root and
// pivots into it, leaving nothing of the host but what spec lists.
func buildRoot(spec nsSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := spec.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", root, err)
	}
	in := func(p string) string { return filepath.Join(root, p) }
	for _, sp := range spec.System {
		if sp.Symlink != "" {
			if err := os.Symlink(sp.Symlink, in(sp.Path)); err != nil {
				return fmt.Errorf("link %s: %w", sp.Path, err)
			}
			continue
		}
		if err := bindMount(sp.Path, in(sp.Path), true); err != nil {
			return err
		}
	}
	if err := os.Mkdir(in("/proc"), 0o555); err != nil {
		return fmt.Errorf("make /proc: %w", err)
	}
	if err := unix.Mount("proc", in("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := makeDev(in("/dev")); err != nil {
		return err
	}
	for _, t := range []struct{ path, mode string }{{tmpDir, "1777"}, {homeDir, "0700"}} {
		if err := os.MkdirAll(in(t.path), 0o755); err != nil {
			return fmt.Errorf("make %s: %w", t.path, err)
		}
		if err := unix.Mount("tmpfs", in(t.path), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+t.mode); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", t.path, err)
		}
	}
	for _, p := range spec.Paths {
		if _, err := os.Stat(p.Path); err != nil && p.Optional {
			continue
		}
		if err := bindMount(p.Path, in(p.Path), p.ReadOnly); err != nil {
			return err
		}
	}
	if err := os.Chdir(root); err != nil {
		return fmt.Errorf("enter new root: %w", err)
	}
	// pivot_root(".", ".") stacks the old root on the new one; detaching it
	// leaves no path back to the host's tree.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make root read-only: %w", err)
	}
	if err := os.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("enter %s: %w", spec.Dir, err)
	}
	return nil
}

// bindMount shows the host path src at dst, read-only if asked.
func bindMount(src, dst string, readOnly bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("make mount point for %s: %w", src, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if readOnly {
		return makeReadOnly(dst)
	}
	return nil
}

// makeReadOnly makes the mount at path and every mount below it read-only.
func makeReadOnly(path string) error {
	err := unix.MountSetattr(-1, path, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("make %s read-only: %w", path, err)
	}
	// Older kernels: a bind remount, keeping the flags a user namespace may
	// not clear (only the top mount becomes read-only).
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("make %s read-only: %w", path, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	if err := unix.Mount("", path, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", path, err)
	}
	return nil
}

// makeDev builds a minimal /dev from the host's harmless device nodes.
func makeDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return fmt.Errorf("make /dev: %w", err)
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if _, err := os.Stat("/dev/" + n); err != nil {
			continue
		}
		if err := bindMount("/dev/"+n, filepath.Join(dev, n), false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return fmt.Errorf("make /dev/shm: %w", err)
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

// superviseCommand runs the command as pid 1's only child: it passes
// termination signals, reaps every orphan, and returns the command's exit
// status (128+n for signal n). Its caller's exit then makes the kernel kill
// whatever else is left in the namespace.
func superviseCommand(spec nsSpec) int {
	// Exec resolves Args[0] through the PATH the command will see.
	os.Clearenv()
	for _, kv := range spec.Env {
		if k, v, ok := cutEnv(kv); ok {
			_ = os.Setenv(k, v)
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)

	// Capabilities are per thread and inherited by a child from the thread
	// that forks it: drop them on a locked thread and start from there.
	runtime.LockOSThread()
	if err := dropCapabilities(); err != nil {
		fmt.Fprintf(os.Stderr, "prloop sandbox init: %v\n", err)
		return initSetupFailed
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "prloop sandbox: %v\n", err)
		return 127
	}
	child := cmd.Process.Pid
	var terminating atomic.Bool
	go func() {
		// To every process in the namespace but this init, as a signal to
		// a process group would reach them, setsid or not.
		for s := range sigs {
			terminating.Store(true)
			_ = unix.Kill(-1, s.(syscall.Signal))
		}
	}()
	status := -1
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD && status >= 0 {
			return status // everything told to stop has stopped
		}
		if err != nil {
			return initSetupFailed
		}
		if pid != child {
			continue
		}
		status = ws.ExitStatus()
		if ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
		// Told to stop, the others get until the outer SIGKILL to finish
		// their clean-up; otherwise the command's exit ends the sandbox.
		if !terminating.Load() {
			return status
		}
	}
}

func cutEnv(kv string) (string, string, bool) {
	for i := 1; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}

// dropCapabilities leaves the calling thread (and what it starts) with no
// capabilities, none to regain, and no_new_privs set.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}
