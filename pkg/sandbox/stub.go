// Package sandbox is a STUB replaced by the real package on merge.
package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"syscall"
	"time"
)

// Mode is a sandbox backend.
type Mode string

// Modes.
const (
	Auto       Mode = "auto"
	Bwrap      Mode = "bwrap"
	Namespaces Mode = "namespaces"
	None       Mode = "none"
)

// ParseMode parses PRLOOP_AGENT_SANDBOX.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Auto, Bwrap, Namespaces, None:
		return Mode(s), nil
	}
	return "", errors.New("PRLOOP_AGENT_SANDBOX: bad")
}

// Options are per-service settings.
type Options struct {
	Mode      Mode
	ReadOnly  []string
	Writable  []string
	MemoryMax int64
}

// Sandbox runs commands.
type Sandbox struct{ mode Mode }

// New resolves the mode.
func New(opts Options, log *slog.Logger) (*Sandbox, error) { return &Sandbox{mode: None}, nil }

// Mode is the resolved backend.
func (s *Sandbox) Mode() Mode { return s.mode }

// Cmd is one command.
type Cmd struct {
	Args           []string
	Dir            string
	Writable       []string
	ReadOnly       []string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	KillGrace      time.Duration
}

// Run runs c.
func (s *Sandbox) Run(ctx context.Context, c Cmd) error {
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Dir, c.Env, c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = c.KillGrace
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(c.KillGrace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return err
}

// Init is a no-op in the stub.
func Init() {}
