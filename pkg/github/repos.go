package github

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/prloop/prloop/pkg/ghref"
)

// RepoSummary is what discovery reads of a repository in a listing.
type RepoSummary struct {
	Name     string `json:"name"`
	Archived bool   `json:"archived"`
	Owner    struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// Ref is the repository's identity.
func (r RepoSummary) Ref() ghref.Repo { return ghref.Repo{Owner: r.Owner.Login, Name: r.Name} }

// ListOwnerReposIfChanged lists every repository of owner, an organisation
// ("List organization repositories", GET /orgs/{org}/repos) or else a user
// (GET /users/{username}/repos, on the organisation listing's 404),
// archived ones included and marked; like ListPullSummariesIfChanged it
// returns nil items with the same version when nothing changed since prev,
// each page revalidated conditionally.
func (c *Client) ListOwnerReposIfChanged(ctx context.Context, owner, prev string) ([]RepoSummary, string, error) {
	if err := (ghref.Repo{Owner: owner, Name: "x"}).Validate(); err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	q := url.Values{"type": {"all"}}
	repos, v, err := listIfChanged[RepoSummary](ctx, c, withQuery("orgs/"+url.PathEscape(owner)+"/repos", q), prev)
	if errors.Is(err, ErrNotFound) {
		repos, v, err = listIfChanged[RepoSummary](ctx, c, withQuery("users/"+url.PathEscape(owner)+"/repos", url.Values{"type": {"owner"}}), prev)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list repositories of %s: %w", owner, err)
	}
	return repos, v, nil
}

// ListInstallationRepos lists the repositories the GitHub App installation
// may access ("List repositories accessible to the app installation", GET
// /installation/repositories); only an App installation token may ask.
// Each page is revalidated conditionally (a 304 is free of the primary
// limit).
func (c *Client) ListInstallationRepos(ctx context.Context) ([]RepoSummary, error) {
	var all []RepoSummary
	err := paginate(ctx, c, withQuery("installation/repositories", nil), func(page struct {
		Repositories []RepoSummary `json:"repositories"`
	}) int {
		all = append(all, page.Repositories...)
		return len(page.Repositories)
	})
	if err != nil {
		return nil, fmt.Errorf("list the installation's repositories: %w", err)
	}
	return all, nil
}
