package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const probeStream = "CHAOS_PROBE"

// probe publishes to an R3 stream of its own through the whole run, node
// loss and step-downs included, and remembers what JetStream acknowledged:
// every acknowledged message must be in the stream at the end.
type probe struct {
	js     jetstream.JetStream
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  map[string]uint64 // msg id -> stream sequence
	failed int
}

func startProbe(ctx context.Context, js jetstream.JetStream) (*probe, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{
		Name: probeStream, Subjects: []string{"chaos.probe"}, Replicas: 3, Storage: jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("create probe stream: %w", err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	p := &probe{js: js, cancel: pcancel, done: make(chan struct{}), acked: map[string]uint64{}}
	go func() {
		defer close(p.done)
		for i := 0; pctx.Err() == nil; i++ {
			id := "p" + strconv.Itoa(i)
			actx, acancel := context.WithTimeout(pctx, 3*time.Second)
			ack, err := js.Publish(actx, "chaos.probe", []byte(id), jetstream.WithMsgID(id))
			acancel()
			p.mu.Lock()
			if err == nil {
				p.acked[id] = ack.Sequence
			} else {
				p.failed++
			}
			p.mu.Unlock()
			select {
			case <-pctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return p, nil
}

func (p *probe) stop() {
	p.cancel()
	<-p.done
}

// missing returns the acknowledged ids the stream no longer holds.
func (p *probe) missing(ctx context.Context) ([]string, int, error) {
	s, err := p.js.Stream(ctx, probeStream)
	if err != nil {
		return nil, 0, fmt.Errorf("probe stream: %w", err)
	}
	have := map[string]bool{}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("probe stream info: %w", err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		have[string(m.Data)] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.acked {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out, len(p.acked), nil
}
