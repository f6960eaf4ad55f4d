package main

import (
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/logging"
)

// startSim starts an in-process GitHub simulator seeded with the demo world
// and points this process's configuration at it, by setting the variables
// a user would set for a real GitHub: PRLOOP_GITHUB_API_URL, GITHUB_TOKEN,
// PRLOOP_GITHUB_LOGIN and, unless set, PRLOOP_REPOS.
func startSim(stderr io.Writer) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "prloop-sim-")
	if err != nil {
		return nil, fmt.Errorf("create simulator directory: %w", err)
	}
	sim, err := ghsim.New(ghsim.Options{Dir: dir, RealClock: true, Logger: logging.New(stderr, "warn", "auto")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv := httptest.NewServer(sim)
	stop = func() {
		srv.Close()
		_ = sim.Close()
		_ = os.RemoveAll(dir)
	}
	demo, err := ghsim.SeedDemo(sim)
	if err != nil {
		stop()
		return nil, err
	}
	set := map[string]string{
		"PRLOOP_GITHUB_API_URL": srv.URL,
		"GITHUB_TOKEN":          demo.Tokens[ghsim.DemoPrloop],
		"PRLOOP_GITHUB_LOGIN":   ghsim.DemoPrloop,
	}
	if os.Getenv("PRLOOP_REPOS") == "" {
		set["PRLOOP_REPOS"] = demo.Repo.String()
	}
	var errs []error
	for k, v := range set {
		errs = append(errs, os.Setenv(k, v))
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, fmt.Errorf("configure for the simulator: %w", err)
	}
	fmt.Fprintf(stderr, "GitHub simulator at %s with %s (PR %s); reviewer token for alice: %s\n",
		srv.URL, demo.Repo, demo.PR, demo.Tokens[ghsim.DemoReviewer])
	return stop, nil
}
