package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one process the suite runs and may kill, stop and restart: a
// NATS node or a service replica. Each start gets a log file of its own
// (name.N.log), so a kill never truncates what the last life wrote.
type proc struct {
	name string
	kind string // "nats" or the service's name
	bin  string
	args []string
	env  []string
	logs string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	stopped bool // SIGSTOPped
	// want says the process should run: one that exits on its own (a
	// service gives up at start when JetStream is slow to create a
	// bucket) is restarted a second later, as Kubernetes would.
	want bool
	// exits counts exits the suite did not cause.
	exits int
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	f, err := os.Create(filepath.Join(p.logs, p.name+"."+strconv.Itoa(p.starts)+".log"))
	if err != nil {
		return fmt.Errorf("create log of %s: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a kill takes the agent it runs with it, as a
	// container's end would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
		p.mu.Lock()
		again := p.want && p.cmd == cmd
		if again {
			p.exits++
		}
		p.mu.Unlock()
		if again {
			time.Sleep(time.Second)
			p.mu.Lock()
			again = p.want && p.cmd == cmd
			p.mu.Unlock()
			if again {
				_ = p.start()
			}
		}
	}()
	p.cmd, p.done, p.stopped, p.want = cmd, done, false, true
	return nil
}

// release marks the process as one the suite stops (no restart when it
// exits) and returns its command.
func (p *proc) release() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want = false
	return p.cmd, p.done
}

func (p *proc) selfExits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}

// pid is the running process's id, 0 when not running.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() {
	cmd, done := p.release()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// term asks the process to stop and waits up to grace, then kills it.
func (p *proc) term(grace time.Duration) {
	cmd, done := p.release()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		// Whatever it left behind in its group (an agent) goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	case <-time.After(grace):
		p.kill()
	}
}

// pause sends SIGSTOP (every process of the group) or SIGCONT.
func (p *proc) pause(stop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	p.stopped = stop
}

// logText returns everything every life of the process logged.
func (p *proc) logText() string {
	var b strings.Builder
	p.mu.Lock()
	n := p.starts
	p.mu.Unlock()
	for i := 1; i <= n; i++ {
		data, _ := os.ReadFile(filepath.Join(p.logs, p.name+"."+strconv.Itoa(i)+".log"))
		b.Write(data)
	}
	return b.String()
}

// ancestorIn returns which of pids is pid or an ancestor of it (by
// /proc/<pid>/stat's parent), or 0: it finds the feedback replica an
// agent process belongs to, whatever sandbox sits between them.
func ancestorIn(pid int, pids map[int]bool) int {
	for i := 0; i < 64 && pid > 1; i++ {
		if pids[pid] {
			return pid
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			return 0
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return 0
}

// processesNaming lists the pids whose command line contains marker.
func processesNaming(marker string) []int {
	var out []int
	for pid, line := range cmdlines() {
		if strings.Contains(line, marker) {
			out = append(out, pid)
		}
	}
	return out
}

// cmdlinesWith returns the command lines that contain secret: a command
// line is visible to every user of a host.
func cmdlinesWith(secret string) []string {
	var out []string
	for _, line := range cmdlines() {
		if strings.Contains(line, secret) {
			out = append(out, line)
		}
	}
	return out
}

// cmdlines returns every process's command line, arguments joined by
// spaces, by pid.
func cmdlines() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			out[pid] = strings.ReplaceAll(string(b), "\x00", " ")
		}
	}
	return out
}
