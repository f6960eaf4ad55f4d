package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/state"
)

// injector schedules the process faults. A process it has down or paused
// is busy until it is back, so two faults never fight over one process.
type injector struct {
	w    *world
	mu   sync.Mutex
	busy map[*proc]bool
	wg   sync.WaitGroup
	// agentOf maps a PR to the feedback replica whose agent started last.
	agentOf map[string]*proc
}

func (w *world) injectFaults(ctx context.Context) {
	in := &injector{w: w, busy: map[*proc]bool{}, agentOf: map[string]*proc{}}
	defer in.wg.Wait()
	windows := make(chan string, 64)
	go in.watchAgents(ctx, windows)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case win := <-w.hooks.windows:
				offer(windows, win)
			}
		}
	}()
	r := w.rng
	next := func(lo, hi time.Duration) <-chan time.Time { return time.After(r.between(lo, hi)) }
	never := make(<-chan time.Time)
	kill, stop, node, step := never, never, never, never
	if w.o.faults["kill"] {
		kill = next(3*time.Second, 10*time.Second)
	}
	if w.o.faults["stop"] {
		stop = next(10*time.Second, 30*time.Second)
	}
	if w.o.faults["cluster"] {
		node = next(15*time.Second, 40*time.Second)
		step = next(5*time.Second, 20*time.Second)
	}
	lastWindowKill := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case win := <-windows:
			if !w.o.faults["kill"] || time.Since(lastWindowKill) < 3*time.Second || r.float() < 0.4 {
				continue
			}
			if p := in.target(win); p != nil && in.killRestart(ctx, p, win) {
				lastWindowKill = time.Now()
			}
		case <-kill:
			in.killRestart(ctx, w.procs[r.intn(len(w.procs))], "random")
			kill = next(3*time.Second, 12*time.Second)
		case <-stop:
			in.pause(ctx, w.procs[r.intn(len(w.procs))])
			stop = next(30*time.Second, 60*time.Second)
		case <-node:
			in.nodeLoss(ctx)
			node = next(60*time.Second, 120*time.Second)
		case <-step:
			in.stepDown(ctx)
			step = next(15*time.Second, 40*time.Second)
		}
	}
}

// target picks the process a dangerous window belongs to.
func (in *injector) target(win string) *proc {
	switch {
	case strings.HasPrefix(win, "agent ") || strings.HasPrefix(win, "push "):
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.agentOf[strings.SplitN(win, " ", 2)[1]]
	case win == "merge":
		return in.random("merger")
	case win == "escalation":
		return in.random("escalator")
	}
	return nil
}

func (in *injector) random(kind string) *proc {
	var ps []*proc
	for _, p := range in.w.procs {
		if p.kind == kind {
			ps = append(ps, p)
		}
	}
	return ps[in.w.rng.intn(len(ps))]
}

func (in *injector) claim(p *proc) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.busy[p] || p.pid() == 0 {
		return false
	}
	in.busy[p] = true
	return true
}

func (in *injector) release(p *proc) {
	in.mu.Lock()
	delete(in.busy, p)
	in.mu.Unlock()
}

// killRestart kills p with SIGKILL now and starts it again after a random
// delay. window names why ("random", "agent", "push", "merge", "escalation").
func (in *injector) killRestart(ctx context.Context, p *proc, window string) bool {
	if !in.claim(p) {
		return false
	}
	window = strings.SplitN(window, " ", 2)[0]
	p.kill()
	in.w.rep.countKill(p.kind, window)
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.release(p)
		sleep(ctx, in.w.rng.between(500*time.Millisecond, 4*time.Second))
		if err := p.start(); err != nil {
			in.w.rep.violate("restart", "", err.Error())
		}
	}()
	return true
}

// pause stops p (SIGSTOP) for longer than a lease TTL, then resumes it:
// its leases expire under it, another replica takes over, and the paused
// one must notice before it acts on what it no longer holds.
func (in *injector) pause(ctx context.Context, p *proc) {
	if !in.claim(p) {
		return
	}
	p.pause(true)
	in.w.rep.countStop(p.kind)
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.release(p)
		t := time.NewTimer(leaseTTL + 3*time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		p.pause(false)
	}()
}

// nodeLoss kills one NATS node with SIGKILL under load and restarts it on
// its store a few seconds later.
func (in *injector) nodeLoss(ctx context.Context) {
	nodes := in.w.cl.nodes
	p := nodes[in.w.rng.intn(len(nodes))]
	if !in.claim(p) {
		return
	}
	p.kill()
	in.w.rep.countNodeLoss()
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.release(p)
		sleep(ctx, in.w.rng.between(3*time.Second, 8*time.Second))
		if err := p.start(); err != nil {
			in.w.rep.violate("restart", "", err.Error())
		}
	}()
}

// stepDown forces the leader of the event stream or of the state bucket's
// stream to step down.
func (in *injector) stepDown(ctx context.Context) {
	stream := []string{events.StreamName, "KV_" + state.Bucket}[in.w.rng.intn(2)]
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := in.w.nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
	if err == nil && strings.Contains(string(m.Data), `"success":true`) {
		in.w.rep.countStepDown(stream)
	}
}

// watchAgents follows the scripted agent's record: a start opens the
// "agent" window of the replica running it, an end the "push" window
// (prloop is about to push the run's work and announce it).
func (in *injector) watchAgents(ctx context.Context, windows chan<- string) {
	path := filepath.Join(in.w.dir, "records", "runs")
	var off int64
	for sleep(ctx, 100*time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if _, err := f.Seek(off, 0); err != nil {
			f.Close()
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			off += int64(len(line)) + 1
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			pr := fields[1]
			switch fields[0] {
			case "start":
				if p := in.feedbackRunningAgent(); p != nil {
					in.mu.Lock()
					in.agentOf[pr] = p
					in.mu.Unlock()
				}
				offer(windows, "agent "+pr)
			case "end":
				offer(windows, "push "+pr)
			}
		}
		f.Close()
	}
}

// feedbackRunningAgent returns the feedback replica an agent process
// descends from (the newest agent's, if several run).
func (in *injector) feedbackRunningAgent() *proc {
	byPid := map[int]*proc{}
	pids := map[int]bool{}
	for _, p := range in.w.procs {
		if p.kind == "feedback" {
			if pid := p.pid(); pid != 0 {
				byPid[pid], pids[pid] = p, true
			}
		}
	}
	agents := processesNaming(filepath.Join(in.w.dir, "agent", "agent.sh"))
	for i := len(agents) - 1; i >= 0; i-- {
		if pid := ancestorIn(agents[i], pids); pid != 0 {
			return byPid[pid]
		}
	}
	return nil
}

func offer(c chan<- string, v string) {
	select {
	case c <- v:
	default:
	}
}
