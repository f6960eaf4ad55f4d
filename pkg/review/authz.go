package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// PermissionLookup returns a user's role on a repository: admin, maintain,
// write, triage, read or none (the GitHub client's GetPermission).
type PermissionLookup func(ctx context.Context, repo ghref.Repo, login string) (string, error)

// ErrPermissionUnknown says a reviewer's permission could not be looked up
// and no earlier answer is known: the evaluation that needed it must be
// skipped and made again later, never decided as if the reviewer had no
// permission (that would flip an approval during a GitHub outage).
var ErrPermissionUnknown = errors.New("reviewer permission unknown")

// DefaultPermissionCacheSize caps how many looked-up permissions an
// Authorization keeps: one per reviewer and repository, so the cap is only
// reached by a very large installation, and memory stays bounded.
const DefaultPermissionCacheSize = 10000

// Authorization decides who may review: the logins in PRLOOP_REVIEWERS when
// that is set, otherwise anyone with write, maintain or admin permission on
// the repository, looked up through the API and cached.
//
// A cached answer is fresh for ttl; after that it is looked up again, and
// when that lookup fails the last answer stands in (stale-while-error) for
// up to maxStale more. Older answers are evicted, and the cache holds at
// most size entries.
type Authorization struct {
	reviewers map[string]bool
	lookup    PermissionLookup
	teams     TeamLookup
	ttl       time.Duration
	maxStale  time.Duration
	size      int
	now       func() time.Time

	mu        sync.Mutex
	cache     map[string]permEntry
	lastSweep time.Time
}

type permEntry struct {
	ok bool
	at time.Time
}

// NewAuthorization returns an authorization over the reviewer list (empty:
// ask GitHub for permissions, caching answers for ttl and keeping them as
// the fallback for a failed lookup for maxStale after that).
func NewAuthorization(reviewers []string, lookup PermissionLookup, ttl, maxStale time.Duration) *Authorization {
	a := &Authorization{
		lookup: lookup, ttl: ttl, maxStale: maxStale, size: DefaultPermissionCacheSize,
		now: time.Now, cache: map[string]permEntry{},
	}
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

// Len is how many looked-up permissions the cache holds.
func (a *Authorization) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}

// For returns one evaluation's permission check for repo. Its Authorized
// is the Authorizer to evaluate with; after the evaluation, Err says
// whether a permission it needed was unknown, and then the verdict must be
// discarded. A stale answer used in place of a failed lookup is logged to
// log.
func (a *Authorization) For(ctx context.Context, repo ghref.Repo, log *slog.Logger) *Permissions {
	return &Permissions{a: a, ctx: ctx, repo: repo, log: log}
}

// TeamLookup reports whether login is an active member of the
// organisation team org/slug (the GitHub client's IsTeamMember).
type TeamLookup func(ctx context.Context, org, slug, login string) (bool, error)

// WithTeams lets reviewer lists name organisation teams ("@org/team"),
// whose memberships are looked up with lookup and cached with the same
// freshness and stale-on-error rules as permissions.
func (a *Authorization) WithTeams(lookup TeamLookup) *Authorization {
	a.teams = lookup
	return a
}

// ForReviewers is For with the reviewer list of one repository's policy
// in place of the configured one: logins and "@org/team" teams, or, when
// empty, everyone with write permission.
func (a *Authorization) ForReviewers(ctx context.Context, repo ghref.Repo, reviewers []string, log *slog.Logger) *Permissions {
	p := a.For(ctx, repo, log)
	p.override, p.logins, p.teams = true, nil, nil
	for _, r := range reviewers {
		r = strings.ToLower(strings.TrimSpace(r))
		if org, slug, ok := strings.Cut(strings.TrimPrefix(r, "@"), "/"); ok && strings.HasPrefix(r, "@") {
			p.teams = append(p.teams, [2]string{org, slug})
		} else if r != "" {
			if p.logins == nil {
				p.logins = map[string]bool{}
			}
			p.logins[r] = true
		}
	}
	return p
}

// Permissions is one evaluation's view of an Authorization.
type Permissions struct {
	a    *Authorization
	ctx  context.Context
	repo ghref.Repo
	log  *slog.Logger
	// override: a repository's policy names the reviewers (logins and
	// teams); with neither, write permission decides.
	override bool
	logins   map[string]bool
	teams    [][2]string

	mu   sync.Mutex
	errs []error
}

// Authorized reports whether login may review; it is a review.Authorizer.
// A permission or membership that could not be looked up and has no
// earlier answer counts as "no" here and is reported by Err.
func (p *Permissions) Authorized(login string) bool {
	a := p.a
	key := strings.ToLower(login)
	if !p.override && a.reviewers != nil {
		return a.reviewers[key]
	}
	if p.override && (p.logins != nil || p.teams != nil) {
		if p.logins[key] {
			return true
		}
		for _, t := range p.teams {
			if a.teams == nil {
				continue
			}
			org, slug := t[0], t[1]
			if p.cached("team:"+org+"/"+slug+"\x00"+key, login, "membership of "+login+" in @"+org+"/"+slug, func() (bool, error) {
				return a.teams(p.ctx, org, slug, login)
			}) {
				return true
			}
		}
		return false
	}
	if a.lookup == nil {
		return false
	}
	return p.cached(p.repo.Key()+"\x00"+key, login, fmt.Sprintf("permission of %s on %s", login, p.repo), func() (bool, error) {
		role, err := a.lookup(p.ctx, p.repo, login)
		return role == "admin" || role == "maintain" || role == "write", err
	})
}

// cached answers a yes/no question about login from the cache while it is
// fresh, otherwise by asking; a failed ask falls back to an answer up to
// maxStale past its freshness, and is recorded for Err without one.
func (p *Permissions) cached(ckey, login, what string, ask func() (bool, error)) bool {
	a := p.a
	a.mu.Lock()
	e, known := a.cache[ckey]
	a.mu.Unlock()
	age := a.now().Sub(e.at)
	if known && age < a.ttl {
		return e.ok
	}
	ok, err := ask()
	if err != nil {
		if known && age < a.ttl+a.maxStale {
			if p.log != nil {
				p.log.Warn("reviewer lookup failed; using the last known answer", "user", login, "what", what, "authorized", e.ok, "age", age.Round(time.Second), "err", err)
			}
			return e.ok
		}
		p.mu.Lock()
		p.errs = append(p.errs, fmt.Errorf("%s: %w: %w", what, ErrPermissionUnknown, err))
		p.mu.Unlock()
		return false
	}
	a.store(ckey, permEntry{ok: ok, at: a.now()})
	return ok
}

// Err returns the permissions that were needed but unknown (wrapping
// ErrPermissionUnknown), or nil.
func (p *Permissions) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

// store caches e under key, evicting answers too old to serve even as a
// fallback (at most once per ttl, or when the cache is full) and, when
// still full, the oldest ones.
func (a *Authorization) store(key string, e permEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cache[key] = e
	now := a.now()
	if len(a.cache) <= a.size && now.Sub(a.lastSweep) < a.ttl {
		return
	}
	a.lastSweep = now
	for k, old := range a.cache {
		if now.Sub(old.at) >= a.ttl+a.maxStale {
			delete(a.cache, k)
		}
	}
	if len(a.cache) <= a.size {
		return
	}
	// Full of live answers: drop the oldest tenth at once, so that a cache
	// at its cap does not sort on every lookup.
	type aged struct {
		key string
		at  time.Time
	}
	all := make([]aged, 0, len(a.cache))
	for k, old := range a.cache {
		all = append(all, aged{k, old.at})
	}
	slices.SortFunc(all, func(x, y aged) int { return x.at.Compare(y.at) })
	keep := a.size - a.size/10
	for _, old := range all[:len(all)-keep] {
		delete(a.cache, old.key)
	}
}
