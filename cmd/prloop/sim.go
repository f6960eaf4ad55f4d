package main

import (
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/logging"
)

// startSim starts an in-process GitHub simulator seeded with the demo world
// and points this process's configuration at it, by setting the variables
// a user would set for a real GitHub: PRLOOP_GITHUB_API_URL, GITHUB_TOKEN,
// PRLOOP_GITHUB_LOGIN and, unless set, PRLOOP_REPOS. prloop's state goes
// to data, or, when that is empty and PRLOOP_DATA_DIR is not set, to a
// directory of its own beside the simulator's: the simulator is new on
// every run, and records of an earlier one in ./.prloop (a merged
// demo/widgets#1) would make prloop ignore the new run's PRs.
func startSim(stderr io.Writer, data string) (stop func(), err error) {
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
	switch {
	case data != "":
		set["PRLOOP_DATA_DIR"] = data
	case os.Getenv("PRLOOP_DATA_DIR") == "":
		data = filepath.Join(dir, "prloop")
		set["PRLOOP_DATA_DIR"] = data
	default:
		data = os.Getenv("PRLOOP_DATA_DIR")
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
	fmt.Fprint(stderr, simWalkthrough(srv.URL, demo.PR, demo.Tokens[ghsim.DemoReviewer], data))
	return stop, nil
}

// simWalkthrough is what to try against the simulator, as alice, the demo's
// reviewer: curl lines to paste into another terminal. It is pure.
func simWalkthrough(api string, pr ghref.PR, aliceToken, data string) string {
	issue := fmt.Sprintf("%s/repos/%s/%s/issues/%d", api, pr.Owner, pr.Repo, pr.Number)
	auth := "-H 'Authorization: token " + aliceToken + "'"
	return fmt.Sprintf(`prloop's state for this run: %[1]s (gone with the simulator; -data DIR keeps it elsewhere)
Try, in another terminal, as alice:
  # ask for a change: the agent (PRLOOP_AGENT_CMD) gets the comment
  curl -s %[2]s -d '{"body":"please handle an empty name"}' %[3]s/comments
  # approve with a thumbs-up: the merger merges it
  curl -s %[2]s -d '{"content":"+1"}' %[3]s/reactions
  # where it stands
  PRLOOP_DATA_DIR=%[1]s prloop status
`, data, auth, issue)
}
