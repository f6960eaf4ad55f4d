package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec,
// so that none reaches a sandboxed command.
//
// Go opens its own descriptors close-on-exec; one without the flag was
// inherited from whatever started prloop (a shell, a process manager, a CI
// runner), and survives every exec after it: into bwrap, which passes all
// open descriptors on to the command it runs, and into the namespace init.
// A descriptor of a host directory would let the agent walk out of its
// mounts (ls /proc/self/fd/N/), and one of a socket would let it talk to
// whatever is behind it. Nothing in prloop relies on an inherited
// descriptor. The descriptors os/exec hands a child (stdio, ExtraFiles)
// are dup'ed after the fork, so they are not affected.
//
// It runs before every command, not once: it costs one system call, and a
// descriptor some library opened without the flag is caught too.
func closeInheritedOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11 there is no CLOSE_RANGE_CLOEXEC: one at a time.
	if perr := closeOnExecEach(); perr != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", errors.Join(err, perr))
	}
	return nil
}

// closeOnExecEach marks the open descriptors above stderr close-on-exec
// one by one, as /proc/self/fd lists them.
func closeOnExecEach() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
