package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// Discoverer lists the repositories behind PRLOOP_REPOS's patterns
// (github.Client has it).
type Discoverer interface {
	ListOwnerReposIfChanged(ctx context.Context, owner, prev string) ([]github.RepoSummary, string, error)
	ListInstallationRepos(ctx context.Context) ([]github.RepoSummary, error)
}

var _ Discoverer = (*github.Client)(nil)

// discovery remembers what the patterns' listings showed last.
type discovery struct {
	api Discoverer
	// found is what each pattern showed (non-archived), with the version
	// of its listing: an unchanged listing is not decoded again.
	found    map[string]map[string]ghref.Repo
	versions map[string]string
	// static are PRLOOP_REPOS's named repositories: never dropped.
	static map[string]bool
}

// discoverLoop lists the patterns now and every DiscoveryInterval, until
// ctx is done.
func (s *Service) discoverLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.DiscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.discover(ctx); err != nil && ctx.Err() == nil {
			s.d.Log.Warn("discovering repositories failed; the last list stands until the next try", "err", err)
		}
	}
}

// discover lists every pattern and watches the repositories that appeared,
// and drops those that left (archived, deleted, out of the installation)
// unless a PR there is watched. A pattern whose listing fails keeps what
// it showed last.
func (s *Service) discover(ctx context.Context) error {
	d := s.disc
	var errs []error
	for _, p := range s.cfg.RepoPatterns() {
		var repos []github.RepoSummary
		var err error
		if p == InstallationRepos {
			repos, err = d.api.ListInstallationRepos(ctx)
		} else {
			var v string
			repos, v, err = d.api.ListOwnerReposIfChanged(ctx, p, d.versions[p])
			if err == nil && repos == nil && d.found[p] != nil {
				continue // unchanged
			}
			d.versions[p] = v
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		set := map[string]ghref.Repo{}
		for _, r := range repos {
			if ref := r.Ref(); !r.Archived && ref.Validate() == nil {
				set[ref.Key()] = ref
			}
		}
		d.found[p] = set
	}
	want := map[string]ghref.Repo{}
	for _, set := range d.found {
		for k, r := range set {
			want[k] = r
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range want {
		rw := s.repo(r)
		rw.mu.Lock()
		if !rw.discover {
			rw.discover, rw.dropped = true, false
			s.d.Log.Info("watching a discovered repository", "repo", r.String())
		}
		rw.mu.Unlock()
		if s.started {
			s.startLoop(rw)
		}
	}
	for k, rw := range s.repos {
		if _, ok := want[k]; ok || d.static[k] {
			continue
		}
		rw.mu.Lock()
		if rw.discover {
			// It left the listing: no more auto-discovery there.
			rw.discover, rw.dropped = false, true // rw.mu: probe and Kick read it
			s.d.Log.Info("a discovered repository is gone (archived, deleted or out of reach)", "repo", rw.repo.String(), "still_watched_prs", len(rw.prs))
		}
		retire := rw.dropped && len(rw.prs) == 0
		rw.mu.Unlock()
		if !retire {
			continue // its watched PRs end on their own (closed, not found); a later round retires it
		}
		if rw.stop != nil {
			rw.stop()
		}
		delete(s.repos, k)
	}
	if len(errs) > 0 {
		return fmt.Errorf("discover repositories: %w", errors.Join(errs...))
	}
	return nil
}
