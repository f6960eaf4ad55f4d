package feedback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
)

// sweepBatch bounds the PRs one sweep asks GitHub about, so that a large
// workspace costs a few requests per interval; the next sweep goes on
// where this one stopped.
const sweepBatch = 20

// sweepLoop removes the workspaces and records of closed PRs every
// interval: no event the service consumes says a PR closed, so it compares
// what its workspace and its bucket hold with GitHub's PR state.
func (s *Service) sweepLoop(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.d.Log.Warn("workspace sweep failed; trying again next interval", "err", err)
			}
		}
	}
}

// Sweep checks up to sweepBatch PRs that have a workspace
// (<ws>/<owner>/<repo>/pr-N and pr-N.d) or a record in the service's bucket
// and removes what the service keeps of the closed or merged ones: the
// clone, the prompt and logs, the mirror's refs/prloop/pr-N/ refs, and the
// PR's attempt record and lease. A PR with an attempt in flight (its lease
// held) is left for a later sweep. It returns the PRs removed.
func (s *Service) Sweep(ctx context.Context) ([]ghref.PR, error) {
	prs, err := s.workspacePRs()
	if err != nil {
		return nil, err
	}
	recorded, err := s.recordedPRs(ctx)
	if err != nil {
		return nil, err
	}
	for _, pr := range recorded {
		if _, found := slices.BinarySearchFunc(prs, pr, comparePRs); !found {
			prs = append(prs, pr)
		}
	}
	slices.SortFunc(prs, comparePRs)
	// Resume after the last PR checked, so every PR is reached in turn.
	start := max(0, slices.IndexFunc(prs, func(p ghref.PR) bool { return p.Key() > s.sweepCursor }))
	var removed []ghref.PR
	var errs []error
	for i := range min(sweepBatch, len(prs)) {
		pr := prs[(start+i)%len(prs)]
		s.sweepCursor = pr.Key()
		done, err := s.sweepPR(ctx, pr)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			removed = append(removed, pr)
		}
	}
	return removed, errors.Join(errs...)
}

// workspacePRs lists the PRs with a workspace, ordered by key.
func (s *Service) workspacePRs() ([]ghref.PR, error) {
	dirs, err := filepath.Glob(filepath.Join(s.worksDir, "*", "*", "pr-*"))
	if err != nil {
		return nil, fmt.Errorf("list workspace %s: %w", s.worksDir, err)
	}
	seen := map[string]bool{}
	var out []ghref.PR
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "pr-"), ".d"))
		if err != nil || n <= 0 {
			continue
		}
		repo := ghref.Repo{Owner: filepath.Base(filepath.Dir(filepath.Dir(d))), Name: filepath.Base(filepath.Dir(d))}
		pr := repo.PR(n)
		if !seen[pr.Key()] {
			seen[pr.Key()] = true
			out = append(out, pr)
		}
	}
	slices.SortFunc(out, comparePRs)
	return out, nil
}

func comparePRs(a, b ghref.PR) int { return strings.Compare(a.Key(), b.Key()) }

// keyLister lists a bucket's keys exactly: *kvlease.Bucket, which
// OpenBucket returns.
type keyLister interface {
	KeysMatching(ctx context.Context, filters ...string) ([]string, error)
}

var _ keyLister = (*kvlease.Bucket)(nil)

// recordedPRs lists the PRs with an attempt record, some of which may have
// no workspace (a change request skipped before the checkout). A bucket
// that cannot list its keys has none listed: the workspaces lead the sweep
// to the records then.
func (s *Service) recordedPRs(ctx context.Context) ([]ghref.PR, error) {
	kv, ok := s.d.KV.(keyLister)
	if !ok {
		return nil, nil
	}
	keys, err := kv.KeysMatching(ctx, recordPrefix+">")
	if err != nil {
		return nil, fmt.Errorf("list feedback records: %w", err)
	}
	var out []ghref.PR
	for _, k := range keys {
		if pr, err := events.ParsePRKey(strings.TrimPrefix(k, recordPrefix)); err == nil {
			out = append(out, pr)
		}
	}
	return out, nil
}

// sweepPR removes pr's workspace if GitHub says it is closed and no
// attempt holds its lease.
func (s *Service) sweepPR(ctx context.Context, pr ghref.PR) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	p, err := s.d.GitHub.GetPull(actx, pr)
	cancel()
	switch {
	case errors.Is(err, github.ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("sweep %s: %w", pr, err)
	case p.GetState() == "open":
		return false, nil
	}
	lease, err := kvlease.Acquire(ctx, s.d.KV, leaseKey(pr), s.d.Holder, kvlease.Options{TTL: s.cfg.LeaseTTL, Note: "workspace sweep"})
	if errors.Is(err, kvlease.ErrHeld) {
		return false, nil // an attempt is running: the PR was reopened, or it ends soon
	}
	if err != nil {
		return false, fmt.Errorf("sweep %s: %w", pr, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		_ = lease.Release(rctx) // it expires by itself otherwise
	}()
	log := s.d.Log.With("pr", pr.String())
	if err := s.removeWorkspace(ctx, pr, log); err != nil {
		return false, fmt.Errorf("sweep %s: %w", pr, err)
	}
	// The record goes last, under the lease, and the lease with the
	// release: the bucket forgets the PR (a redelivered change request
	// finds it closed and is skipped).
	if err := s.records.drop(ctx, pr); err != nil {
		return false, fmt.Errorf("sweep %s: %w", pr, err)
	}
	log.Info("removed the workspace and the records of a closed PR")
	return true, nil
}

// removeWorkspace deletes pr's clone, its prompt and logs, and its refs in
// the repository's mirror.
func (s *Service) removeWorkspace(ctx context.Context, pr ghref.PR, log *slog.Logger) error {
	base := filepath.Join(s.worksDir, strings.ToLower(pr.Owner), strings.ToLower(pr.Repo))
	name := "pr-" + strconv.Itoa(pr.Number)
	var errs []error
	for _, d := range []string{filepath.Join(base, name), filepath.Join(base, name+".d")} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	mirror := filepath.Join(base, "mirror.git")
	if _, err := os.Stat(mirror); err != nil {
		return errors.Join(errs...)
	}
	refs, err := s.git.mirrorGit(ctx, mirror, "", "for-each-ref", "--format=%(refname)", "refs/prloop/"+name+"/")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, ref := range strings.Fields(refs) {
		if _, err := s.git.mirrorGit(ctx, mirror, "", "update-ref", "-d", ref); err != nil {
			errs = append(errs, err)
		}
	}
	log.Debug("mirror refs removed", "refs", len(strings.Fields(refs)))
	return errors.Join(errs...)
}
