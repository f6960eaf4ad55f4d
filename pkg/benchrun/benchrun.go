// Package benchrun is the plumbing prloop's benchmark commands share
// (services/poller/bench, services/merger/bench): a scratch directory,
// building the service binary under test, running it as a child process
// and stopping it, bounded waits and percentiles. The benchmarks run real
// binaries configured only by PRLOOP_* variables, as production does, so
// that what they measure is the service and not a test double.
package benchrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/ctxtime"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// ScratchDir makes a temporary directory for a run's repositories and
// JetStream store, in memory (/dev/shm) where there is one: a benchmark
// of request counts and latencies should not measure the disk.
func ScratchDir(prefix string) (string, error) {
	dir := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir = "/dev/shm"
	}
	d, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", fmt.Errorf("create scratch directory: %w", err)
	}
	return d, nil
}

// Build compiles the main package pkg (relative to the repository root,
// e.g. "./services/merger/cmd/merger") to out, with go build's output on
// stderr. The root is the nearest directory above the working directory
// that holds go.work, so that a benchmark's own test, which runs in the
// benchmark's directory, builds the same binary as `go run` from the root.
func Build(ctx context.Context, pkg, out string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

// Root returns the repository root: the nearest directory above the
// working directory that holds go.work.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository root: no go.work above the working directory")
		}
		dir = parent
	}
}

// Child is a contender's process.
type Child struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd and watches for its end.
func Start(cmd *exec.Cmd) (*Child, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	c := &Child{Cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Done is closed when the process has ended.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is how the process ended (exec.Cmd.Wait's error); valid once Done
// is closed.
func (c *Child) Err() error { return c.err }

// Stop asks the process to shut down (SIGTERM), as an orchestrator does,
// and kills it when it has not ended within grace.
func (c *Child) Stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.Cmd.Process.Kill()
		<-c.done
	}
}

// Event is one event on prloop's stream as a benchmark saw it: when it
// arrived, its PR and type from the subject, and the message body, decoded
// only by those who need its data (Data).
type Event struct {
	Seen time.Time
	PR   ghref.PR
	Type events.Type
	Body []byte
}

// Data decodes the event's typed data.
func (e Event) Data() (events.Data, error) {
	_, d, err := events.Decode(e.Body)
	return d, err
}

// WatchEvents calls fn for every event on the stream, from the first, in
// stream order (an ordered consumer), each stamped with when it arrived:
// a benchmark times what the contender did by the events it published.
// Messages whose subject is not an event's are skipped. stop ends it.
func WatchEvents(ctx context.Context, js jetstream.JetStream, fn func(Event)) (stop func(), err error) {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("watch the event stream: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		seen := time.Now()
		pr, typ, err := events.ParseSubject(m.Subject())
		if err != nil {
			return
		}
		fn(Event{Seen: seen, PR: pr, Type: typ, Body: m.Data()})
	})
	if err != nil {
		return nil, fmt.Errorf("watch the event stream: %w", err)
	}
	return cc.Stop, nil
}

// ErrTimedOut is WaitUntil's answer when the limit passed first.
var ErrTimedOut = errors.New("timed out")

// WaitUntil polls cond every 20 ms until it holds, limit has passed
// (ErrTimedOut) or ctx is done.
func WaitUntil(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return ErrTimedOut
		}
		if err := ctxtime.Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// Percentile returns the p-quantile (0 to 1) of sorted durations, the
// nearest rank below; zero for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}
