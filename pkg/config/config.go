// Package config loads prloop's configuration from PRLOOP_* environment
// variables with envconfig, and holds the settings every service shares.
//
// Each service declares one struct that embeds Common and adds its own
// fields, each with a doc comment, and a Validate method. Load fills it and
// validates it; a bad value fails at start with a message that names the
// variable and says what is wrong.
package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx"
)

// Prefix is the prefix of every prloop environment variable. Struct tags
// spell the whole name (envconfig:"PRLOOP_NATS_URL") and Load passes no
// prefix to envconfig, because with a prefix envconfig also falls back to the
// bare name (NATS_URL, LOG_LEVEL …), which unrelated software sets.
const Prefix = "PRLOOP_"

// Validator is a configuration that can check itself.
type Validator interface {
	Validate() error
}

// Common holds the settings every prloop service shares.
type Common struct {
	// NATSURL is the NATS server or cluster to use (e.g. nats://nats:4222).
	// Empty makes prloop run and demo start an embedded NATS server with
	// its data in DataDir; a service binary refuses to start without it.
	NATSURL string `envconfig:"PRLOOP_NATS_URL" desc:"NATS server or cluster (nats://host:4222); empty makes prloop run and demo start an embedded server, and a service binary refuses to start"`
	// NATSCredsFile is a NATS credentials file, when the server needs one.
	NATSCredsFile string `envconfig:"PRLOOP_NATS_CREDS_FILE" desc:"NATS credentials: an nkey seed (.nk, as prloop nats-keys writes) or a .creds file; the operator commands default to PRLOOP_DATA_DIR/nats-user.nk"`
	// NATSPort is the port the embedded NATS server listens on (127.0.0.1).
	NATSPort int `envconfig:"PRLOOP_NATS_PORT" default:"4222" desc:"port of the embedded NATS server, on 127.0.0.1; -1 picks a free one"`
	// DataDir holds the embedded NATS server's data and other local state.
	DataDir string `envconfig:"PRLOOP_DATA_DIR" default:"./.prloop" desc:"the embedded NATS server's JetStream store and other local state"`
	// StreamReplicas is the replication factor of prloop's streams and KV
	// buckets: 1 on a single server, 3 on a three-node cluster.
	StreamReplicas int `envconfig:"PRLOOP_STREAM_REPLICAS" default:"1" desc:"replicas of the stream and KV buckets, 1 to 5: 1 on a single server, 3 on a three-node cluster"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `envconfig:"PRLOOP_LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	// LogFormat is json, text, or auto (text on a terminal, JSON otherwise).
	LogFormat string `envconfig:"PRLOOP_LOG_FORMAT" default:"auto" desc:"json, text, or auto (text on a terminal, JSON otherwise)"`
	// HTTPAddr is where health endpoints are served (host:port; port 0 picks
	// a free one and logs it; empty disables the server).
	HTTPAddr string `envconfig:"PRLOOP_HTTP_ADDR" default:"127.0.0.1:0" desc:"host:port of /healthz, /readyz, /metrics, the web page (and the poller's /webhook); port 0 picks a free port and logs it; empty disables the server"`
	// ShutdownGrace bounds a graceful shutdown: stop consumers, wait for
	// in-flight work, drain NATS.
	ShutdownGrace time.Duration `envconfig:"PRLOOP_SHUTDOWN_GRACE" default:"8s" desc:"how long a shutdown waits for in-flight work"`
	// TestClockSkew moves the clock the process judges review timeouts by
	// (Runtime.Now) this far from the host's: for the chaos suite, which
	// runs one replica of each service with a skewed clock. Test-only;
	// leases and JetStream do not read it (their TTLs are the server's).
	TestClockSkew time.Duration `envconfig:"PRLOOP_TEST_CLOCK_SKEW" default:"0" desc:"test-only: moves the clock review timeouts are judged by (the chaos suite skews one replica)"`
}

// Shared returns the shared settings; service configs embed Common and so
// satisfy app.Config through it.
func (c Common) Shared() Common { return c }

// Validate checks the shared settings.
func (c Common) Validate() error {
	var errs []error
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "warning", "error":
	default:
		errs = append(errs, fmt.Errorf("PRLOOP_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	switch strings.ToLower(c.LogFormat) {
	case "auto", "json", "text":
	default:
		errs = append(errs, fmt.Errorf("PRLOOP_LOG_FORMAT=%q: want auto, json or text", c.LogFormat))
	}
	if c.NATSURL == "" && strings.TrimSpace(c.DataDir) == "" {
		errs = append(errs, errors.New("PRLOOP_DATA_DIR is empty: the embedded NATS server needs a data directory (or set PRLOOP_NATS_URL)"))
	}
	if c.NATSURL != "" && !strings.Contains(c.NATSURL, "://") && !strings.Contains(c.NATSURL, ":") {
		errs = append(errs, fmt.Errorf("PRLOOP_NATS_URL=%q: want a URL such as nats://host:4222", c.NATSURL))
	}
	if c.NATSPort < -1 || c.NATSPort > 65535 {
		errs = append(errs, fmt.Errorf("PRLOOP_NATS_PORT=%d: want a port from 1 to 65535, or -1 for any free port", c.NATSPort))
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("PRLOOP_STREAM_REPLICAS=%d: want 1 to 5 (JetStream's limit)", c.StreamReplicas))
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_HTTP_ADDR=%q: want host:port, e.g. :8080 or 127.0.0.1:0: %v", c.HTTPAddr, err))
		}
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_SHUTDOWN_GRACE=%s: want a positive duration such as 8s", c.ShutdownGrace))
	}
	return errors.Join(errs...)
}

// CheckBackoff checks a list of redelivery delays read from the variable
// name: every delay must be positive. Checked here, at start, so that the
// error names the variable rather than surfacing from the consumer.
func CheckBackoff(name string, delays []time.Duration) error {
	var errs []error
	for _, d := range delays {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %s is not a positive duration", name, d))
		}
	}
	return errors.Join(errs...)
}

// NATS returns the connection options these settings describe.
func (c Common) NATS(name string) natsx.Options {
	return natsx.Options{URL: c.NATSURL, CredsFile: c.NATSCredsFile, DataDir: c.DataDir, Port: c.NATSPort, Name: name}
}

// Streams returns the stream options these settings describe.
func (c Common) Streams() events.StreamOptions {
	return events.StreamOptions{Replicas: c.StreamReplicas}
}

// Load fills cfg from PRLOOP_* variables and validates it. Errors name the
// variable, the value and what is wrong.
func Load(cfg Validator) error {
	if err := Fill(cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Fill is Load without the "config:" prefix on errors, for a configuration
// made of several that each load their own part.
func Fill(cfg Validator) error {
	if err := envconfig.Process("", cfg); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s=%q: not a valid %s: %v", pe.KeyName, pe.Value, pe.TypeName, pe.Err)
		}
		return err
	}
	return cfg.Validate()
}

// Usage lists the variables the configs read, each once, with their
// defaults and descriptions, for --help.
func Usage(cfgs ...any) string {
	vars, err := Vars(cfgs...)
	if err != nil {
		return err.Error() + "\n" // a malformed struct tag: a programming error, shown where it is seen
	}
	var out strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&out, "  %s", v.Name)
		if v.Default != "" {
			fmt.Fprintf(&out, " (default %s)", v.Default)
		}
		fmt.Fprintf(&out, "\n      %s\n", v.Desc)
	}
	return out.String()
}
