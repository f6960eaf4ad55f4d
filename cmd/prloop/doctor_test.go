package main

// Start-up checks and prloop doctor (issue 30): credentials GitHub refuses
// or that lack a scope, and repositories it does not show, stop prloop run
// at start with one line naming the variable and the fix; prloop doctor
// makes the same checks on demand. Each runs the real binary.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// Classic tokens of prloop-bot on the scoped simulator.
const (
	tokClassicRepo = "classic-repo-token" // scopes: repo
	tokClassicGist = "classic-gist-token" // scopes: gist, which covers no repository
	tokRevoked     = "revoked-token"      // unknown to GitHub: 401
)

// startScopedSim is startTestSim with classic tokens that GitHub answers
// with X-OAuth-Scopes.
func startScopedSim(t *testing.T) simEnv {
	t.Helper()
	return startTestSim(t, func(sim *ghsim.Sim) {
		for tok, scopes := range map[string][]string{tokClassicRepo: {"repo"}, tokClassicGist: {"gist"}} {
			sim.AddToken(tok, ghsim.DemoPrloop)
			sim.SetTokenScopes(tok, scopes...)
		}
	})
}

// withEnv returns env with each KEY=VALUE of set replacing the same KEY.
func withEnv(env []string, set ...string) []string {
	out := append([]string(nil), env...)
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, e := range out {
			if strings.HasPrefix(e, k+"=") {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

// TestRun_RefusesCredentialsAndRepositoriesThatCannotWork: a token GitHub
// refuses (401), a classic token without a repository scope and a
// repository GitHub does not show stop prloop run at start, non-zero,
// with one line naming the variable and the fix, where before it ran and
// warned (or retried) every interval.
func TestRun_RefusesCredentialsAndRepositoriesThatCannotWork(t *testing.T) {
	t.Parallel()
	gh := startScopedSim(t)
	base := append(gh.env(), "PRLOOP_NATS_PORT=-1", "PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_NATS_URL=", "PRLOOP_AGENT_SANDBOX=none")
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "a token GitHub refuses", env: []string{"GITHUB_TOKEN=" + tokRevoked, "PRLOOP_GITHUB_LOGIN="},
			want: []string{"refused the credentials from GITHUB_TOKEN (401)", "set GITHUB_TOKEN to a token GitHub accepts"}},
		{name: "a classic token without a repository scope", env: []string{"GITHUB_TOKEN=" + tokClassicGist},
			want: []string{"the classic token lacks the scope public_repo (or repo, for private repositories too); it has gist"}},
		{name: "a repository GitHub does not show", env: []string{"PRLOOP_REPOS=demo/widgets,demo/nosuch"},
			want: []string{"PRLOOP_REPOS names demo/nosuch, which GitHub does not show to the credentials from GITHUB_TOKEN (404)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err, _ := cliRun(t, withEnv(base, append(tt.env, "PRLOOP_DATA_DIR="+t.TempDir())...), 30*time.Second, "run")
			require.Error(t, err, "exits non-zero")
			for _, w := range tt.want {
				assert.Contains(t, p.Stderr.String(), w)
			}
			assert.NotContains(t, p.Stderr.String(), `"msg":"ready"`)
			assert.NotContains(t, p.Stderr.String(), tokRevoked, "the token stays out of the output")
		})
	}
}

// TestDoctor_ChecksWhatRunNeeds runs prloop doctor against the simulator:
// one ok or FAIL line per check, non-zero when one fails.
func TestDoctor_ChecksWhatRunNeeds(t *testing.T) {
	t.Parallel()
	gh := startScopedSim(t)
	conn := natstest.Start(t)
	base := append(gh.env(), "GITHUB_TOKEN="+tokClassicRepo, "PRLOOP_REPOS=demo/widgets", "PRLOOP_AGENT_SANDBOX=none",
		"PRLOOP_NATS_URL="+conn.URL, "PRLOOP_NATS_CREDS_FILE="+conn.CredsFile, "PRLOOP_GITHUB_LOGIN=")
	tests := []struct {
		name   string
		env    []string
		ok     bool
		lines  []string
		absent []string
	}{
		{name: "all well", ok: true, lines: []string{
			"ok    environment: ",
			"ok    configuration: valid",
			"ok    github: GitHub at " + gh.url + "/ answers",
			"ok    github credentials: GitHub accepts the classic token from GITHUB_TOKEN (scopes: repo)",
			"ok    login: prloop-bot (the token's user)",
			"ok    repository demo/widgets: readable and writable",
			"ok    nats: connected to " + conn.URL,
			"ok    agent sandbox: none",
		}},
		{name: "a token GitHub refuses", env: []string{"GITHUB_TOKEN=" + tokRevoked}, lines: []string{
			"FAIL  github credentials: ", "refused the credentials from GITHUB_TOKEN (401)",
		}, absent: []string{"repository demo/widgets", tokRevoked}},
		{name: "a classic token without a repository scope", env: []string{"GITHUB_TOKEN=" + tokClassicGist}, lines: []string{
			"FAIL  github credentials: ", "lacks the scope public_repo",
		}},
		{name: "a repository GitHub does not show", env: []string{"PRLOOP_REPOS=demo/widgets,demo/nosuch"}, lines: []string{
			"ok    repository demo/widgets", "FAIL  repository demo/nosuch: ", "(404)",
		}},
		{name: "a misspelt variable", env: []string{"PRLOOP_POLL_INTERVL=5s"}, lines: []string{
			"FAIL  environment: unknown variable PRLOOP_POLL_INTERVL (did you mean PRLOOP_POLL_INTERVAL?)",
			"ok    github credentials",
		}},
		{name: "an invalid setting", env: []string{"PRLOOP_POLL_INTERVAL=1ms"}, lines: []string{
			"FAIL  configuration: ", "PRLOOP_POLL_INTERVAL=1ms",
		}},
		{name: "no NATS at PRLOOP_NATS_URL", env: []string{"PRLOOP_NATS_URL=nats://127.0.0.1:1"}, lines: []string{
			"ok    github credentials", "FAIL  nats: PRLOOP_NATS_URL=nats://127.0.0.1:1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err, _ := cliRun(t, withEnv(base, tt.env...), 60*time.Second, "doctor")
			out := p.Stdout.String()
			if tt.ok {
				require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, p.Stderr.String())
			} else {
				require.Error(t, err, "exits non-zero; stdout:\n%s", out)
				assert.Contains(t, p.Stderr.String(), "doctor check(s) failed")
			}
			for _, l := range tt.lines {
				assert.Contains(t, out, l)
			}
			for _, a := range tt.absent {
				assert.NotContains(t, out+p.Stderr.String(), a)
			}
		})
	}
}

// TestServiceBinaries_RefuseWhatCannotWork: each service binary shares the
// start-up checks through pkg/app: a token GitHub refuses stops each at
// start, and the poller, which polls PRLOOP_REPOS, refuses a repository
// GitHub does not show.
func TestServiceBinaries_RefuseWhatCannotWork(t *testing.T) {
	t.Parallel()
	gh := startScopedSim(t)
	tests := []struct {
		name, service string
		env           []string
		want          string
	}{
		{name: "poller, refused token", service: poller.Name, env: []string{"GITHUB_TOKEN=" + tokRevoked}, want: "refused the credentials from GITHUB_TOKEN (401)"},
		{name: "feedback, refused token", service: feedback.Name, env: []string{"GITHUB_TOKEN=" + tokRevoked}, want: "refused the credentials from GITHUB_TOKEN (401)"},
		{name: "merger, refused token", service: merger.Name, env: []string{"GITHUB_TOKEN=" + tokRevoked}, want: "refused the credentials from GITHUB_TOKEN (401)"},
		{name: "escalator, refused token", service: escalator.Name, env: []string{"GITHUB_TOKEN=" + tokRevoked}, want: "refused the credentials from GITHUB_TOKEN (401)"},
		{name: "poller, missing repository", service: poller.Name, env: []string{"PRLOOP_REPOS=demo/nosuch"}, want: "PRLOOP_REPOS names demo/nosuch, which GitHub does not show"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := natstest.Start(t)
			bin := proctest.Build(t, "./services/"+tt.service+"/cmd/"+tt.service)
			p := proctest.Start(t, bin, withEnv(gh.env(), append(tt.env,
				"PRLOOP_NATS_URL="+conn.URL, "PRLOOP_NATS_CREDS_FILE="+conn.CredsFile, "PRLOOP_LOG_FORMAT=json", "PRLOOP_HTTP_ADDR=127.0.0.1:0",
				"PRLOOP_AGENT_SANDBOX=none")...))
			exited, err := p.Wait(30 * time.Second)
			require.True(t, exited, "still running; stderr:\n%s", p.Stderr.String())
			require.Error(t, err, "exit status")
			assert.Contains(t, p.Stderr.String(), tt.want)
		})
	}
}

// permissionsTable renders github.Needs, the one table of what each
// feature needs, as docs/deployment.md shows it.
func permissionsTable() string {
	var b strings.Builder
	b.WriteString("| feature | fine-grained token or GitHub App permission |\n|---|---|\n")
	var order []github.Feature
	perms := map[github.Feature][]string{}
	for _, n := range github.Needs {
		if _, ok := perms[n.Feature]; !ok {
			order = append(order, n.Feature)
		}
		p := fmt.Sprintf("`%s`: %s", n.Permission, n.Level)
		switch {
		case n.TokenOnly:
			p += " (token)"
		case n.AppOnly:
			p += " (App)"
		}
		perms[n.Feature] = append(perms[n.Feature], p)
	}
	for _, f := range order {
		fmt.Fprintf(&b, "| %s | %s |\n", f, strings.Join(perms[f], ", "))
	}
	return b.String()
}

// TestDocs_PermissionsTableIsNeeds: the table of permissions in
// docs/deployment.md is github.Needs, which the start-up checks and prloop
// doctor judge by.
func TestDocs_PermissionsTableIsNeeds(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(proctest.Root(t), "docs", "deployment.md"))
	require.NoError(t, err)
	table := permissionsTable()
	assert.True(t, strings.Contains(string(doc), table), "docs/deployment.md's permissions table is stale: paste this one:\n%s", table)
}
