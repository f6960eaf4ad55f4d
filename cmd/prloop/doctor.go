package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/poller"
)

// doctorTimeout bounds doctor's questions to GitHub.
const doctorTimeout = 10 * time.Second

// doctorNATSTimeout bounds the connection to PRLOOP_NATS_URL: a NATS that
// is up answers in a moment, and the client retries until this ends.
const doctorNATSTimeout = 3 * time.Second

// verdict is one line of prloop doctor: a check, and what it found or what
// to fix.
type verdict struct {
	check  string
	ok     bool
	detail string
}

// runDoctor runs the checks prloop run makes at start, and a few more,
// printing one line per check; it fails when any check does.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: prloop doctor\n\nChecks what 'prloop run' needs, with the same PRLOOP_* variables and token:\nthe configuration, that GitHub accepts the credentials and they have the\nscopes or permissions prloop needs, prloop's login, each repository of\nPRLOOP_REPOS, NATS (when PRLOOP_NATS_URL is set) and the agent sandbox.\nPrints one line per check; exits non-zero when one fails.\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: prloop doctor takes no arguments, got %q", errUsage, fs.Args())
	}
	failed := 0
	for v := range doctorChecks(ctx) {
		mark := "ok  "
		if !v.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(stdout, "%s  %s: %s\n", mark, v.check, v.detail)
	}
	if failed > 0 {
		return fmt.Errorf("%d doctor check(s) failed; see the FAIL lines above", failed)
	}
	return nil
}

// doctorChecks yields the verdicts in order; a check whose prerequisite
// failed (no configuration, no credentials) is not made.
func doctorChecks(ctx context.Context) func(yield func(verdict) bool) {
	return func(yield func(verdict) bool) {
		if err := config.CheckEnv(os.Environ(), knownVars()); err != nil {
			if !yield(verdict{"environment", false, err.Error()}) {
				return
			}
		} else if !yield(verdict{"environment", true, "every PRLOOP_* variable is one prloop reads"}) {
			return
		}
		cfg := &allConfig{}
		if err := cfg.Validate(); err != nil {
			yield(verdict{"configuration", false, strings.ReplaceAll(err.Error(), "\n", "; ")})
			return
		}
		if !yield(verdict{"configuration", true, "valid ('prloop run -h' describes each variable)"}) {
			return
		}
		for _, v := range githubVerdicts(ctx, cfg) {
			if !yield(v) {
				return
			}
		}
		if !yield(natsVerdict(ctx, cfg)) {
			return
		}
		yield(sandboxVerdict(cfg))
	}
}

// githubVerdicts checks GitHub as the services do at start
// (app.CheckCredentials, app.CheckRepo), and prloop's own login.
func githubVerdicts(ctx context.Context, cfg *allConfig) []verdict {
	quiet := slog.New(slog.DiscardHandler)
	c, err := github.New(ctx, cfg.Poller.Config, github.Options{Logger: quiet})
	if err != nil {
		return []verdict{{"github credentials", false, err.Error()}}
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	a, warnings, err := app.CheckCredentials(cctx, c, github.AllFeatures())
	switch {
	case errors.Is(err, github.ErrCredentials):
		return []verdict{{"github credentials", false, err.Error()}}
	case err != nil:
		return []verdict{{"github", false, fmt.Sprintf("GitHub at %s did not answer: %v; check PRLOOP_GITHUB_API_URL and the network", c.BaseURL(), err)}}
	}
	out := []verdict{{"github", true, "GitHub at " + c.BaseURL() + " answers"}}
	what := fmt.Sprintf("GitHub accepts the %s from %s", a.Kind(), c.AuthSource())
	switch {
	case a.App:
		what = "GitHub accepts the GitHub App installation, and it has every permission prloop cannot start without"
	case a.Classic:
		what += " (scopes: " + strings.Join(a.Scopes, ", ") + ")"
	case !a.App:
		what += " (GitHub does not tell a fine-grained token's permissions: each repository is checked below)"
	}
	out = append(out, verdict{"github credentials", true, what})
	for _, w := range warnings {
		out = append(out, verdict{"github permissions", false, w})
	}
	out = append(out, loginVerdict(cctx, c, cfg.Poller.GitHubLogin))
	repos := cfg.Poller.RepoRefs()
	for _, p := range cfg.Poller.RepoPatterns() {
		name := p + "/*"
		if p == poller.InstallationRepos {
			name = p + " (the App installation's)"
		}
		out = append(out, verdict{"repositories " + name, true, "discovered at start and every PRLOOP_DISCOVERY_INTERVAL (non-archived ones)"})
	}
	if len(repos) == 0 && len(cfg.Poller.RepoPatterns()) == 0 {
		out = append(out, verdict{"repositories", true, "none in PRLOOP_REPOS: prloop watches only the PRs it is asked to (prloop watch, prloop open)"})
	}
	for _, r := range repos {
		if err := app.CheckRepo(cctx, c, a, github.AllFeatures(), r); err != nil {
			out = append(out, verdict{"repository " + r.String(), false, err.Error()})
			continue
		}
		out = append(out, verdict{"repository " + r.String(), true, "readable and writable"})
	}
	return out
}

// loginVerdict checks that prloop knows its own login, as SelfLogin
// finds it: its own comments and reactions must never count as reviews.
func loginVerdict(ctx context.Context, c *github.Client, configured string) verdict {
	if configured != "" {
		return verdict{"login", true, configured + " (PRLOOP_GITHUB_LOGIN)"}
	}
	login, err := c.CurrentUser(ctx)
	if err != nil {
		return verdict{"login", false, fmt.Sprintf("cannot tell prloop's own login (%v): set PRLOOP_GITHUB_LOGIN (a GitHub App's is its slug followed by [bot])", err)}
	}
	return verdict{"login", true, login + " (the token's user)"}
}

// natsVerdict connects to PRLOOP_NATS_URL when it is set.
func natsVerdict(ctx context.Context, cfg *allConfig) verdict {
	common := cfg.Shared()
	if common.NATSURL == "" {
		return verdict{"nats", true, "embedded: prloop run starts one with its data in PRLOOP_DATA_DIR=" + common.DataDir}
	}
	cctx, cancel := context.WithTimeout(ctx, doctorNATSTimeout)
	defer cancel()
	opts := common.NATS("prloop-doctor")
	opts.Logger = slog.New(slog.DiscardHandler)
	conn, err := natsx.Connect(cctx, opts)
	if err != nil {
		return verdict{"nats", false, fmt.Sprintf("PRLOOP_NATS_URL=%s: %v; check the URL, that NATS runs there, and PRLOOP_NATS_CREDS_FILE", common.NATSURL, rootCause(err))}
	}
	_ = conn.Close(context.Background())
	return verdict{"nats", true, "connected to " + common.NATSURL}
}

// sandboxVerdict probes the agent sandbox backend as the feedback service
// does at start.
func sandboxVerdict(cfg *allConfig) verdict {
	mode, err := sandbox.ParseMode(cfg.Feedback.AgentSandbox)
	if err != nil {
		return verdict{"agent sandbox", false, err.Error()}
	}
	sb, err := sandbox.New(sandbox.Options{Mode: mode, ReadOnly: cfg.Feedback.AgentReadOnlyPaths, Writable: cfg.Feedback.AgentWritablePaths}, slog.New(slog.DiscardHandler))
	if err != nil {
		return verdict{"agent sandbox", false, fmt.Sprintf("PRLOOP_AGENT_SANDBOX=%s: %v", cfg.Feedback.AgentSandbox, err)}
	}
	if sb.Mode() == sandbox.None {
		return verdict{"agent sandbox", true, "none: the agent runs unsandboxed (install bubblewrap, or allow unprivileged user namespaces, to isolate it)"}
	}
	return verdict{"agent sandbox", true, string(sb.Mode())}
}
