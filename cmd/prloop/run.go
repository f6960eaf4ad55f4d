package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/web"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// allConfig is the all-in-one configuration: every service's settings, read
// from the same PRLOOP_* variables.
type allConfig struct {
	Poller    poller.Config    `ignored:"true"`
	Feedback  feedback.Config  `ignored:"true"`
	Merger    merger.Config    `ignored:"true"`
	Escalator escalator.Config `ignored:"true"`
}

// Shared returns the settings all services share.
func (c *allConfig) Shared() config.Common { return c.Poller.Common }

// Validate loads and validates each service's configuration. envconfig
// cannot fill four structs that share variable names in one pass, so each
// is processed on its own.
func (c *allConfig) Validate() error {
	for _, cfg := range []config.Validator{&c.Poller, &c.Feedback, &c.Merger, &c.Escalator} {
		if err := config.Fill(cfg); err != nil {
			return err
		}
	}
	return nil
}

func runAll(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	withSim := fs.Bool("sim", false, "run against an in-process GitHub simulator with a demo repository instead of GitHub (no token needed)")
	simData := fs.String("data", "", "with -sim: the data directory (NATS, records, workspaces); default a new temporary one each run, unless PRLOOP_DATA_DIR is set")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: prloop run [-sim]\n\nRuns the poller, feedback, merger and escalator services in one process,\nagainst GitHub (GITHUB_TOKEN or GH_TOKEN or 'gh auth token', PRLOOP_REPOS)\nor, with -sim, against a local GitHub simulator.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\nEnvironment:\n")
		fmt.Fprint(stderr, config.Usage(&poller.Config{}, &feedback.Config{}, &merger.Config{}, &escalator.Config{}))
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: prloop run takes no arguments, got %q", errUsage, fs.Args())
	}
	// Before the simulator sets its own: the environment is the user's.
	if err := config.CheckEnv(os.Environ(), knownVars()); err != nil {
		return err
	}
	if *simData != "" && !*withSim {
		return fmt.Errorf("%w: -data goes with -sim (without it, set PRLOOP_DATA_DIR)", errUsage)
	}
	if *withSim {
		stopSim, err := startSim(stderr, *simData)
		if err != nil {
			return err
		}
		defer stopSim()
	}
	cfg := &allConfig{}
	return app.Run(ctx, "prloop", cfg, stderr, func(ctx context.Context, rt *app.Runtime) ([]app.Service, error) {
		return buildServices(ctx, rt, cfg)
	})
}

// buildServices builds the four services on one runtime, and the web page
// (logged as "web page" with its URL) that shows where their PRs stand.
func buildServices(ctx context.Context, rt *app.Runtime, cfg *allConfig) ([]app.Service, error) {
	p, err := poller.FromRuntime(ctx, rt, cfg.Poller)
	if err != nil {
		return nil, err
	}
	f, err := feedback.FromRuntime(ctx, rt, cfg.Feedback)
	if err != nil {
		return nil, err
	}
	m, err := merger.FromRuntime(ctx, rt, cfg.Merger)
	if err != nil {
		return nil, err
	}
	esc, err := escalator.FromRuntime(ctx, rt, cfg.Escalator)
	if err != nil {
		return nil, err
	}
	page := web.FromRuntime(rt, web.Options{Line: prstatus.Options{MaxFixCycles: cfg.Feedback.MaxFixCycles, Label: cfg.Poller.EscalationLabel}})
	return []app.Service{p, f, m, esc, page}, nil
}
