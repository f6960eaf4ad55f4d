// Package ghref holds the identities prloop uses for GitHub repositories and
// pull requests, and parses them from the forms people and tools write:
// "owner/repo", "owner/repo#12", PR URLs and git remote URLs.
//
// GitHub treats owner and repository names case-insensitively, so Repo.Key and
// PR.Key fold case; the original spelling is kept for display and URLs.
package ghref

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every parse error, so callers can tell bad input
// from other failures with errors.Is.
var ErrInvalid = errors.New("invalid GitHub reference")

// Repo names a GitHub repository.
type Repo struct {
	Owner string `json:"owner"`
	Name  string `json:"repo"`
}

// PR names a pull request. URL is optional and only informative: two PRs with
// the same owner, repo and number are the same PR whatever their URLs say.
type PR struct {
	Owner  string `json:"owner"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
}

// String renders "owner/repo".
func (r Repo) String() string { return r.Owner + "/" + r.Name }

// Key is the case-folded "owner/repo", for maps and comparisons.
func (r Repo) Key() string { return strings.ToLower(r.String()) }

// PR returns the pull request number n of this repository.
func (r Repo) PR(n int) PR { return PR{Owner: r.Owner, Repo: r.Name, Number: n} }

// Validate reports whether owner and name are names GitHub could have issued.
func (r Repo) Validate() error {
	if !ownerRE.MatchString(r.Owner) {
		return fmt.Errorf("%w: owner %q: want letters, digits and single hyphens, at most 39 characters", ErrInvalid, r.Owner)
	}
	if !repoRE.MatchString(r.Name) || r.Name == "." || r.Name == ".." {
		return fmt.Errorf("%w: repository name %q: want letters, digits, '.', '-' or '_', at most 100 characters", ErrInvalid, r.Name)
	}
	return nil
}

// String renders "owner/repo#n", the form used in logs and event subjects.
func (p PR) String() string { return p.Owner + "/" + p.Repo + "#" + strconv.Itoa(p.Number) }

// RepoRef returns the repository the PR belongs to.
func (p PR) RepoRef() Repo { return Repo{Owner: p.Owner, Name: p.Repo} }

// Key is the case-folded "owner/repo#n", for maps and comparisons.
func (p PR) Key() string { return strings.ToLower(p.String()) }

// Same reports whether p and o name the same pull request.
func (p PR) Same(o PR) bool { return p.Key() == o.Key() }

// Validate reports whether p names a pull request GitHub could have.
func (p PR) Validate() error {
	if err := p.RepoRef().Validate(); err != nil {
		return err
	}
	if p.Number <= 0 {
		return fmt.Errorf("%w: PR number %d: want a positive number", ErrInvalid, p.Number)
	}
	return nil
}

// WithURL returns p with its html URL filled in for the given web host
// (e.g. "https://github.com"), unless it has one already.
func (p PR) WithURL(webBase string) PR {
	if p.URL == "" && webBase != "" {
		p.URL = strings.TrimSuffix(webBase, "/") + "/" + p.Owner + "/" + p.Repo + "/pull/" + strconv.Itoa(p.Number)
	}
	return p
}

var (
	// GitHub logins: alphanumerics and single inner hyphens, 1–39 characters.
	// Older accounts may have a trailing or doubled hyphen, so only the
	// character set and length are enforced.
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}$`)
	repoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	// scp-like ssh remotes: git@github.com:owner/repo.git
	scpRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(.+)$`)
)

// ParseRepo parses "owner/repo", a repository URL or a git remote URL.
func ParseRepo(s string) (Repo, error) {
	r, n, err := parse(s)
	if err != nil {
		return Repo{}, err
	}
	if n != 0 {
		return Repo{}, fmt.Errorf("%w: %q names a pull request, want a repository (owner/repo)", ErrInvalid, s)
	}
	return r, nil
}

// ParsePR parses "owner/repo#12", "owner/repo/pull/12" and PR URLs such as
// https://github.com/owner/repo/pull/12 (trailing /files, /commits … allowed).
func ParsePR(s string) (PR, error) {
	r, n, err := parse(s)
	if err != nil {
		return PR{}, err
	}
	if n == 0 {
		return PR{}, fmt.Errorf("%w: %q has no PR number, want owner/repo#N or a pull request URL", ErrInvalid, s)
	}
	p := r.PR(n)
	if u, err := url.Parse(strings.TrimSpace(s)); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		p.URL = u.Scheme + "://" + u.Host + "/" + r.Owner + "/" + r.Name + "/pull/" + strconv.Itoa(n)
	}
	return p, nil
}

// ParseRemote parses a git remote URL: https://host/owner/repo(.git),
// ssh://git@host/owner/repo.git or git@host:owner/repo.git.
func ParseRemote(s string) (Repo, error) { return ParseRepo(s) }

func parse(in string) (Repo, int, error) {
	s := strings.TrimSpace(in)
	if s == "" {
		return Repo{}, 0, fmt.Errorf("%w: empty, want owner/repo, owner/repo#N or a GitHub URL", ErrInvalid)
	}
	var path string
	switch {
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return Repo{}, 0, fmt.Errorf("%w: %q is not a URL: %v", ErrInvalid, in, err)
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git":
		default:
			return Repo{}, 0, fmt.Errorf("%w: %q: scheme %q, want https, ssh or git", ErrInvalid, in, u.Scheme)
		}
		if u.Host == "" {
			return Repo{}, 0, fmt.Errorf("%w: %q has no host", ErrInvalid, in)
		}
		path = strings.Trim(u.Path, "/")
		// GitHub Enterprise serves the API under /api/v3 but repos at the root;
		// a repos/ API URL is accepted too.
		path = strings.TrimPrefix(path, "api/v3/")
		path = strings.TrimPrefix(path, "repos/")
	case scpRE.MatchString(s):
		path = strings.Trim(scpRE.FindStringSubmatch(s)[1], "/")
	default:
		path = s
	}

	number := 0
	if i := strings.LastIndex(path, "#"); i >= 0 {
		n, err := strconv.Atoi(path[i+1:])
		if err != nil || n <= 0 {
			return Repo{}, 0, fmt.Errorf("%w: %q: PR number %q is not a positive number", ErrInvalid, in, path[i+1:])
		}
		number, path = n, path[:i]
	}
	parts := strings.Split(path, "/")
	if len(parts) < 2 {
		return Repo{}, 0, fmt.Errorf("%w: %q, want owner/repo, owner/repo#N or a GitHub URL", ErrInvalid, in)
	}
	r := Repo{Owner: parts[0], Name: strings.TrimSuffix(parts[1], ".git")}
	rest := parts[2:]
	if len(rest) > 0 && number == 0 {
		if (rest[0] == "pull" || rest[0] == "pulls") && len(rest) >= 2 {
			n, err := strconv.Atoi(rest[1])
			if err != nil || n <= 0 {
				return Repo{}, 0, fmt.Errorf("%w: %q: PR number %q is not a positive number", ErrInvalid, in, rest[1])
			}
			number = n
		} else if !(len(rest) == 1 && rest[0] == "") {
			return Repo{}, 0, fmt.Errorf("%w: %q: unexpected path after owner/repo, want owner/repo or .../pull/N", ErrInvalid, in)
		}
	} else if len(rest) > 0 {
		return Repo{}, 0, fmt.Errorf("%w: %q, want owner/repo#N", ErrInvalid, in)
	}
	if err := r.Validate(); err != nil {
		return Repo{}, 0, fmt.Errorf("parse %q: %w", in, err)
	}
	return r, number, nil
}
