package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsNodeMain runs one node of the suite's JetStream cluster in this
// process (the suite starts itself with "nats-node"), so that killing the
// node is a real kill -9 of a nats-server process.
func natsNodeMain(args []string) error {
	fs := flag.NewFlagSet("chaos nats-node", flag.ContinueOnError)
	name := fs.String("name", "", "server name")
	port := fs.Int("port", 0, "client port")
	cport := fs.Int("cluster-port", 0, "route port")
	routes := fs.String("routes", "", "comma-separated route URLs of the other nodes")
	dir := fs.String("dir", "", "JetStream store")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := &server.Options{
		ServerName: *name, Host: "127.0.0.1", Port: *port, JetStream: true, StoreDir: *dir,
		// Every write is fsynced, as prloop's deployments configure it.
		SyncAlways: true,
		NoSigs:     true,
	}
	if *routes != "" {
		opts.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: *cport}
	}
	for _, r := range strings.FieldsFunc(*routes, func(r rune) bool { return r == ',' }) {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("route %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats node %s: %w", *name, err)
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return fmt.Errorf("nats node %s did not start", *name)
	}
	fmt.Printf("nats node %s ready on %s\n", *name, s.ClientURL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// cluster is the three nats-node processes.
type cluster struct {
	nodes []*proc
	urls  []string
}

func (c *cluster) url() string { return strings.Join(c.urls, ",") }

func startCluster(self, dir, logs string) (*cluster, error) {
	const n = 3
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	for i := 0; i < n; i++ {
		var routes []string
		for j := 0; j < n; j++ {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+j]))
			}
		}
		name := fmt.Sprintf("nats-%d", i)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		p := &proc{name: name, kind: "nats", bin: self, logs: logs, env: os.Environ(), args: []string{
			"nats-node", "-name", name, "-port", fmt.Sprint(ports[i]), "-cluster-port", fmt.Sprint(ports[n+i]),
			"-routes", strings.Join(routes, ","), "-dir", dir + "/" + name,
		}}
		if err := p.start(); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, p)
	}
	return c, nil
}

// waitJetStream waits until the cluster has a meta leader and answers
// JetStream requests.
func waitJetStream(ctx context.Context, nc *nats.Conn) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := nc.RequestWithContext(rctx, "$JS.API.INFO", nil)
		cancel()
		if err == nil && !strings.Contains(string(m.Data), `"error"`) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return errors.New("jetstream cluster has no leader after 60s")
}
