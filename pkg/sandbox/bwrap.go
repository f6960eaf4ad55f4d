package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bwrapProc runs the command under bubblewrap. bwrap's own init is pid 1
// of the sandbox's PID namespace: killing it kills the namespace.
type bwrapProc struct {
	c        *exec.Cmd
	infoR    *os.File
	infoW    *os.File
	initPid  int // bwrap's init (pid 1 inside) as seen from the host
	initPidF int // pidfd of initPid; -1 until known
}

func (s *Sandbox) bwrapBackend(c Cmd) (backend, error) {
	args := []string{
		"--unshare-user-try", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		// The command is the namespace's pid 1, so its exit ends the
		// sandbox, and a SIGTERM to everything (term) leaves it alive, as
		// pid 1 ignores signals it has no handler for, until what it waits
		// for (a shell's child, say) has finished its own clean-up.
		"--as-pid-1",
		"--info-fd", "3",
	}
	for _, sp := range hostSystemPaths() {
		if sp.Symlink != "" {
			args = append(args, "--symlink", sp.Symlink, sp.Path)
		} else {
			args = append(args, "--ro-bind", sp.Path, sp.Path)
		}
	}
	args = append(args,
		"--proc", "/proc", "--dev", "/dev",
		"--tmpfs", tmpDir, "--perms", "0700", "--tmpfs", homeDir)
	for _, p := range s.userPaths(c) {
		op := "--bind"
		if p.ReadOnly {
			op = "--ro-bind"
		}
		if p.Optional {
			op += "-try"
		}
		args = append(args, op, p.Path, p.Path)
	}
	// bwrap's root is a tmpfs of its own: nothing there needs writing.
	args = append(args, "--remount-ro", "/", "--chdir", c.Dir, "--")
	args = append(args, c.Args...)

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make bwrap info pipe: %w", err)
	}
	cmd := exec.Command(s.bwrap, args...)
	// No --clearenv: bwrap hands the command the environment it was given,
	// which keeps every value off bwrap's command line (/proc/*/cmdline).
	cmd.Env = sandboxEnv(c)
	cmd.Dir = c.Dir
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return &bwrapProc{c: cmd, infoR: r, infoW: w, initPidF: -1}, nil
}

func (p *bwrapProc) cmd() *exec.Cmd { return p.c }

// started reads bwrap's info (written once the sandbox's init exists) for
// the init's host pid, and holds a pidfd on it so signals can never reach
// a recycled pid.
func (p *bwrapProc) started() error {
	_ = p.infoW.Close()
	b, err := io.ReadAll(p.infoR)
	_ = p.infoR.Close()
	if err != nil || len(b) == 0 {
		return nil // bwrap failed before the sandbox existed; Wait reports why
	}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.ChildPid <= 0 {
		return fmt.Errorf("read bwrap info %q: %w", b, err)
	}
	p.initPid = info.ChildPid
	fd, err := unix.PidfdOpen(info.ChildPid, 0)
	if err != nil {
		if err == unix.ESRCH {
			return nil // already gone
		}
		return fmt.Errorf("open pidfd of bwrap init %d: %w", info.ChildPid, err)
	}
	p.initPidF = fd
	return nil
}

// term sends SIGTERM to every process in the sandbox, as a signal to a
// process group would, so that each may clean up (a shell's trap, say):
// the command's children may have left its group and session. The
// sandbox's processes are those in the PID namespace of the command, its
// pid 1.
func (p *bwrapProc) term() {
	if p.initPid == 0 {
		_ = p.c.Process.Signal(syscall.SIGTERM)
		return
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(p.initPid) + "/ns/pid")
	if err != nil {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if other, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && other == ns {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

func (p *bwrapProc) kill() {
	if p.initPidF >= 0 {
		_ = unix.PidfdSendSignal(p.initPidF, unix.SIGKILL, nil, 0)
	}
	_ = p.c.Process.Kill()
}

// waitGone waits for the init to exit: the kernel empties a PID namespace
// before its init's exit completes.
func (p *bwrapProc) waitGone() {
	if p.initPidF < 0 {
		return
	}
	waitPidfd(p.initPidF, 10*time.Second)
}

func (p *bwrapProc) cleanup() {
	_ = p.infoR.Close()
	_ = p.infoW.Close()
	if p.initPidF >= 0 {
		_ = unix.Close(p.initPidF)
		p.initPidF = -1
	}
}

// waitPidfd waits until the process behind fd has exited or max passes.
func waitPidfd(fd int, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			return
		}
	}
}
