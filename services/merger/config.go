package merger

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/review"
)

// Branch update methods (PRLOOP_UPDATE_METHOD).
const (
	// UpdateMerge asks GitHub to merge the base into the head
	// (PUT /pulls/{n}/update-branch), like the "Update branch" button.
	UpdateMerge = "merge"
	// UpdateRebase rebases the head onto the base in a local clone and
	// pushes it with --force-with-lease.
	UpdateRebase = "rebase"
)

// Queue modes (PRLOOP_QUEUE_MODE).
const (
	// QueueSerial merges one PR per base at a time: update its branch,
	// wait for its checks, merge.
	QueueSerial = "serial"
	// QueueSpeculative tests the first PRLOOP_QUEUE_DEPTH PRs of a queue
	// together on candidate commits and merges every PR up to the last
	// green candidate (see speculative.go).
	QueueSpeculative = "speculative"
)

// DefaultStatusContext is the context of prloop's own commit status when
// PRLOOP_STATUS_CONTEXT is not set: a constant for tests, equal to the
// variable's tag (statusContext reads the tag;
// TestConfig_DefaultsAreTheTags keeps the two equal).
const DefaultStatusContext = "prloop"

// defaults is the merger's configuration at its tags' defaults: what the
// accessors below fall back to for a Config built in code.
var defaults = config.MustDefaults[Config]()

// Config is the merger's configuration, read from PRLOOP_* variables.
type Config struct {
	config.Common
	github.Config
	// PolicyConfig is the review policy (protocols, reviewers, quorum),
	// the same settings the poller reads: the merger recomputes the verdict
	// on the head it merges and must reach the poller's answer.
	review.PolicyConfig
	// Settings are the operator's limits on repository policies
	// (.github/prloop.yml: the method, checks and branch deletion).
	policy.Settings

	// MergeMethod is how PRs are merged: squash, merge or rebase. It is
	// always sent, because GitHub's own default is a merge commit.
	MergeMethod string `envconfig:"PRLOOP_MERGE_METHOD" default:"squash" desc:"squash, merge or rebase, always sent explicitly"`
	// RequireChecks makes the merger wait for the head's commit statuses and
	// check runs to pass, and escalate when they fail.
	RequireChecks bool `envconfig:"PRLOOP_REQUIRE_CHECKS" default:"true" desc:"wait for green checks; failures escalate checks_failed"`
	// RequiredChecks adds checks (commit status contexts or check run
	// names, comma-separated) that every head must pass before a merge, to
	// those the base branch's rules require.
	RequiredChecks []string `envconfig:"PRLOOP_REQUIRED_CHECKS" desc:"checks every head must pass, added to those the base's branch rules require: status contexts or check run names, comma-separated"`
	// ChecksTimeout is how long the merger waits for pending checks on one
	// head before escalating with reason checks_failed.
	ChecksTimeout time.Duration `envconfig:"PRLOOP_CHECKS_TIMEOUT" default:"30m" desc:"longest wait for pending or not yet reported checks"`
	// UpdateMethod is how a PR behind its base is brought up to date: merge
	// (GitHub's update-branch) or rebase (local rebase, force-with-lease push).
	UpdateMethod string `envconfig:"PRLOOP_UPDATE_METHOD" default:"merge" desc:"a branch behind its base: merge (update-branch) or rebase (force-with-lease)"`
	// DeleteBranch deletes the head branch after a merge.
	DeleteBranch bool `envconfig:"PRLOOP_DELETE_BRANCH" default:"false" desc:"delete the head branch after merging"`
	// DryRun logs and publishes what the merger would do, and changes
	// nothing on GitHub.
	DryRun bool `envconfig:"PRLOOP_DRY_RUN" default:"false" desc:"publish what would happen, change nothing on GitHub (the feedback service still pushes fixes, and logs its note to the reviewers instead of posting it)"`
	// MergeRetries bounds how often a merge GitHub refuses (405, 409) is
	// re-checked and tried again before the merger gives up.
	MergeRetries int `envconfig:"PRLOOP_MERGE_RETRIES" default:"3" desc:"how often a merge GitHub refuses (405, 409) is re-checked and tried again, 0 to 20"`
	// PollInterval is how often the merger re-reads a PR's checks and
	// mergeability while it waits for them.
	PollInterval time.Duration `envconfig:"PRLOOP_MERGE_POLL_INTERVAL" default:"10s" desc:"how often the merger re-reads a PR's checks and mergeability while it waits for them"`
	// LockTTL is the lease on a base branch's merge lock: a merger replica
	// that dies mid-merge holds the base for at most this long.
	LockTTL time.Duration `envconfig:"PRLOOP_MERGE_LOCK_TTL" default:"1m" desc:"lease on a base branch's merge lock: a merger replica that dies mid-merge holds the base for at most this long"`
	// UpdateTimeout bounds the wait for GitHub to show the new head after a
	// branch update (update-branch works asynchronously).
	UpdateTimeout time.Duration `envconfig:"PRLOOP_UPDATE_TIMEOUT" default:"2m" desc:"longest wait for GitHub to show the new head after a branch update"`
	// QueueMode is serial (one PR at a time) or speculative (candidates
	// of up to QueueDepth PRs tested together).
	QueueMode string `envconfig:"PRLOOP_QUEUE_MODE" default:"serial" desc:"serial: one PR per base at a time; speculative: test up to PRLOOP_QUEUE_DEPTH queued PRs together"`
	// PriorityLabel is the label that puts a queued PR ahead of every PR
	// without it (priority.go); a base's merge.priority_label overrides it.
	PriorityLabel string `envconfig:"PRLOOP_PRIORITY_LABEL" default:"prloop:priority" desc:"the label that puts a queued PR ahead of every PR without it (docs/queue.md); .github/prloop.yml's merge.priority_label overrides it"`
	// QueueDepth is how many PRs of a queue the speculative mode tests at
	// once: candidates base+PR1, base+PR1+PR2, … up to this many.
	QueueDepth int `envconfig:"PRLOOP_QUEUE_DEPTH" default:"4" desc:"(speculative) how many PRs of a queue ride in candidates at once, 1 to 16"`
	// RetryFailed re-runs a failed candidate's failed GitHub Actions jobs
	// once before its PR is removed (flaky.go).
	RetryFailed bool `envconfig:"PRLOOP_QUEUE_RETRY_FAILED" default:"true" desc:"(speculative) re-run a failed candidate's failed GitHub Actions jobs once before removing its PR; a pass on the re-run counts as flaky"`
	// GitHubLogin is prloop's own GitHub login, whose signals never count;
	// empty asks GitHub (GET /user) at start.
	GitHubLogin string `envconfig:"PRLOOP_GITHUB_LOGIN" desc:"prloop's own login, whose signals never count; empty: asked from GitHub"`
	// StatusContext is the context of prloop's own commit status (the
	// poller writes it). It is never counted as a check: prloop's own
	// status, pending while the PR waits in the queue, must neither hold
	// up nor make green the gate of its own merge.
	StatusContext string `envconfig:"PRLOOP_STATUS_CONTEXT" default:"prloop" desc:"the context of prloop's commit status, or the name of its check run under GitHub App auth; the merger never counts either as a check"`
	// ResolveConflicts hands a queued PR that conflicts with its base to
	// the coding agent (PRConflictResolveRequested, answered by the
	// feedback service) instead of escalating merge_conflict: the PR
	// leaves the queue, and its resolved head needs review again.
	ResolveConflicts bool `envconfig:"PRLOOP_RESOLVE_CONFLICTS" default:"false" desc:"a queued PR that conflicts with its base goes to the coding agent instead of a human; not with PRLOOP_DRY_RUN"`
}

// statusContext is PRLOOP_STATUS_CONTEXT, DefaultStatusContext when unset
// (a Config built in code).
func (c Config) statusContext() string {
	if s := strings.TrimSpace(c.StatusContext); s != "" {
		return s
	}
	return DefaultStatusContext
}

// queueMode is PRLOOP_QUEUE_MODE, its default (serial) when unset (a
// Config built in code).
func (c Config) queueMode() string {
	if c.QueueMode == "" {
		return defaults.QueueMode
	}
	return c.QueueMode
}

// priorityLabel is PRLOOP_PRIORITY_LABEL, its default when unset (a
// Config built in code).
func (c Config) priorityLabel() string {
	if l := strings.TrimSpace(c.PriorityLabel); l != "" {
		return l
	}
	return defaults.PriorityLabel
}

// queueDepth is PRLOOP_QUEUE_DEPTH, its default when unset (a Config built
// in code).
func (c Config) queueDepth() int {
	if c.QueueDepth < 1 {
		return defaults.QueueDepth
	}
	return c.QueueDepth
}

// requiredChecks returns PRLOOP_REQUIRED_CHECKS without the spaces around
// each name.
func (c Config) requiredChecks() []string {
	out := make([]string, 0, len(c.RequiredChecks))
	for _, name := range c.RequiredChecks {
		out = append(out, strings.TrimSpace(name))
	}
	return out
}

// Validate checks the configuration.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate(), c.PolicyConfig.Validate(), c.Settings.Validate()}
	switch c.MergeMethod {
	case github.MergeMethodSquash, github.MergeMethodMerge, github.MergeMethodRebase:
	default:
		errs = append(errs, fmt.Errorf("PRLOOP_MERGE_METHOD=%q: want squash, merge or rebase", c.MergeMethod))
	}
	switch strings.ToLower(c.UpdateMethod) {
	case UpdateMerge, UpdateRebase:
	default:
		errs = append(errs, fmt.Errorf("PRLOOP_UPDATE_METHOD=%q: want merge (GitHub's update-branch) or rebase", c.UpdateMethod))
	}
	for _, name := range c.RequiredChecks {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("PRLOOP_REQUIRED_CHECKS=%q: want comma-separated check names without empty ones", strings.Join(c.RequiredChecks, ",")))
			break
		}
	}
	if c.ChecksTimeout <= 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_CHECKS_TIMEOUT=%s: want a positive duration such as 30m", c.ChecksTimeout))
	}
	if c.MergeRetries < 0 || c.MergeRetries > 20 {
		errs = append(errs, fmt.Errorf("PRLOOP_MERGE_RETRIES=%d: want 0 to 20", c.MergeRetries))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_MERGE_POLL_INTERVAL=%s: want a positive duration such as 10s", c.PollInterval))
	}
	if c.LockTTL < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_MERGE_LOCK_TTL=%s: want at least 1s, well above the clock skew between hosts", c.LockTTL))
	}
	switch c.queueMode() {
	case QueueSerial:
	case QueueSpeculative:
		if c.MergeMethod == github.MergeMethodRebase {
			errs = append(errs, fmt.Errorf("PRLOOP_QUEUE_MODE=speculative with PRLOOP_MERGE_METHOD=rebase: a rebase merge rewrites every commit, so its result cannot be built and tested in advance; use squash or merge"))
		}
		if !c.RequireChecks {
			errs = append(errs, fmt.Errorf("PRLOOP_QUEUE_MODE=speculative with PRLOOP_REQUIRE_CHECKS=false: candidates exist to be tested; turn checks on or use the serial queue"))
		}
		if c.DryRun {
			errs = append(errs, fmt.Errorf("PRLOOP_QUEUE_MODE=speculative with PRLOOP_DRY_RUN=true: the speculative queue pushes candidate branches, which a dry run must not; use the serial queue for a dry run"))
		}
	default:
		errs = append(errs, fmt.Errorf("PRLOOP_QUEUE_MODE=%q: want serial or speculative", c.QueueMode))
	}
	if c.QueueDepth < 0 || c.QueueDepth > 16 || (c.QueueDepth == 0 && c.QueueMode != "") {
		errs = append(errs, fmt.Errorf("PRLOOP_QUEUE_DEPTH=%d: want 1 to 16", c.QueueDepth))
	}
	if c.ResolveConflicts && c.DryRun {
		// A dry run changes nothing on GitHub, and a resolution is a push.
		errs = append(errs, errors.New("PRLOOP_RESOLVE_CONFLICTS=true with PRLOOP_DRY_RUN=true: a dry run pushes nothing; turn one off"))
	}
	if c.UpdateTimeout <= 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_UPDATE_TIMEOUT=%s: want a positive duration such as 2m", c.UpdateTimeout))
	}
	return errors.Join(errs...)
}
