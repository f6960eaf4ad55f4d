package ghsim

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
)

// SetArchived archives (or unarchives) a repository: owner listings show it
// with "archived": true, and searches with archived:false leave it out.
func (s *Sim) SetArchived(ref ghref.Repo, archived bool) error {
	rp, err := s.repoFor(ref)
	if err != nil {
		return err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.archived = archived
	rp.ver++
	return nil
}

// DeleteRepo removes a repository: it is gone from listings and every
// request about it answers 404.
func (s *Sim) DeleteRepo(ref ghref.Repo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.repos[ref.Key()]; !ok {
		return fmt.Errorf("repository %s: %w", ref, ErrNotFound)
	}
	delete(s.repos, ref.Key())
	return nil
}

// listOwnerRepos serves GET /orgs/{org}/repos and GET /users/{username}/repos
// ("List organization repositories", https://docs.github.com/rest/repos/repos#list-organization-repositories,
// and "List repositories for a user"): every repository of the owner,
// archived ones included (with "archived": true), sorted by sort=created|
// updated|pushed|full_name with direction (asc for full_name, else desc);
// the default sort is created for an organisation and full_name for a user.
func (s *Sim) listOwnerRepos(def string) handlerFunc {
	return func(c *reqCtx) *result {
		owner := c.r.PathValue("owner")
		s.mu.RLock()
		var sel []*repo
		for _, rp := range s.repos {
			if strings.EqualFold(rp.ref.Owner, owner) {
				sel = append(sel, rp)
			}
		}
		s.mu.RUnlock()
		if len(sel) == 0 && s.userOf(owner) == nil {
			return notFound()
		}
		by := c.q("sort")
		if by == "" {
			by = def
		}
		desc := c.desc(by != "full_name")
		key := func(rp *repo) string {
			switch by {
			case "full_name":
				return strings.ToLower(rp.ref.String())
			case "updated":
				return rp.updated.UTC().Format("2006-01-02T15:04:05.000000000")
			case "pushed":
				return rp.pushed.UTC().Format("2006-01-02T15:04:05.000000000")
			}
			return rp.created.UTC().Format("2006-01-02T15:04:05.000000000") + fmt.Sprintf("%012d", rp.id)
		}
		sort.SliceStable(sel, func(i, j int) bool {
			if desc {
				return key(sel[i]) > key(sel[j])
			}
			return key(sel[i]) < key(sel[j])
		})
		return c.paged(len(sel), func(i int) json.RawMessage {
			rp := sel[i]
			rp.mu.Lock()
			defer rp.mu.Unlock()
			return marshal(s.repoWire(rp, c.base))
		})
	}
}

func (s *Sim) userOf(login string) *user {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.users[strings.ToLower(login)]
}

// SetInstallationRepos makes token an App installation token whose
// installation may access repos: GET /installation/repositories lists them
// to it. Other tokens are refused there, as GitHub refuses any token but an
// installation's.
func (s *Sim) SetInstallationRepos(token string, repos ...ghref.Repo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installations == nil {
		s.installations = map[string][]ghref.Repo{}
	}
	s.installations[token] = repos
}

// listInstallationRepos serves GET /installation/repositories ("List
// repositories accessible to the app installation",
// https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation):
// {total_count, repository_selection, repositories}, paginated; 403 to a
// token that is not an installation's.
func (s *Sim) listInstallationRepos(c *reqCtx) *result {
	tok, _ := credentials(c.r)
	s.mu.RLock()
	refs, ok := s.installations[tok]
	var sel []*repo
	for _, r := range refs {
		if rp := s.repos[r.Key()]; rp != nil {
			sel = append(sel, rp)
		}
	}
	s.mu.RUnlock()
	if !ok {
		return errResult(403, "You must authenticate with an installation access token in order to list repositories for an installation.")
	}
	sort.Slice(sel, func(i, j int) bool { return sel[i].id < sel[j].id })
	start, end, link := c.window(len(sel))
	items := make([]json.RawMessage, 0, end-start)
	for _, rp := range sel[start:end] {
		rp.mu.Lock()
		items = append(items, marshal(s.repoWire(rp, c.base)))
		rp.mu.Unlock()
	}
	res := &result{status: 200, body: marshal(struct {
		TotalCount          int               `json:"total_count"`
		RepositorySelection string            `json:"repository_selection"`
		Repositories        []json.RawMessage `json:"repositories"`
	}{len(sel), "selected", items})}
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}
