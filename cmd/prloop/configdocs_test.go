package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/golden"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// updateDocs rewrites the generated documentation instead of comparing
// with it: go generate ./cmd/prloop (generate.go) passes it.
var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md from the configuration structs")

// TestDocs_ConfigurationIsCurrent: docs/configuration.md is what the
// configuration structs declare (each variable's desc tag, default and
// type, and which services read it). Change a struct and run
// 'go generate ./cmd/prloop' to refresh it.
func TestDocs_ConfigurationIsCurrent(t *testing.T) {
	golden.Check(t, filepath.Join(proctest.Root(t), "docs", "configuration.md"), renderConfigDoc(t), *updateDocs, "go generate ./cmd/prloop")
}

// configSection is one table of docs/configuration.md: the variables its
// struct declares that no earlier section listed.
type configSection struct {
	title, intro string
	cfg          any
}

var configSections = []configSection{
	{"Every service", "The NATS connection, logging, the HTTP server and shutdown. `prloop run` (all-in-one) and each service binary read them.", &config.Common{}},
	{"GitHub client", "Every service's GitHub client. The token is `GITHUB_TOKEN` (or `GH_TOKEN`, or `gh auth token` for `prloop run`); see [deployment](deployment.md) and [security](security.md).", &github.Config{}},
	{"Review policy", "Whose signals count and how. The merger recomputes the verdict before it merges: give the poller and the merger the same values. See [reviews](reviews.md).", &review.PolicyConfig{}},
	{"Poller", "Which PRs are watched, how often GitHub is read, and prloop's commit status. See [reviews](reviews.md) and [merging](merging.md#prloops-commit-status).", &poller.Config{}},
	{"Feedback (the coding agent)", "How the agent runs, its bounds, and what prloop pushes. See [security](security.md#the-coding-agent).", &feedback.Config{}},
	{"Merger", "How PRs are merged: checks, updates, the queue. See [merging](merging.md).", &merger.Config{}},
	{"Escalator", "How a human is called. See [operations](operations.md#escalations).", &escalator.Config{}},
}

// readers are who reads each variable: the services, and the operator
// commands (status, explain) for the settings their line names.
func readers(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range []struct {
		name string
		cfg  any
	}{
		{poller.Name, &poller.Config{}}, {feedback.Name, &feedback.Config{}}, {merger.Name, &merger.Config{}},
		{escalator.Name, &escalator.Config{}}, {"status, explain", &cliSettings{}},
	} {
		vars, err := config.Vars(r.cfg)
		require.NoError(t, err)
		for _, v := range vars {
			out[v.Name] = append(out[v.Name], r.name)
		}
	}
	return out
}

func renderConfigDoc(t *testing.T) string {
	t.Helper()
	by := readers(t)
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from the configuration structs' tags by 'go generate ./cmd/prloop'; TestDocs_ConfigurationIsCurrent fails when it is stale. Do not edit: change the desc tag. -->

Every setting is an environment variable. ` + "`prloop run -h`" + ` lists the same
variables with their defaults and descriptions. A bad value stops the
service at start with a message naming the variable (the ranges below are
checked there). ` + "`prloop run`" + ` and each service binary also refuse a ` + "`PRLOOP_*`" + ` variable they do not
read, naming the one it is likely a slip of (` + "`unknown variable\nPRLOOP_POLL_INTERVL (did you mean PRLOOP_POLL_INTERVAL?)`" + `; the test
harness's ` + "`PRLOOP_TEST_*`" + ` pass), and ` + "`prloop doctor`" + ` runs the start-up
checks on demand ([troubleshooting](troubleshooting.md)).

Durations are Go durations (` + "`30s`, `1m30s`, `2h`" + `); lists are
comma-separated. A variable several services read is listed once, in the
first section that declares it; "read by" names them all.
`)
	listed := map[string]bool{}
	total := 0
	for _, s := range configSections {
		vars, err := config.Vars(s.cfg)
		require.NoError(t, err)
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| variable | default | type | read by | meaning |\n|---|---|---|---|---|\n", s.title, s.intro)
		for _, v := range vars {
			if listed[v.Name] {
				continue
			}
			listed[v.Name] = true
			total++
			require.NotEmpty(t, v.Desc, "%s has no desc tag", v.Name)
			def := "empty"
			if v.Default != "" {
				def = "`" + strings.ReplaceAll(v.Default, "|", `\|`) + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", v.Name, def, strings.ToLower(v.Type), strings.Join(by[v.Name], ", "), strings.ReplaceAll(v.Desc, "|", `\|`))
		}
	}
	// Every variable prloop reads is in a section.
	for _, name := range knownVars() {
		assert.True(t, listed[name], "%s is in no section of docs/configuration.md", name)
	}
	require.True(t, slices.Contains(knownVars(), "PRLOOP_REPOS"))
	return b.String()
}
