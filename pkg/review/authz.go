package review

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// PermissionLookup returns a user's role on a repository: admin, maintain,
// write, triage, read or none (the GitHub client's GetPermission).
type PermissionLookup func(ctx context.Context, repo ghref.Repo, login string) (string, error)

// Authorization decides who may review: the logins in PRLOOP_REVIEWERS when
// that is set, otherwise anyone with write, maintain or admin permission on
// the repository, looked up through the API and cached.
type Authorization struct {
	reviewers map[string]bool
	lookup    PermissionLookup
	ttl       time.Duration
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]permEntry
}

type permEntry struct {
	ok bool
	at time.Time
}

// NewAuthorization returns an authorization over the reviewer list (empty:
// ask GitHub for permissions, caching answers for ttl).
func NewAuthorization(reviewers []string, lookup PermissionLookup, ttl time.Duration) *Authorization {
	a := &Authorization{lookup: lookup, ttl: ttl, now: time.Now, cache: map[string]permEntry{}}
	for _, r := range reviewers {
		if r = strings.TrimSpace(r); r != "" {
			if a.reviewers == nil {
				a.reviewers = map[string]bool{}
			}
			a.reviewers[strings.ToLower(r)] = true
		}
	}
	return a
}

// For returns the Authorizer for one repository. A failed permission lookup
// counts as "not authorized" for this evaluation and is not cached, so the
// next evaluation asks again; errs receives the error when non-nil.
func (a *Authorization) For(ctx context.Context, repo ghref.Repo, errs func(login string, err error)) Authorizer {
	return func(login string) bool {
		key := strings.ToLower(login)
		if a.reviewers != nil {
			return a.reviewers[key]
		}
		if a.lookup == nil {
			return false
		}
		ckey := repo.Key() + "\x00" + key
		a.mu.Lock()
		e, ok := a.cache[ckey]
		a.mu.Unlock()
		if ok && a.now().Sub(e.at) < a.ttl {
			return e.ok
		}
		role, err := a.lookup(ctx, repo, login)
		if err != nil {
			if errs != nil {
				errs(login, err)
			}
			return false
		}
		allowed := role == "admin" || role == "maintain" || role == "write"
		a.mu.Lock()
		a.cache[ckey] = permEntry{ok: allowed, at: a.now()}
		a.mu.Unlock()
		return allowed
	}
}
