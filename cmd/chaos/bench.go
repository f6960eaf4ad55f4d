package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchPublish measures how long JetStream takes to acknowledge a publish
// of an event-sized message (n in a row, one at a time, as an Emitter
// publishes), with every write fsynced (sync_interval: always): on one
// node with an R1 stream, and on the 3-node cluster with an R3 stream.
func benchPublish(ctx context.Context, n int) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the suite's binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "prloop-chaos-bench-")
	if err != nil {
		return fmt.Errorf("create bench directory: %w", err)
	}
	defer os.RemoveAll(dir)
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	single := &proc{name: "nats-single", kind: "nats", bin: self, logs: dir, env: os.Environ(), args: []string{
		"nats-node", "-name", "single", "-port", fmt.Sprint(ports[0]), "-dir", filepath.Join(dir, "single"),
	}}
	if err := single.start(); err != nil {
		return err
	}
	defer single.term(5 * time.Second)
	cl, err := startCluster(self, filepath.Join(dir, "cluster"), dir)
	if err != nil {
		return err
	}
	defer stopAll(cl.nodes)
	body := make([]byte, 900) // a typical CloudEvent of prloop's
	for i := range body {
		body[i] = 'x'
	}
	fmt.Printf("publish-acknowledgement latency, %d sequential publishes of %d bytes, fsync on every write\n\n", n, len(body))
	fmt.Println("| setup | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|")
	for _, c := range []struct {
		name     string
		url      string
		replicas int
	}{
		{"1 node, R1", fmt.Sprintf("nats://127.0.0.1:%d", ports[0]), 1},
		{"3-node cluster, R3", cl.url(), 3},
	} {
		lat, err := publishLatencies(ctx, c.url, c.replicas, n, body)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		fmt.Printf("| %s | %s | %s | %s |\n", c.name, pct(lat, 50), pct(lat, 99), lat[len(lat)-1].Round(time.Microsecond))
	}
	return nil
}

func publishLatencies(ctx context.Context, url string, replicas, n int, body []byte) ([]time.Duration, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	if err := waitJetStream(ctx, nc); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench"}, Replicas: replicas, Storage: jetstream.FileStorage})
		cancel()
		if err == nil {
			break
		}
		if i == 30 {
			return nil, fmt.Errorf("create stream: %w", err)
		}
		sleep(ctx, time.Second)
	}
	// A warm-up, then the measured publishes.
	lat := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		if _, err := js.Publish(ctx, "bench", body, jetstream.WithMsgID(fmt.Sprintf("m%d", i))); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		if i >= 0 {
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	return lat, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := min(len(sorted)-1, len(sorted)*p/100)
	return sorted[i].Round(time.Microsecond)
}
