package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Mode names a sandbox backend; PRLOOP_AGENT_SANDBOX holds one.
type Mode string

// The modes PRLOOP_AGENT_SANDBOX accepts.
const (
	// Auto picks the strongest backend that works on this machine.
	Auto Mode = "auto"
	// Bwrap runs the command under bubblewrap.
	Bwrap Mode = "bwrap"
	// Namespaces runs the command under prloop's own namespace init.
	Namespaces Mode = "namespaces"
	// None runs the command as a plain child process group: no isolation,
	// and a child that calls setsid escapes the process-group kill.
	None Mode = "none"
)

// ParseMode parses a PRLOOP_AGENT_SANDBOX value; empty means Auto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Auto, nil
	case Auto, Bwrap, Namespaces, None:
		return m, nil
	}
	return "", fmt.Errorf("parse PRLOOP_AGENT_SANDBOX %q: want one of auto, bwrap, namespaces, none", s)
}

// Options are per-service settings applying to every run.
type Options struct {
	Mode      Mode
	ReadOnly  []string // extra host paths visible read-only (e.g. the agent's own install dir)
	Writable  []string // extra host paths visible read-write (e.g. ~/.claude)
	MemoryMax int64    // bytes; 0 = no limit. Applied with cgroup v2 where writable; otherwise logged once and ignored
}

// Sandbox runs commands in the backend New resolved. It is safe for
// concurrent use.
type Sandbox struct {
	mode     Mode
	opts     Options
	log      *slog.Logger
	bwrap    string // bwrap's absolute path, found once so PATH changes cannot swap it
	cg       *cgroupParent
	warnOnce sync.Once
}

// Cmd is one command run in the sandbox.
type Cmd struct {
	Args           []string      // argv; Args[0] resolved through PATH from Env (inside the sandbox)
	Dir            string        // working directory; visible read-write at the same path
	Writable       []string      // more read-write host paths, at the same paths
	ReadOnly       []string      // more read-only host paths, at the same paths (e.g. the prompt file's directory)
	Env            []string      // the complete environment; the sandbox sets HOME and TMPDIR to private empty dirs, and PWD to Dir
	Stdin          io.Reader     // nil reads /dev/null
	Stdout, Stderr io.Writer     // nil discards
	KillGrace      time.Duration // between SIGTERM and SIGKILL when ctx ends
}

// Private paths the sandbox gives every command.
const (
	homeDir = "/home/agent"
	tmpDir  = "/tmp"
)

// systemDirs are the host directories every real backend shows read-only.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"}

// New resolves the mode by probing: it runs `true` in each candidate
// sandbox. Auto picks bwrap when `bwrap` is on PATH and its probe works,
// else namespaces when its probe works, else none (with a Warn saying what
// is given up). An explicit bwrap or namespaces mode whose probe fails is an
// error saying what to do.
func New(opts Options, log *slog.Logger) (*Sandbox, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := opts.Mode
	if mode == "" {
		mode = Auto
	}
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	s := &Sandbox{opts: opts, log: log}
	if opts.MemoryMax > 0 {
		cg, err := findCgroupParent()
		if err != nil {
			log.Warn("agent sandbox: memory limit not applied", "memory_max", opts.MemoryMax, "err", err)
		}
		s.cg = cg
	}
	probe := func(m Mode) error {
		s.mode = m
		if m == Bwrap {
			p, err := exec.LookPath("bwrap")
			if err != nil {
				return fmt.Errorf("find bwrap: %w", err)
			}
			s.bwrap = p
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var stderr limitedBuffer
		err := s.Run(ctx, Cmd{Args: []string{"true"}, Dir: os.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, Stderr: &stderr, KillGrace: time.Second})
		if err != nil {
			return fmt.Errorf("probe %s sandbox: %w: %s", m, err, stderr.String())
		}
		return nil
	}
	switch mode {
	case Bwrap:
		if err := probe(Bwrap); err != nil {
			return nil, fmt.Errorf("agent sandbox bwrap does not work here (install bubblewrap, e.g. apt-get install bubblewrap, and allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces>0), or set PRLOOP_AGENT_SANDBOX=auto: %w", err)
		}
	case Namespaces:
		if err := probe(Namespaces); err != nil {
			return nil, fmt.Errorf("agent sandbox namespaces does not work here (enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces>0, and call sandbox.Init first in main), or set PRLOOP_AGENT_SANDBOX=auto: %w", err)
		}
	case None:
		s.mode = None
	case Auto:
		var errs []error
		for _, m := range []Mode{Bwrap, Namespaces} {
			err := probe(m)
			if err == nil {
				break
			}
			errs = append(errs, err)
			s.mode = None
		}
		if s.mode != None {
			log.Info("agent sandbox", "mode", s.mode)
		} else {
			log.Warn("agent sandbox: none works here, running the agent unsandboxed", "mode", None, "reasons", errors.Join(errs...).Error())
		}
	}
	if s.mode == None {
		log.Warn("agent sandbox is off: the agent runs as prloop's user, sees its files, HOME, /proc and processes, and a child that calls setsid outlives a timeout", "mode", None)
	} else if mode != Auto {
		log.Info("agent sandbox", "mode", s.mode)
	}
	return s, nil
}

// Mode returns the resolved backend (never Auto).
func (s *Sandbox) Mode() Mode { return s.mode }

// Run runs c and waits. A non-zero exit is an error wrapping
// *exec.ExitError. When ctx ends, the command gets SIGTERM (as far as the
// backend can deliver it) and everything in the sandbox SIGKILL after
// c.KillGrace. When Run returns, by any path, no process started in the
// sandbox is alive, including children that called setsid or double-forked
// (except with None, where such children escape).
func (s *Sandbox) Run(ctx context.Context, c Cmd) error {
	if len(c.Args) == 0 {
		return errors.New("run sandboxed command: no args")
	}
	if c.Dir == "" {
		return fmt.Errorf("run sandboxed command %q: no dir", c.Args[0])
	}
	if err := closeInheritedOnExec(); err != nil {
		return fmt.Errorf("run sandboxed command %q: %w", c.Args[0], err)
	}
	var (
		b   backend
		err error
	)
	switch s.mode {
	case Bwrap:
		b, err = s.bwrapBackend(c)
	case Namespaces:
		b, err = s.nsBackend(c)
	default:
		b, err = noneBackend(c)
	}
	if err != nil {
		return fmt.Errorf("run sandboxed command %q: %w", c.Args[0], err)
	}
	defer b.cleanup()
	cmd := b.cmd()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	// Writers that are not files are fed by copying goroutines; bound the
	// wait for them so an escaped None child holding a pipe cannot hang Run.
	cmd.WaitDelay = time.Second
	cg, err := s.cgroupFor(cmd)
	if err != nil {
		s.warnOnce.Do(func() { s.log.Warn("agent sandbox: memory limit not applied", "err", err) })
	}
	defer cg.remove()

	started := make(chan error, 1)
	waited := make(chan error, 1)
	// Pdeathsig fires when the thread that started the child exits, not the
	// process: keep that thread alive and locked until the child is reaped.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- b.started()
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		if cmd.Process != nil {
			b.kill()
			<-waited
		}
		return fmt.Errorf("start sandboxed command %q: %w", c.Args[0], err)
	}
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		b.term()
		grace := time.NewTimer(c.KillGrace)
		select {
		case werr = <-waited:
		case <-grace.C:
			b.kill()
			werr = <-waited
		}
		grace.Stop()
	}
	// The command is reaped; make sure nothing it started lives on.
	b.kill()
	b.waitGone()
	if ctx.Err() != nil {
		return fmt.Errorf("run sandboxed command %q: %w (%v)", c.Args[0], context.Cause(ctx), werr)
	}
	if werr != nil {
		return fmt.Errorf("run sandboxed command %q: %w", c.Args[0], werr)
	}
	return nil
}

// backend is one way of running a command: the exec.Cmd to start and how
// to signal and clean up what it started.
type backend interface {
	cmd() *exec.Cmd
	started() error // after Start, before Wait
	term()          // SIGTERM the command, as far as the backend can
	kill()          // SIGKILL everything in the sandbox; safe to repeat
	waitGone()      // after kill: wait until everything in the sandbox is gone
	cleanup()
}

// sandboxEnv is c.Env with HOME and TMPDIR replaced by the private ones,
// and PWD set to the working directory (bwrap always sets it; the other
// backends follow so every backend gives the same environment).
func sandboxEnv(c Cmd) []string {
	out := make([]string, 0, len(c.Env)+3)
	for _, kv := range c.Env {
		if hasKey(kv, "HOME") || hasKey(kv, "TMPDIR") || hasKey(kv, "PWD") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+homeDir, "TMPDIR="+tmpDir, "PWD="+filepath.Clean(c.Dir))
}

func hasKey(kv, key string) bool {
	return len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '='
}

// noneProc runs the command as its own process group: today's behaviour.
type noneProc struct{ c *exec.Cmd }

func noneBackend(c Cmd) (backend, error) {
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return &noneProc{c: cmd}, nil
}

func (p *noneProc) cmd() *exec.Cmd { return p.c }
func (p *noneProc) started() error { return nil }
func (p *noneProc) term()          { _ = syscall.Kill(-p.c.Process.Pid, syscall.SIGTERM) }
func (p *noneProc) kill()          { _ = syscall.Kill(-p.c.Process.Pid, syscall.SIGKILL) }
func (p *noneProc) waitGone()      {}
func (p *noneProc) cleanup()       {}

// limitedBuffer keeps the first 4 KiB written: enough for a probe's error.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
