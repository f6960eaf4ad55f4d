package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// The start-up checks of the GitHub credentials and repositories: what
// cannot work (a token GitHub refuses, a scope or permission missing, a
// repository it does not show) stops a service at start with one error
// naming the setting and the fix, rather than running and failing every
// poll interval. prloop doctor runs the same checks on demand.

// JudgeAccess is what the credentials GitHub described (a) lack for
// features: problems that stop prloop, and warnings for a feature a
// setting can turn off (Need.Off). Pure: CheckCredentials asks GitHub.
func JudgeAccess(a github.Access, features []github.Feature) (problems, warnings []string) {
	switch {
	case a.Classic:
		// Any repository needs public_repo at least; a private one needs
		// repo, which CheckRepo tells once it knows the repository.
		if github.MissingScope(a.Scopes, false) != "" {
			problems = append(problems, fmt.Sprintf("the classic token lacks the scope %s (or %s, for private repositories too); it has %s: create a token with the %s scope",
				github.ScopePublicRepo, github.ScopeRepo, scopeList(a.Scopes), github.ScopeRepo))
		}
	case a.App:
		var hard, soft []github.Need
		for _, n := range github.MissingPermissions(a.Permissions, features) {
			if n.Off != "" {
				soft = append(soft, n)
			} else {
				hard = append(hard, n)
			}
		}
		if len(hard) > 0 {
			problems = append(problems, fmt.Sprintf("the GitHub App installation lacks the permissions %s: grant them in the App's settings (Permissions & events), then accept them for the installation",
				github.DescribeNeeds(hard)))
		}
		for _, n := range soft {
			warnings = append(warnings, fmt.Sprintf("the GitHub App installation lacks the permission %s: grant it, or set %s",
				github.DescribeNeeds([]github.Need{n}), n.Off))
		}
	}
	return problems, warnings
}

func scopeList(scopes []string) string {
	if len(scopes) == 0 {
		return "none"
	}
	return strings.Join(scopes, ", ")
}

// fixCredentials says how to replace credentials GitHub refuses, by where
// they came from (github.Client.AuthSource).
func fixCredentials(source string) string {
	switch source {
	case "GITHUB_TOKEN", "GH_TOKEN":
		return "set " + source + " to a token GitHub accepts (it may have expired or been revoked)"
	case "gh auth token":
		return "log in again with `gh auth login`, or set GITHUB_TOKEN"
	case "GitHub App":
		return "check PRLOOP_GITHUB_APP_ID, PRLOOP_GITHUB_APP_INSTALLATION_ID and the key in PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH"
	}
	return "use a token GitHub accepts"
}

// CheckCredentials asks GitHub about c's credentials (github.Client.Access)
// and judges them for features (JudgeAccess). The error wraps
// github.ErrCredentials when the credentials cannot work: refused (401) or
// lacking what features need; any other error (GitHub unreachable) says
// nothing about them.
func CheckCredentials(ctx context.Context, c *github.Client, features []github.Feature) (github.Access, []string, error) {
	a, err := c.Access(ctx)
	if errors.Is(err, github.ErrUnauthorized) {
		return a, nil, checkFailed(err, "GitHub at %s refused the credentials from %s (401): %s: %v", c.BaseURL(), c.AuthSource(), fixCredentials(c.AuthSource()), err)
	}
	if err != nil {
		return a, nil, err
	}
	problems, warnings := JudgeAccess(a, features)
	if len(problems) > 0 {
		return a, warnings, checkFailed(nil, "the credentials from %s cannot work: %s", c.AuthSource(), strings.Join(problems, "; "))
	}
	return a, warnings, nil
}

// CheckRepo checks that GitHub shows repo to c's credentials (a), that a
// classic token has the scope it needs for it (repo for a private one) and,
// when features write (fixes, merges), that the token may push to it.
// The error wraps github.ErrCredentials when the repository cannot work:
// not found (404: it does not exist, or the token may not see it) or
// forbidden (403); any other error says nothing about it.
func CheckRepo(ctx context.Context, c *github.Client, a github.Access, features []github.Feature, repo ghref.Repo) error {
	r, err := c.GetRepo(ctx, repo)
	switch {
	case errors.Is(err, github.ErrNotFound):
		return checkFailed(err, "PRLOOP_REPOS names %s, which GitHub does not show to the credentials from %s (404): check the name, and that the token (or the App's installation) may read it",
			repo, c.AuthSource())
	case errors.Is(err, github.ErrForbidden):
		return checkFailed(err, "PRLOOP_REPOS names %s, which the credentials from %s may not read (403): give them access to it, or remove it from PRLOOP_REPOS (%v)",
			repo, c.AuthSource(), err)
	case err != nil:
		return err
	}
	if a.Classic {
		if s := github.MissingScope(a.Scopes, r.GetPrivate()); s != "" {
			return checkFailed(nil, "the classic token from %s lacks the scope %s that %s needs (it has %s): create a token with the %s scope",
				c.AuthSource(), s, repo, scopeList(a.Scopes), s)
		}
	}
	writes := slices.Contains(features, github.FeatureFix) || slices.Contains(features, github.FeatureMerge)
	// GitHub describes a user's access to the repository in permissions
	// (absent: unknown); an App's is its installation's, which JudgeAccess
	// judges.
	if p := r.Permissions; writes && !a.App && p != nil && !p["push"] && !p["admin"] && !p["maintain"] {
		return checkFailed(nil, "the credentials from %s may read %s but not push to it: prloop pushes fixes and merges, give them write access", c.AuthSource(), repo)
	}
	return nil
}

// checkGitHub runs CheckCredentials for the features of rt's service once
// per API and credentials (the all-in-one binary's services have a client
// each, all alike) and remembers what GitHub said for CheckRepos. Only
// credentials that cannot work stop the start; when GitHub does not
// answer, the services start anyway and /readyz says so.
func (rt *Runtime) checkGitHub(ctx context.Context, c *github.Client) error {
	key := c.BaseURL() + " " + c.AuthSource()
	rt.mu.Lock()
	r, ok := rt.access[key]
	rt.mu.Unlock()
	if ok {
		return r.err
	}
	a, warnings, err := CheckCredentials(ctx, c, github.FeaturesOf(rt.Name))
	for _, w := range warnings {
		rt.Log.Warn(w)
	}
	r = accessResult{access: a, known: err == nil, err: err}
	if err != nil && !errors.Is(err, github.ErrCredentials) {
		rt.Log.Warn("cannot check the GitHub credentials at start; /readyz tells when GitHub answers", "err", err)
		r.err = nil
	}
	rt.mu.Lock()
	if rt.access == nil {
		rt.access = map[string]accessResult{}
	}
	rt.access[key] = r
	rt.mu.Unlock()
	return r.err
}

// accessResult is what checkGitHub found out about one API's credentials.
type accessResult struct {
	access github.Access
	known  bool // GitHub answered
	err    error
}

// CheckRepos checks each repository with CheckRepo at start (a poller's
// PRLOOP_REPOS): the ones GitHub does not show, or that the credentials
// cannot work on, stop the start with one error naming each; when GitHub
// does not answer, the service starts anyway.
func (rt *Runtime) CheckRepos(ctx context.Context, c *github.Client, repos []ghref.Repo) error {
	rt.mu.Lock()
	r := rt.access[c.BaseURL()+" "+c.AuthSource()]
	rt.mu.Unlock()
	var errs []error
	for _, repo := range repos {
		err := CheckRepo(ctx, c, r.access, github.FeaturesOf(rt.Name), repo)
		switch {
		case errors.Is(err, github.ErrCredentials):
			errs = append(errs, err)
		case err != nil:
			rt.Log.Warn("cannot check a repository of PRLOOP_REPOS at start", "repo", repo.String(), "err", err)
		}
	}
	return errors.Join(errs...)
}

// checkError is a start-up check's verdict: its text says what is wrong
// and how to fix it, and it wraps github.ErrCredentials and GitHub's
// answer (cause), if any.
type checkError struct {
	msg   string
	cause error
}

func (e *checkError) Error() string { return e.msg }

func (e *checkError) Unwrap() []error {
	if e.cause == nil {
		return []error{github.ErrCredentials}
	}
	return []error{github.ErrCredentials, e.cause}
}

// checkFailed is a checkError with the text format makes of args.
func checkFailed(cause error, format string, args ...any) error {
	return &checkError{msg: fmt.Sprintf(format, args...), cause: cause}
}
