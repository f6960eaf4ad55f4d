// Package natsx connects prloop to NATS: to a server named by URL, or to a
// JetStream server it embeds in the process when no URL is given.
//
// The embedded server requires credentials to publish: an nkey user whose
// seed it keeps in the data directory (KeyFile, mode 0600), which prloop's
// in-process services and the operator's commands use. A client without
// credentials is the read-only ObserverUser, so anything else on the host
// (a coding agent included) can watch `nats sub 'pr.>'` but cannot publish an
// event or write a KV bucket.
//
// The embedded server fsyncs every write (SyncAlways): an event JetStream has
// acknowledged survives a power cut. That costs write latency, which prloop's
// event rate (a few per PR per review cycle) easily affords.
package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options say where NATS is.
type Options struct {
	// URL of a NATS server or cluster (comma-separated). Empty starts an
	// embedded server.
	URL string
	// CredsFile is a NATS credentials file for URL, if the server needs one:
	// a .creds file (JWT) or an nkey user seed (.nk).
	CredsFile string
	// DataDir holds the embedded server's JetStream store (DataDir/jetstream).
	DataDir string
	// Host and Port the embedded server listens on; Port -1 picks a free one.
	Host string
	Port int
	// Name identifies the client connection to the server (e.g. "prloop-poller").
	Name string
	// Logger receives connection events.
	Logger *slog.Logger
}

// Conn is a NATS connection with its JetStream context, and the embedded
// server when there is one.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// Server is the embedded server, nil when connected by URL.
	Server *server.Server
	// URL is the client URL to reach the server, printable for users (the
	// embedded server's when embedded).
	URL string
	// CredsFile is the credentials file the connection authenticated with:
	// the embedded server's KeyFile when embedded. Other clients that must
	// publish (prloop watch, tests' service processes) pass it as
	// PRLOOP_NATS_CREDS_FILE.
	CredsFile string
	log       *slog.Logger
}

// Connect connects to opts.URL, or starts an embedded server and connects to
// it in-process.
func Connect(ctx context.Context, opts Options) (*Conn, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{log: log}
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Asynchronous errors (a refused publish) go to the log, not to
		// the NATS client's default: a raw line on stderr.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("nats error", "err", err) }),
	}
	url := opts.URL
	if url == "" {
		srv, err := StartEmbedded(opts)
		if err != nil {
			return nil, err
		}
		c.Server = srv
		url = srv.ClientURL()
		opts.CredsFile = KeyFile(opts.DataDir)
		nopts = append(nopts, nats.InProcessServer(srv))
	}
	if opts.CredsFile != "" {
		creds, err := credsOption(opts.CredsFile)
		if err != nil {
			c.shutdownServer()
			return nil, err
		}
		nopts = append(nopts, creds)
	}
	c.URL, c.CredsFile = url, opts.CredsFile

	nc, err := connectWithRetry(ctx, url, nopts, log)
	if err != nil {
		c.shutdownServer()
		return nil, err
	}
	c.NC = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		c.shutdownServer()
		return nil, fmt.Errorf("open jetstream on %s: %w", nc.ConnectedUrlRedacted(), err)
	}
	c.JS = js
	return c, nil
}

// connectWithRetry retries the first connection until ctx is done: in a
// cluster the services often start before NATS is ready.
func connectWithRetry(ctx context.Context, url string, nopts []nats.Option, log *slog.Logger) (*nats.Conn, error) {
	delay := 250 * time.Millisecond
	for {
		nc, err := nats.Connect(url, nopts...)
		if err == nil {
			return nc, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to nats at %s: %w (is NATS running? set PRLOOP_NATS_URL, or leave it empty to use the embedded server)", redact(url), err)
		}
		log.Warn("nats not reachable yet; retrying", "url", redact(url), "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to nats at %s: %w", redact(url), errors.Join(err, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// redact drops user info from a NATS URL for messages.
func redact(url string) string {
	for i := 0; i+2 < len(url); i++ {
		if url[i:i+3] == "://" {
			rest := url[i+3:]
			for j := 0; j < len(rest) && rest[j] != '/'; j++ {
				if rest[j] == '@' {
					return url[:i+3] + "***@" + rest[j+1:]
				}
			}
			break
		}
	}
	return url
}

// StartEmbedded starts an in-process NATS server with JetStream storing in
// opts.DataDir and fsyncing every write, and waits until it accepts clients.
// Publishing takes the user key in KeyFile(opts.DataDir), created on first
// start; clients without credentials may only subscribe (ObserverUser).
func StartEmbedded(opts Options) (*server.Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("start embedded nats: a data directory is required (PRLOOP_DATA_DIR)")
	}
	store := filepath.Join(opts.DataDir, "jetstream")
	if err := os.MkdirAll(store, 0o750); err != nil {
		return nil, fmt.Errorf("start embedded nats: create data dir %s: %w", store, err)
	}
	pub, err := loadOrCreateKey(KeyFile(opts.DataDir))
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := opts.Port
	if port == 0 {
		port = server.DEFAULT_PORT
	}
	sopts := &server.Options{
		ServerName: "prloop-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
		// The key's holder may do anything; everyone else observes.
		Nkeys:      []*server.NkeyUser{{Nkey: pub}},
		Users:      []*server.User{{Username: ObserverUser, Permissions: ObserverPermissions()}},
		NoAuthUser: ObserverUser,
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("start embedded nats on %s: not ready after 10s (is port %d in use? set PRLOOP_NATS_PORT)", net.JoinHostPort(host, strconv.Itoa(port)), port)
	}
	return srv, nil
}

// Close drains the connection (flushing pending publishes and letting
// subscriptions finish) and shuts the embedded server down, within ctx.
func (c *Conn) Close(ctx context.Context) error {
	var err error
	if c.NC != nil && !c.NC.IsClosed() {
		closed := make(chan struct{})
		c.NC.SetClosedHandler(func(*nats.Conn) { close(closed) })
		if derr := c.NC.Drain(); derr != nil {
			c.NC.Close()
		} else {
			select {
			case <-closed:
			case <-ctx.Done():
				c.NC.Close()
				err = fmt.Errorf("drain nats connection: %w", ctx.Err())
			}
		}
	}
	c.shutdownServer()
	return err
}

func (c *Conn) shutdownServer() {
	if c.Server == nil {
		return
	}
	c.Server.Shutdown()
	c.Server.WaitForShutdown()
}
