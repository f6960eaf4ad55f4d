package github

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
)

// contentJSON is the part of GitHub's file contents response prloop reads
// (https://docs.github.com/en/rest/repos/contents#get-repository-content).
type contentJSON struct {
	Type     string `json:"type"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
	SHA      string `json:"sha"`
	Path     string `json:"path"`
}

// FileContent is a file read at a commit: its bytes and its blob SHA.
type FileContent struct {
	Data []byte
	SHA  string
}

// GetFile reads the file at path on ref (a commit SHA, so that the answer
// never changes and the conditional cache serves it again for free). A
// missing file is ErrNotFound; a directory or a link is an error.
func (c *Client) GetFile(ctx context.Context, repo ghref.Repo, path, ref string) (FileContent, error) {
	if err := repo.Validate(); err != nil {
		return FileContent{}, fmt.Errorf("get file: %w", err)
	}
	if path == "" || ref == "" {
		return FileContent{}, fmt.Errorf("get file %q at %q on %s: empty path or ref", path, ref, repo)
	}
	u := withQuery(repoPath(repo)+"/contents/"+escapeRef(path), url.Values{"ref": {ref}})
	v, _, err := doJSON[*contentJSON](ctx, c, http.MethodGet, u, nil, true)
	if err != nil {
		return FileContent{}, fmt.Errorf("get %s at %s on %s: %w", path, ghref.ShortSHA(ref), repo, err)
	}
	if v == nil || v.Type != "file" || v.Encoding != "base64" {
		return FileContent{}, fmt.Errorf("get %s at %s on %s: not a file", path, ghref.ShortSHA(ref), repo)
	}
	// GitHub wraps the base64 text in lines.
	data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(v.Content, "\n", ""))
	if err != nil {
		return FileContent{}, fmt.Errorf("get %s at %s on %s: content: %w", path, ghref.ShortSHA(ref), repo, err)
	}
	return FileContent{Data: data, SHA: v.SHA}, nil
}

// membershipJSON is GitHub's team membership response
// (https://docs.github.com/en/rest/teams/members#get-team-membership-for-a-user).
type membershipJSON struct {
	State string `json:"state"`
	Role  string `json:"role"`
}

// IsTeamMember reports whether login is an active member of the team
// org/slug. Not a member (GitHub's 404) is false without an error; a
// pending invitation is false.
func (c *Client) IsTeamMember(ctx context.Context, org, slug, login string) (bool, error) {
	if org == "" || slug == "" || login == "" {
		return false, fmt.Errorf("team membership of %q in %s/%s: empty name", login, org, slug)
	}
	u := "orgs/" + url.PathEscape(org) + "/teams/" + url.PathEscape(slug) + "/memberships/" + url.PathEscape(login)
	v, _, err := doJSON[*membershipJSON](ctx, c, http.MethodGet, u, nil, true)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("team membership of %s in @%s/%s: %w", login, org, slug, err)
	}
	return v != nil && v.State == "active", nil
}
