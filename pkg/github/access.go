package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// Feature is a part of prloop that needs something of the GitHub
// credentials. Needs says what.
type Feature string

// prloop's features, as Needs lists them.
const (
	// FeatureWatch reads the watched PRs: the PR, its reviews and
	// comments, reactions, labels, commits, commit statuses and check
	// runs, branch rules and reviewers' permission (poller, and every
	// service before it acts).
	FeatureWatch Feature = "watch PRs"
	// FeatureStatus writes prloop's line on the PR's head
	// (PRLOOP_POST_STATUS): a commit status with a token, a check run as
	// a GitHub App.
	FeatureStatus Feature = "post its status (PRLOOP_POST_STATUS)"
	// FeatureFix pushes the agent's fixes, opens PRs, replies to review
	// comments, reacts, comments, labels and asks for a review again
	// (feedback).
	FeatureFix Feature = "push fixes and open PRs"
	// FeatureMerge merges, updates a branch from its base and deletes a
	// merged head branch (merger).
	FeatureMerge Feature = "merge"
	// FeatureEscalate labels and comments on a PR that needs a human
	// (escalator).
	FeatureEscalate Feature = "escalate"
	// FeatureChecks reads a failed GitHub Actions job and the tail of its
	// log, and re-runs a run's failed jobs once, when failing checks go to
	// the agent (feedback, docs/ci-failures.md). Without it the prompt
	// quotes what the check run says, and nothing is re-run.
	FeatureChecks Feature = "hand failing checks to the agent"
	// FeatureCommands answers "/prloop" commands on a PR: 👀 or 😕 on
	// the comment, a one-line refusal, the priority label, the explain
	// comment edited in place (poller, docs/commands.md).
	FeatureCommands Feature = "answer /prloop commands"
)

// Need is one permission a feature needs: a fine-grained token's or a
// GitHub App installation's repository permission (GitHub's names, as in
// the installation's "permissions": pull_requests, contents …) at a level
// (read or write). Classic tokens have no such grain: ClassicScope.
type Need struct {
	Feature    Feature
	Permission string
	Level      string
	// TokenOnly and AppOnly mark a need of one kind of credentials only:
	// a token writes prloop's status as a commit status, an App as a
	// check run.
	TokenOnly, AppOnly bool
	// Off, when set, is the setting that turns the feature off: without
	// the permission prloop still starts, and says to grant it or set Off.
	Off string
}

// Needs is the one table of what prloop's features need of the
// credentials, derived from the calls each makes (docs/deployment.md's table is
// checked against it). Reactions, labels and conversation comments on a
// PR go through the Issues API, hence issues write.
var Needs = []Need{
	{Feature: FeatureWatch, Permission: "metadata", Level: "read"},
	{Feature: FeatureWatch, Permission: "pull_requests", Level: "read"},
	{Feature: FeatureWatch, Permission: "issues", Level: "read"},
	{Feature: FeatureWatch, Permission: "contents", Level: "read"},
	{Feature: FeatureWatch, Permission: "statuses", Level: "read"},
	{Feature: FeatureWatch, Permission: "checks", Level: "read"},
	{Feature: FeatureStatus, Permission: "statuses", Level: "write", TokenOnly: true, Off: "PRLOOP_POST_STATUS=false"},
	{Feature: FeatureStatus, Permission: "checks", Level: "write", AppOnly: true, Off: "PRLOOP_POST_STATUS=false"},
	{Feature: FeatureFix, Permission: "contents", Level: "write"},
	{Feature: FeatureFix, Permission: "pull_requests", Level: "write"},
	{Feature: FeatureFix, Permission: "issues", Level: "write"},
	{Feature: FeatureMerge, Permission: "contents", Level: "write"},
	{Feature: FeatureMerge, Permission: "pull_requests", Level: "write"},
	{Feature: FeatureEscalate, Permission: "issues", Level: "write"},
	{Feature: FeatureChecks, Permission: "actions", Level: "read", Off: "PRLOOP_FIX_CHECKS=none"},
	{Feature: FeatureChecks, Permission: "actions", Level: "write", Off: "PRLOOP_RERUN_FAILED_CHECKS=false"},
	{Feature: FeatureCommands, Permission: "issues", Level: "write"},
}

// ServiceFeatures are the features of each service binary (by its name);
// the all-in-one binary has them all (AllFeatures).
var ServiceFeatures = map[string][]Feature{
	"poller":    {FeatureWatch, FeatureStatus, FeatureCommands},
	"feedback":  {FeatureWatch, FeatureFix, FeatureChecks},
	"merger":    {FeatureWatch, FeatureMerge},
	"escalator": {FeatureWatch, FeatureEscalate},
}

// AllFeatures are every feature, in Needs' order.
func AllFeatures() []Feature {
	var fs []Feature
	for _, n := range Needs {
		if !slices.Contains(fs, n.Feature) {
			fs = append(fs, n.Feature)
		}
	}
	return fs
}

// FeaturesOf are the features of the service named name, or all of them
// for a binary that runs every service.
func FeaturesOf(name string) []Feature {
	if fs, ok := ServiceFeatures[name]; ok {
		return fs
	}
	return AllFeatures()
}

// Classic token scopes: repo covers public and private repositories,
// public_repo public ones only ("Scopes for OAuth apps",
// https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps).
// Every feature needs one of them; none needs more (workflow only when a
// fix changes .github/workflows).
const (
	ScopeRepo       = "repo"
	ScopePublicRepo = "public_repo"
)

// ClassicScope is the classic token scope prloop needs for a repository:
// repo for a private one, public_repo (or repo) for a public one.
func ClassicScope(private bool) string {
	if private {
		return ScopeRepo
	}
	return ScopePublicRepo
}

// Access is what GitHub says of the credentials.
type Access struct {
	// Classic is true for a classic token: GitHub answers it with an
	// X-OAuth-Scopes header (fine-grained tokens and App tokens get none).
	Classic bool
	// Scopes are a classic token's scopes, from X-OAuth-Scopes.
	Scopes []string
	// App is true with GitHub App installation auth.
	App bool
	// Permissions are the App installation token's permissions.
	Permissions map[string]string
}

// Kind names the credentials for messages: "classic token",
// "fine-grained token" (or any token without X-OAuth-Scopes), "GitHub App".
func (a Access) Kind() string {
	switch {
	case a.App:
		return "GitHub App"
	case a.Classic:
		return "classic token"
	}
	return "fine-grained token"
}

// Access asks GitHub about the credentials with one GET /rate_limit (free
// against the rate limit, no retries): a 401 wraps ErrUnauthorized. A
// classic token's scopes come from the X-OAuth-Scopes header GitHub sends
// with every answer to one ("Scopes for OAuth apps"); an App's permissions
// from its installation token.
func (c *Client) Access(ctx context.Context) (Access, error) {
	if c.app != nil {
		// The installation token first: GitHub's refusal of the App's
		// key or installation comes from there, not as an API answer.
		if _, err := c.app.Token(ctx); err != nil {
			var he *ghinstallation.HTTPError
			if errors.As(err, &he) && he.Response != nil {
				switch st := he.Response.StatusCode; st {
				case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
					return Access{}, fmt.Errorf("get the GitHub App installation token from %s: %d: %w", c.baseURL.Host, st, ErrUnauthorized)
				}
			}
			return Access{}, fmt.Errorf("get the GitHub App installation token from %s: %w", c.baseURL.Host, err)
		}
	}
	ctx, ci := withCall(ctx, true)
	ci.once = true
	_, resp, err := doJSON[rateLimitBody](ctx, c, http.MethodGet, "rate_limit", nil, true)
	if err != nil {
		return Access{}, fmt.Errorf("check the credentials with %s: %w", c.baseURL.Host, err)
	}
	var a Access
	if resp != nil && resp.Response != nil {
		if v, ok := resp.Header[http.CanonicalHeaderKey("X-OAuth-Scopes")]; ok {
			a.Classic = true
			a.Scopes = ParseScopes(strings.Join(v, ","))
		}
	}
	if c.app != nil {
		a.App, a.Classic, a.Scopes = true, false, nil
		perms, err := c.app.Permissions()
		if err != nil {
			return Access{}, fmt.Errorf("read the GitHub App installation's permissions: %w", err)
		}
		a.Permissions = appPermissions(perms)
	}
	return a, nil
}

// ParseScopes splits an X-OAuth-Scopes value ("repo, user") into scopes.
func ParseScopes(h string) []string {
	var out []string
	for s := range strings.SplitSeq(h, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// MissingScope is the classic scope scopes lack for a repository (private
// or not), or "" when they have what prloop needs.
func MissingScope(scopes []string, private bool) string {
	if slices.Contains(scopes, ScopeRepo) || (!private && slices.Contains(scopes, ScopePublicRepo)) {
		return ""
	}
	return ClassicScope(private)
}

// MissingPermissions are the needs of features that perms (an App
// installation's permissions) do not grant; write grants read, admin
// grants both.
func MissingPermissions(perms map[string]string, features []Feature) []Need {
	var missing []Need
	for _, n := range Needs {
		if n.TokenOnly || !slices.Contains(features, n.Feature) {
			continue
		}
		if levelRank[perms[n.Permission]] < levelRank[n.Level] {
			missing = append(missing, n)
		}
	}
	return missing
}

// levelRank orders permission levels: write grants read, admin both.
var levelRank = map[string]int{"read": 1, "write": 2, "admin": 3}

// DescribeNeeds lists needs as "pull_requests: write (merge)", one
// permission once, with every feature that needs it at the highest level.
func DescribeNeeds(needs []Need) string {
	type key struct{ perm, level string }
	var order []key
	feats := map[key][]string{}
	for _, n := range needs {
		k := key{n.Permission, n.Level}
		if _, ok := feats[k]; !ok {
			order = append(order, k)
		}
		feats[k] = append(feats[k], string(n.Feature))
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", k.perm, k.level, strings.Join(feats[k], ", ")))
	}
	return strings.Join(parts, "; ")
}

// ErrCredentials marks credentials GitHub refuses or that lack what
// prloop needs: a start-up check's verdict, not a passing failure.
var ErrCredentials = errors.New("github credentials")

// appPermissions turns go-github's installation permissions into GitHub's
// JSON map ("pull_requests": "write" …), the names Needs uses. (p is
// ghinstallation's, of another go-github version than this package's.)
func appPermissions(p any) map[string]string {
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	m := map[string]string{}
	_ = json.Unmarshal(b, &m)
	return m
}
