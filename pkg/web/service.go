package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/prstatus"
)

// Config are the settings the page's status lines name, for a process
// without the feedback and poller configurations that hold them (the
// merger or the poller deployed on its own). The variables are theirs.
type Config struct {
	MaxFixCycles    int    `envconfig:"PRLOOP_MAX_FIX_CYCLES" default:"2"`
	EscalationLabel string `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required"`
}

// Validate checks the settings.
func (c *Config) Validate() error {
	if c.MaxFixCycles < 0 {
		return fmt.Errorf("PRLOOP_MAX_FIX_CYCLES=%d: want 0 or more", c.MaxFixCycles)
	}
	return nil
}

// Service follows the event stream for the page.
type Service struct {
	rt   *app.Runtime
	page *Page
	max  int
}

// FromRuntime serves the page at / and each PR's page at /pr/owner/repo/number
// (its agent runs) on the runtime's HTTP server, and returns
// the service that keeps it current.
func FromRuntime(rt *app.Runtime, o Options) *Service {
	o = o.withDefaults()
	s := &Service{rt: rt, page: NewPage(nil, rt.Log, o), max: o.Escalations}
	rt.Handle("GET /{$}", s.page)
	rt.Handle(PRPattern, http.HandlerFunc(s.page.ServePR))
	return s
}

// FromEnvironment is FromRuntime with the status line's settings read from
// PRLOOP_* variables.
func FromEnvironment(rt *app.Runtime) (*Service, error) {
	var c Config
	if err := config.Fill(&c); err != nil {
		return nil, fmt.Errorf("web page: %w", err)
	}
	return FromRuntime(rt, Options{Line: prstatus.Options{MaxFixCycles: c.MaxFixCycles, Label: c.EscalationLabel}}), nil
}

// Run follows the stream until ctx ends. It never fails the process: the
// page is a view, and a service must not stop because its page cannot
// follow (a NATS user without the permissions); the page says why and the
// follower starts over, on a new board, after a backoff.
func (s *Service) Run(ctx context.Context) error {
	if addr := s.rt.HTTPAddr(); addr != "" {
		s.rt.Log.Info("web page", "url", URL(addr))
	}
	wait := time.Second
	var last error
	for {
		f := prstatus.NewFollower(s.rt.Log)
		feed := NewFeed(f, s.max)
		if last != nil {
			feed.Fail(last)
		}
		s.page.SetFeed(feed)
		err := f.Run(ctx, s.rt.JS)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("follow the event stream: stopped")
		}
		feed.Fail(err)
		last = err
		s.rt.Log.Warn("the web page stopped following the event stream; starting over", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// URL is where a browser finds the page served on addr: a server listening
// on every interface is also on localhost.
func URL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
