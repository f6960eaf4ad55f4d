package poller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/review"
)

// Config is the poller's configuration, read from PRLOOP_* variables. The
// review policy (protocols, reviewers, quorum) is review.PolicyConfig,
// shared with the feedback service so both judge signals alike.
type Config struct {
	config.Common
	github.Config
	review.PolicyConfig
	policy.Settings

	// Repos are watched whole: every open PR there (optionally filtered by
	// WatchLabel and WatchAuthors) is watched without a watch request. An
	// entry owner/* stands for every non-archived repository of that
	// organisation or user, and * (GitHub App auth) for every repository of
	// the installation, found again every DiscoveryInterval (discovery.go).
	Repos []string `envconfig:"PRLOOP_REPOS" desc:"watch every open PR of these repositories (owner/repo,...; owner/* every non-archived repository of an organisation or user, * the GitHub App installation's, found again every PRLOOP_DISCOVERY_INTERVAL); empty: only the PRs named by prloop watch, prloop open or a PRWatchRequested"`
	// DiscoveryInterval is how often owner/* and * are listed again:
	// repositories added or removed there are watched or dropped then.
	DiscoveryInterval time.Duration `envconfig:"PRLOOP_DISCOVERY_INTERVAL" default:"10m" desc:"how often owner/* and * of PRLOOP_REPOS are listed again; repositories added or removed are watched or dropped then"`
	// WatchLabel, when set, limits auto-discovery to PRs with this label.
	WatchLabel string `envconfig:"PRLOOP_WATCH_LABEL" desc:"limit auto-discovery and webhooks to PRs with this label"`
	// WatchAuthors, when set, limits auto-discovery to PRs by these logins.
	WatchAuthors []string `envconfig:"PRLOOP_WATCH_AUTHORS" desc:"limit auto-discovery and webhooks to PRs by these authors"`
	// ReviewTimeout is how long after watching began a PR may wait for
	// approval before ReviewTimeout is published (once; watching goes on).
	ReviewTimeout time.Duration `envconfig:"PRLOOP_REVIEW_TIMEOUT" default:"2h" desc:"ReviewTimeout once after this long without approval; 0 disables"`
	// PollInterval is how often each repository is probed; it is also the
	// lifetime of a replica's repository lease.
	PollInterval time.Duration `envconfig:"PRLOOP_POLL_INTERVAL" default:"30s" desc:"how often each repository is probed while a watched PR there needs it; at least 1s"`
	// IdleProbeInterval is how often a repository is probed while the
	// probe is not what would see its news first: none of its PRs watched,
	// or all of them shown by the search (adaptive.go); 0 probes every
	// repository every interval.
	IdleProbeInterval time.Duration `envconfig:"PRLOOP_IDLE_PROBE_INTERVAL" default:"10m" desc:"how often a repository is probed while none of its watched PRs needs it (none watched, or all shown by the search) and a webhook or the search shows new PRs there; 0 probes every repository every interval"`
	// Search lets the poller find the watched PRs' news with GitHub's
	// search, once per interval, when PRLOOP_WATCH_AUTHORS or
	// PRLOOP_WATCH_LABEL narrows what it watches (adaptive.go).
	Search bool `envconfig:"PRLOOP_POLL_SEARCH" default:"true" desc:"find the watched PRs' news with GitHub's search once per interval when PRLOOP_WATCH_AUTHORS or PRLOOP_WATCH_LABEL narrows what is watched"`
	// SearchPerMinute is the poller's share of GitHub's 30 searches a
	// minute; a round that would need more leaves the rest to the lists.
	SearchPerMinute int `envconfig:"PRLOOP_POLL_SEARCH_PER_MINUTE" default:"20" desc:"the poller's share of GitHub's 30 searches a minute"`
	// PollConcurrency bounds the poller's concurrent GitHub requests.
	PollConcurrency int `envconfig:"PRLOOP_POLL_CONCURRENCY" default:"8" desc:"concurrent GitHub requests of the poller"`
	// WebhookSecret enables POST /webhook, verified with X-Hub-Signature-256.
	WebhookSecret github.Secret `envconfig:"PRLOOP_WEBHOOK_SECRET" desc:"enables POST /webhook (verified X-Hub-Signature-256)"`
	// EscalationLabel is the label the escalator puts on a PR that needs a
	// human; when a human removes it, the poller resets the fix cycle and
	// resumes the loop.
	EscalationLabel string `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required" desc:"the label that hands a PR to a human (1 to 50 characters, no commas); while it is on, prloop runs no agent for the PR; removing it resumes the loop"`
	// PriorityLabel is the label that puts a PR ahead in its merge queue;
	// "/prloop priority" puts it on (docs/commands.md).
	PriorityLabel string `envconfig:"PRLOOP_PRIORITY_LABEL" default:"prloop:priority" desc:"the label that puts a queued PR ahead of every PR without it (docs/queue.md); .github/prloop.yml's merge.priority_label overrides it"`
	// GitHubLogin is prloop's own GitHub login, whose signals never count;
	// empty asks GitHub (GET /user) at start.
	GitHubLogin string `envconfig:"PRLOOP_GITHUB_LOGIN" desc:"prloop's own login, whose signals never count; empty: asked from GitHub"`
	// ApprovalSurvivesConflictFix lets an approval carry over to the head
	// the coding agent made by resolving the PR's conflict with its base
	// (PRLOOP_RESOLVE_CONFLICTS), as it does to the merger's own branch
	// update. Off by default: unlike update-branch, a resolution is the
	// agent's code, which only prloop's structural checks have seen (a
	// merge of the approved head and the base tip, no markers, no file
	// neither side changed), not a reviewer.
	ApprovalSurvivesConflictFix bool `envconfig:"PRLOOP_APPROVAL_SURVIVES_CONFLICT_FIX" default:"false" desc:"whether the approval carries over to the head the agent made by resolving a conflict"`

	// PostStatus writes prloop's commit status (where the PR stands, in
	// one line) on the head of every watched PR.
	PostStatus bool `envconfig:"PRLOOP_POST_STATUS" default:"true" desc:"write prloop's commit status on every watched PR's head"`
	// StatusContext is that status's context; the merger never counts it
	// as a check.
	StatusContext string `envconfig:"PRLOOP_STATUS_CONTEXT" default:"prloop" desc:"the context of prloop's commit status, or the name of its check run under GitHub App auth; the merger never counts either as a check"`
	// StatusCoalesce is the window in which a PR's changes make one write.
	StatusCoalesce time.Duration `envconfig:"PRLOOP_STATUS_COALESCE" default:"2s" desc:"changes to one PR within this window make one status write, of the latest line"`
	// DryRun logs the status instead of writing it.
	DryRun bool `envconfig:"PRLOOP_DRY_RUN" default:"false" desc:"publish what would happen, change nothing on GitHub (the feedback service still pushes fixes, and logs its note to the reviewers instead of posting it)"`
	// MaxFixCycles is the feedback service's PRLOOP_MAX_FIX_CYCLES (same
	// default), read here only for the status line's "cycle 1 of 2".
	MaxFixCycles int `envconfig:"PRLOOP_MAX_FIX_CYCLES" default:"2" desc:"fixes prloop may push per PR; the next change request escalates max_fix_cycles"`
	// QueueMode and QueueDepth are the merger's PRLOOP_QUEUE_MODE and
	// PRLOOP_QUEUE_DEPTH (same defaults), read here only to warn on the
	// status line when a repository's .github/prloop.yml asks for another
	// merge queue: the queue is the operator's.
	QueueMode  string `envconfig:"PRLOOP_QUEUE_MODE" default:"serial" desc:"serial: one PR per base at a time; speculative: test up to PRLOOP_QUEUE_DEPTH queued PRs together"`
	QueueDepth int    `envconfig:"PRLOOP_QUEUE_DEPTH" default:"4" desc:"(speculative) how many PRs of a queue ride in candidates at once, 1 to 16"`
	// FixChecks says which failing checks go to the feedback service
	// (PRChecksFailed): required (the base's required checks, all when
	// none are known), all, or none.
	FixChecks string `envconfig:"PRLOOP_FIX_CHECKS" default:"required" desc:"which failing checks go back to the agent: required (the base's required checks, all when none are known), all, or none"`
	// RequiredChecks adds checks the base requires, as the merger's
	// setting of the same name.
	RequiredChecks []string `envconfig:"PRLOOP_REQUIRED_CHECKS" desc:"checks every merge needs besides those the base branch's rules require (comma-separated)"`
}

// FixChecksMode is PRLOOP_FIX_CHECKS, lower case; empty means required.
func (c Config) FixChecksMode() string {
	if m := strings.ToLower(strings.TrimSpace(c.FixChecks)); m != "" {
		return m
	}
	return FixRequired
}

// requiredChecks is PRLOOP_REQUIRED_CHECKS without blanks.
func (c Config) requiredChecks() []string {
	var out []string
	for _, n := range c.RequiredChecks {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// StatusOptions are the status writer's settings.
func (c Config) StatusOptions() StatusOptions {
	return StatusOptions{
		Context: c.StatusContext, Coalesce: c.StatusCoalesce, DryRun: c.DryRun,
		Line: prstatus.Options{MaxFixCycles: c.MaxFixCycles, Label: c.EscalationLabel},
	}
}

// Discovers reports whether PRLOOP_REPOS names a repository whose open
// PRs are watched without a watch request.
func (c Config) Discovers() bool {
	return slices.ContainsFunc(c.Repos, func(r string) bool { return strings.TrimSpace(r) != "" })
}

// RepoPatterns are the entries of PRLOOP_REPOS that discovery lists:
// "owner/*" as the owner's name, "*" as itself (the App installation).
func (c Config) RepoPatterns() []string {
	var out []string
	for _, r := range c.Repos {
		r = strings.TrimSpace(r)
		if r == InstallationRepos {
			out = append(out, r)
		} else if owner, ok := strings.CutSuffix(r, "/*"); ok {
			out = append(out, owner)
		}
	}
	return out
}

// InstallationRepos is the PRLOOP_REPOS entry for every repository of the
// GitHub App installation.
const InstallationRepos = "*"

// RepoRefs are the repositories PRLOOP_REPOS names, those Validate
// accepts: empty entries and patterns (RepoPatterns) are none.
func (c Config) RepoRefs() []ghref.Repo {
	var repos []ghref.Repo
	for _, r := range c.Repos {
		if strings.TrimSpace(r) == "" || isPattern(r) {
			continue
		}
		if repo, err := ghref.ParseRepo(r); err == nil {
			repos = append(repos, repo)
		}
	}
	return repos
}

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate(), c.PolicyConfig.Validate(), c.Settings.Validate()}
	for _, r := range c.Repos {
		if strings.TrimSpace(r) == "" {
			continue // PRLOOP_REPOS= (set but empty) means none
		}
		if isPattern(r) {
			owner, _ := strings.CutSuffix(strings.TrimSpace(r), "/*")
			if owner != InstallationRepos {
				if _, err := ghref.ParseRepo(owner + "/x"); err != nil {
					errs = append(errs, fmt.Errorf("PRLOOP_REPOS: %q: want owner/* with an owner's name: %w", r, err))
				}
			} else if !c.Config.UsesApp() {
				errs = append(errs, errors.New("PRLOOP_REPOS: * (every repository of the installation) needs GitHub App auth (PRLOOP_GITHUB_APP_ID …)"))
			}
			continue
		}
		if _, err := ghref.ParseRepo(r); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_REPOS: %w", err))
		}
	}
	if c.PollInterval < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_POLL_INTERVAL=%s: want at least 1s", c.PollInterval))
	}
	if c.DiscoveryInterval < 0 || (c.DiscoveryInterval > 0 && c.DiscoveryInterval < time.Second) {
		errs = append(errs, fmt.Errorf("PRLOOP_DISCOVERY_INTERVAL=%s: want at least 1s", c.DiscoveryInterval))
	}
	if c.IdleProbeInterval != 0 && c.IdleProbeInterval < c.PollInterval {
		errs = append(errs, fmt.Errorf("PRLOOP_IDLE_PROBE_INTERVAL=%s: want at least PRLOOP_POLL_INTERVAL (%s)", c.IdleProbeInterval, c.PollInterval))
	}
	if c.PollConcurrency < 1 {
		errs = append(errs, fmt.Errorf("PRLOOP_POLL_CONCURRENCY=%d: want at least 1", c.PollConcurrency))
	}
	if c.ReviewTimeout < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_REVIEW_TIMEOUT=%s: want a positive duration, or 0 to disable", c.ReviewTimeout))
	}
	if c.PostStatus && strings.TrimSpace(c.StatusContext) == "" {
		errs = append(errs, errors.New("PRLOOP_STATUS_CONTEXT is empty: want a status context such as prloop"))
	}
	if m := c.FixChecksMode(); m != FixRequired && m != FixAll && m != FixNone {
		errs = append(errs, fmt.Errorf("PRLOOP_FIX_CHECKS=%s: want required, all or none", c.FixChecks))
	}
	if c.StatusCoalesce < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_STATUS_COALESCE=%s: want 0 or a positive duration such as 2s", c.StatusCoalesce))
	}
	return errors.Join(errs...)
}

// isPattern reports whether a PRLOOP_REPOS entry is owner/* or *.
func isPattern(r string) bool {
	r = strings.TrimSpace(r)
	return r == InstallationRepos || strings.HasSuffix(r, "/*")
}
