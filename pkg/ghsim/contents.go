package ghsim

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
)

// jContent is GitHub's content-file object
// (https://docs.github.com/en/rest/repos/contents#get-repository-content).
type jContent struct {
	Type        string `json:"type"`
	Encoding    string `json:"encoding,omitempty"`
	Size        int    `json:"size"`
	Name        string `json:"name"`
	Path        string `json:"path"`
	Content     string `json:"content,omitempty"`
	SHA         string `json:"sha"`
	URL         string `json:"url"`
	GitURL      string `json:"git_url"`
	HTMLURL     string `json:"html_url"`
	DownloadURL string `json:"download_url"`
}

// getContents serves GET /repos/{owner}/{repo}/contents/{path}?ref=: a
// file's content in base64 (wrapped at 60 characters, as GitHub does) and
// its blob sha, a directory's entries, 404 when the path or the ref does
// not exist. Without ref, the default branch.
func (s *Sim) getContents(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	p := strings.Trim(c.r.PathValue("path"), "/")
	rp.mu.Lock()
	ref, dir, owner, name := c.q("ref"), rp.dir, rp.ref.Owner, rp.ref.Name
	if ref == "" {
		ref = rp.defBranch
	}
	rp.mu.Unlock()
	commit, err := s.git(dir, nil, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil || p == "" {
		return errResult(404, "No commit found for the ref "+ref)
	}
	commit = strings.TrimSpace(commit)
	entry, err := s.git(dir, nil, nil, "ls-tree", "-l", commit, "--", p)
	if err != nil || strings.TrimSpace(entry) == "" {
		return notFound()
	}
	// "<mode> <type> <sha> <size>\t<path>"
	meta, _, _ := strings.Cut(strings.TrimSpace(entry), "\t")
	f := strings.Fields(meta)
	if len(f) < 4 {
		return notFound()
	}
	api := fmt.Sprintf("%srepos/%s/%s/contents/%s?ref=%s", c.base, owner, name, p, url.QueryEscape(ref))
	wire := jContent{
		Name: path.Base(p), Path: p, SHA: f[2], URL: api,
		GitURL:  fmt.Sprintf("%srepos/%s/%s/git/blobs/%s", c.base, owner, name, f[2]),
		HTMLURL: fmt.Sprintf("https://github.com/%s/%s/blob/%s/%s", owner, name, ref, p),
	}
	switch f[1] {
	case "blob":
		data, err := s.git(dir, nil, nil, "cat-file", "blob", f[2])
		if err != nil {
			return errResult(500, "ghsim: read blob: "+err.Error())
		}
		wire.Type, wire.Encoding, wire.Size = "file", "base64", len(data)
		wire.Content = wrap60(base64.StdEncoding.EncodeToString([]byte(data)))
		wire.DownloadURL = fmt.Sprintf("https://raw.githubusercontent.com/%s/%s/%s/%s", owner, name, commit, p)
		return jsonResult(200, wire)
	case "tree":
		wire.Type = "dir"
		return jsonResult(200, []jContent{}) // prloop reads files only: an empty listing stands for a directory
	}
	return notFound()
}

// wrap60 breaks base64 text into lines of 60 characters, each ending in a
// newline, as GitHub's contents API does.
func wrap60(s string) string {
	var b strings.Builder
	for len(s) > 60 {
		b.WriteString(s[:60])
		b.WriteByte('\n')
		s = s[60:]
	}
	if s != "" {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// teamBook is the organisations' teams: "org/slug" to login to state
// ("active" or "pending").
type teamBook struct {
	mu    sync.Mutex
	teams map[string]map[string]string
}

func (s *Sim) teamBook() *teamBook {
	tb := &s.teams
	tb.mu.Lock()
	if tb.teams == nil {
		tb.teams = map[string]map[string]string{}
	}
	tb.mu.Unlock()
	return tb
}

// SetTeamMember makes login a member of the team org/slug with state
// "active" or "pending" (an invitation not yet accepted), or takes the
// membership away with state "".
func (s *Sim) SetTeamMember(org, slug, login, state string) error {
	switch state {
	case "active", "pending", "":
	default:
		return fmt.Errorf("set team membership of %s in %s/%s: unknown state %q", login, org, slug, state)
	}
	s.ensureUser(login, false)
	tb := s.teamBook()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	key := strings.ToLower(org + "/" + slug)
	if tb.teams[key] == nil {
		tb.teams[key] = map[string]string{}
	}
	if state == "" {
		delete(tb.teams[key], strings.ToLower(login))
	} else {
		tb.teams[key][strings.ToLower(login)] = state
	}
	return nil
}

// jMembership is GitHub's team membership object
// (https://docs.github.com/en/rest/teams/members#get-team-membership-for-a-user).
type jMembership struct {
	URL   string `json:"url"`
	Role  string `json:"role"`
	State string `json:"state"`
}

// teamMembership serves GET /orgs/{org}/teams/{team_slug}/memberships/{username}:
// 200 with the state for a member or an invited user, 404 otherwise.
func (s *Sim) teamMembership(c *reqCtx) *result {
	org, slug, login := c.r.PathValue("org"), c.r.PathValue("team_slug"), c.r.PathValue("username")
	tb := s.teamBook()
	tb.mu.Lock()
	state := tb.teams[strings.ToLower(org+"/"+slug)][strings.ToLower(login)]
	tb.mu.Unlock()
	if state == "" {
		return notFound()
	}
	return jsonResult(200, jMembership{
		URL:  fmt.Sprintf("%sorganizations/%s/team/%s/memberships/%s", c.base, org, slug, login),
		Role: "member", State: state,
	})
}
