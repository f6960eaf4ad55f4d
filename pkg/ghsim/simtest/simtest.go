// Package simtest serves the GitHub simulator to tests: a simulator with
// prloop's own account and one repository, over HTTP, and GitHub clients
// for it.
package simtest

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
)

// prloop's account on the simulator.
const (
	Login = "prloop-bot"
	Token = "tok-prloop"
)

// World is a simulator served over HTTP with the repository acme/widgets,
// where prloop's account and the coding agent ("agent") may write.
type World struct {
	Sim    *ghsim.Sim
	Server *httptest.Server
	Repo   ghref.Repo
}

// Page sizes for the simulator (MaxPerPage) in integration tests.
const (
	// TinyPages makes the few items a test creates cross page boundaries,
	// as a busy PR's signals do on GitHub.
	TinyPages = 3
	// GitHubPages is GitHub's cap on per_page.
	GitHubPages = 100
)

// PageSizes are the page sizes a test of a whole lifecycle runs with.
var PageSizes = []int{GitHubPages, TinyPages}

// Option adjusts the simulator a world starts.
type Option func(*ghsim.Options)

// MaxPerPage caps the simulator's page size at n (GitHub's is 100), so
// that a few items make a list cross a page boundary.
func MaxPerPage(n int) Option { return func(o *ghsim.Options) { o.MaxPerPage = n } }

// GitHTTP serves the repositories over git's smart HTTP, asking for a
// token on every request, instead of as file:// URLs.
func GitHTTP() Option { return func(o *ghsim.Options) { o.GitHTTP = true } }

// Start starts a world whose repository's first commit holds files
// (default: a main.go). Everything stops when the test ends.
func Start(t testing.TB, files map[string]string, opts ...Option) *World {
	t.Helper()
	so := ghsim.Options{Dir: t.TempDir()}
	for _, o := range opts {
		o(&so)
	}
	srv := httptest.NewUnstartedServer(nil)
	if so.GitHTTP {
		so.BaseURL = "http://" + srv.Listener.Addr().String()
	}
	sim, err := ghsim.New(so)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	srv.Config.Handler = sim
	srv.Start()
	t.Cleanup(srv.Close)
	sim.AddToken(Token, Login)
	if files == nil {
		files = map[string]string{"main.go": "package main\n"}
	}
	repo, err := sim.CreateRepo("acme", "widgets", files)
	require.NoError(t, err)
	for _, login := range []string{"agent", Login} {
		require.NoError(t, sim.SetPermission(repo, login, "write"))
	}
	return &World{Sim: sim, Server: srv, Repo: repo}
}

// Client returns a GitHub client acting as prloop, logging nowhere; mut
// adjusts its configuration (timeouts, retries).
func (w *World) Client(t testing.TB, mut ...func(*github.Config)) *github.Client {
	t.Helper()
	cfg := github.Config{APIURL: w.Server.URL, Token: Token}
	for _, m := range mut {
		m(&cfg)
	}
	c, err := github.New(t.Context(), cfg, github.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return c
}
