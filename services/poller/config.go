package poller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/review"
)

// Config is the poller's configuration, read from PRLOOP_* variables. The
// review policy (protocols, reviewers, quorum) is review.PolicyConfig,
// shared with the feedback service so both judge signals alike.
type Config struct {
	config.Common
	github.Config
	review.PolicyConfig

	// Repos are watched whole: every open PR there (optionally filtered by
	// WatchLabel and WatchAuthors) is watched without a watch request.
	Repos []string `envconfig:"PRLOOP_REPOS"`
	// WatchLabel, when set, limits auto-discovery to PRs with this label.
	WatchLabel string `envconfig:"PRLOOP_WATCH_LABEL"`
	// WatchAuthors, when set, limits auto-discovery to PRs by these logins.
	WatchAuthors []string `envconfig:"PRLOOP_WATCH_AUTHORS"`
	// ReviewTimeout is how long after watching began a PR may wait for
	// approval before ReviewTimeout is published (once; watching goes on).
	ReviewTimeout time.Duration `envconfig:"PRLOOP_REVIEW_TIMEOUT" default:"2h"`
	// PollInterval is how often each repository is probed; it is also the
	// lifetime of a replica's repository lease.
	PollInterval time.Duration `envconfig:"PRLOOP_POLL_INTERVAL" default:"30s"`
	// PollConcurrency bounds the poller's concurrent GitHub requests.
	PollConcurrency int `envconfig:"PRLOOP_POLL_CONCURRENCY" default:"8"`
	// WebhookSecret enables POST /webhook, verified with X-Hub-Signature-256.
	WebhookSecret github.Secret `envconfig:"PRLOOP_WEBHOOK_SECRET"`
	// EscalationLabel is the label the escalator puts on a PR that needs a
	// human; when a human removes it, the poller resets the fix cycle and
	// resumes the loop.
	EscalationLabel string `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required"`
	// GitHubLogin is prloop's own GitHub login, whose signals never count;
	// empty asks GitHub (GET /user) at start.
	GitHubLogin string `envconfig:"PRLOOP_GITHUB_LOGIN"`
}

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate(), c.PolicyConfig.Validate()}
	for _, r := range c.Repos {
		if strings.TrimSpace(r) == "" {
			continue // PRLOOP_REPOS= (set but empty) means none
		}
		if _, err := ghref.ParseRepo(r); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_REPOS: %w", err))
		}
	}
	if c.PollInterval < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_POLL_INTERVAL=%s: want at least 1s", c.PollInterval))
	}
	if c.PollConcurrency < 1 {
		errs = append(errs, fmt.Errorf("PRLOOP_POLL_CONCURRENCY=%d: want at least 1", c.PollConcurrency))
	}
	if c.ReviewTimeout < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_REVIEW_TIMEOUT=%s: want a positive duration, or 0 to disable", c.ReviewTimeout))
	}
	return errors.Join(errs...)
}
