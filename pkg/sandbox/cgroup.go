package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupParent is this service's own cgroup v2 directory, where each run
// gets a child cgroup with memory.max.
type cgroupParent struct {
	dir string
	max int64
}

// findCgroupParent finds this process's cgroup v2 directory and checks that
// children of it can get a memory limit.
func findCgroupParent() (*cgroupParent, error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	rel := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if rel == "" {
		return nil, errors.New("find cgroup v2 of this process: none in /proc/self/cgroup")
	}
	dir := filepath.Join(mnt, rel)
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup %s is not writable: %w", dir, err)
	}
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, fmt.Errorf("read subtree controllers of cgroup %s: %w", dir, err)
	}
	if !strings.Contains(" "+strings.TrimSpace(string(ctl))+" ", " memory ") {
		return nil, fmt.Errorf("cgroup %s does not enable the memory controller for its children", dir)
	}
	return &cgroupParent{dir: dir}, nil
}

func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if fs := strings.Fields(pre); len(fs) >= 5 {
			return fs[4], nil
		}
	}
	return "", errors.New("find cgroup v2: not mounted")
}

// cgroupRun is one run's cgroup; nil when there is none.
type cgroupRun struct {
	dir string
	fd  int
}

// cgroupFor makes a cgroup with memory.max for one run and has cmd start
// in it (clone into cgroup, so nothing runs unlimited in between).
func (s *Sandbox) cgroupFor(cmd *exec.Cmd) (*cgroupRun, error) {
	if s.opts.MemoryMax <= 0 {
		return nil, nil
	}
	if s.cg == nil {
		return nil, errors.New("no writable cgroup v2 with the memory controller")
	}
	dir, err := os.MkdirTemp(s.cg.dir, "prloop-agent-")
	if err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(s.opts.MemoryMax, 10)), 0); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("set memory.max of cgroup %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	return &cgroupRun{dir: dir, fd: fd}, nil
}

// remove deletes the run's cgroup once its last process is gone.
func (r *cgroupRun) remove() {
	if r == nil {
		return
	}
	_ = unix.Close(r.fd)
	// cgroup.kill (Linux 5.14) ends anything left; rmdir fails while a
	// process is still exiting, so retry briefly.
	_ = os.WriteFile(filepath.Join(r.dir, "cgroup.kill"), []byte("1"), 0)
	for range 50 {
		if err := os.Remove(r.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
