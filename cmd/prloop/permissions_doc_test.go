package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/proctest"
)

const permissionsDoc = "docs/github-permissions.md"

// webhookEventUse says what each event of github.WebhookEvents tells the
// poller, which then looks at the PR again at once, for the doc.
var webhookEventUse = map[string]string{
	"pull_request":                "a PR opened, pushed to, retargeted, labelled, closed or merged",
	"pull_request_review":         "a review submitted, edited or dismissed",
	"pull_request_review_comment": "an inline review comment",
	"issue_comment":               "a comment on the PR's conversation",
	"check_suite":                 "a check suite on a PR's head requested or completed",
	"status":                      "a commit status on a PR's head changed",
}

// permissionsDocTables renders the generated part of
// docs/github-permissions.md from github.Needs, ServiceFeatures,
// AppPermissions and WebhookEvents.
func permissionsDocTables() string {
	var b strings.Builder
	services := func(f github.Feature) string {
		var out []string
		for _, s := range slices.Sorted(maps.Keys(github.ServiceFeatures)) {
			if slices.Contains(github.ServiceFeatures[s], f) {
				out = append(out, s)
			}
		}
		return strings.Join(out, ", ")
	}
	b.WriteString("| feature | services | classic token | fine-grained token (repository permissions) | GitHub App (repository permissions) | without it |\n|---|---|---|---|---|---|\n")
	for _, f := range github.AllFeatures() {
		var token, app []string
		off := ""
		for _, n := range github.Needs {
			if n.Feature != f {
				continue
			}
			p := fmt.Sprintf("`%s`: %s", n.Permission, n.Level)
			if !n.AppOnly {
				token = append(token, p)
			}
			if !n.TokenOnly {
				app = append(app, p)
			}
			if n.Off != "" {
				off = "set `" + n.Off + "`"
			}
		}
		if off == "" {
			off = "prloop does not start"
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` (or `%s` for public repositories only) | %s | %s | %s |\n",
			f, services(f), github.ScopeRepo, github.ScopePublicRepo, strings.Join(token, ", "), strings.Join(app, ", "), off)
	}
	b.WriteString("\nThe App `prloop app create` registers asks for exactly:\n\n| permission | access |\n|---|---|\n")
	perms := github.AppPermissions(github.AllFeatures())
	for _, p := range slices.Sorted(maps.Keys(perms)) {
		fmt.Fprintf(&b, "| `%s` | %s |\n", p, perms[p])
	}
	b.WriteString("\n| webhook event | what prloop does with it |\n|---|---|\n")
	for _, e := range github.WebhookEvents {
		fmt.Fprintf(&b, "| `%s` | %s |\n", e, webhookEventUse[e])
	}
	return b.String()
}

const (
	generatedBegin = "<!-- generated from pkg/github (github.Needs); TestDocs_GitHubPermissionsIsNeeds keeps it current -->\n"
	generatedEnd   = "<!-- end of the generated tables -->\n"
)

// TestDocs_GitHubPermissionsIsNeeds: the tables of
// docs/github-permissions.md are github.Needs, the App permissions and
// the webhook events, which the start-up checks, prloop doctor, the
// poller and prloop app create use. PRLOOP_UPDATE_DOCS=1 rewrites them.
func TestDocs_GitHubPermissionsIsNeeds(t *testing.T) {
	t.Parallel()
	for _, e := range github.WebhookEvents {
		assert.NotEmpty(t, webhookEventUse[e], "say in webhookEventUse what prloop does with %s", e)
	}
	path := filepath.Join(proctest.Root(t), permissionsDoc)
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	before, rest, ok1 := strings.Cut(string(doc), generatedBegin)
	_, after, ok2 := strings.Cut(rest, generatedEnd)
	require.True(t, ok1 && ok2, "%s: the generated tables' markers are missing", permissionsDoc)
	want := before + generatedBegin + permissionsDocTables() + generatedEnd + after
	if os.Getenv("PRLOOP_UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, string(doc), "%s is stale: run PRLOOP_UPDATE_DOCS=1 go test -run TestDocs_GitHubPermissionsIsNeeds ./cmd/prloop", permissionsDoc)
}
