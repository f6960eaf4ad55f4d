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

// Config is the poller's configuration, read from PRLOOP_* variables.
type Config struct {
	config.Common
	github.Config

	// Repos are watched whole: every open PR there (optionally filtered by
	// WatchLabel and WatchAuthors) is watched without a watch request.
	Repos []string `envconfig:"PRLOOP_REPOS"`
	// WatchLabel, when set, limits auto-discovery to PRs with this label.
	WatchLabel string `envconfig:"PRLOOP_WATCH_LABEL"`
	// WatchAuthors, when set, limits auto-discovery to PRs by these logins.
	WatchAuthors []string `envconfig:"PRLOOP_WATCH_AUTHORS"`
	// ReviewProtocols are the enabled review protocols: emoji, reviews, quorum.
	ReviewProtocols []string `envconfig:"PRLOOP_REVIEW_PROTOCOLS" default:"emoji,reviews"`
	// Reviewers are the logins whose signals count; empty means everyone with
	// write, maintain or admin permission on the repository.
	Reviewers []string `envconfig:"PRLOOP_REVIEWERS"`
	// RequiredReviewers are the quorum's bot reviewers: comma-separated
	// "login" or "login/marker text".
	RequiredReviewers string `envconfig:"PRLOOP_REQUIRED_REVIEWERS"`
	// ReviewFailurePatterns mark a quorum reviewer's comment as a failed
	// review workflow (case-insensitive).
	ReviewFailurePatterns []string `envconfig:"PRLOOP_REVIEW_FAILURE_PATTERNS" default:"API Error,Timeout,503,workflow failed"`
	// ReviewTimeout is how long after watching began a PR may wait for
	// approval before ReviewTimeout is published (once; watching goes on).
	ReviewTimeout time.Duration `envconfig:"PRLOOP_REVIEW_TIMEOUT" default:"2h"`
	// ApprovalSurvivesPush lets an approval given before the latest push
	// approve the new head.
	ApprovalSurvivesPush bool `envconfig:"PRLOOP_APPROVAL_SURVIVES_PUSH" default:"false"`
	// PollInterval is how often each repository is probed.
	PollInterval time.Duration `envconfig:"PRLOOP_POLL_INTERVAL" default:"30s"`
	// PollConcurrency bounds the poller's concurrent GitHub requests.
	PollConcurrency int `envconfig:"PRLOOP_POLL_CONCURRENCY" default:"8"`
	// PermissionCacheTTL is how long a reviewer's looked-up permission is trusted.
	PermissionCacheTTL time.Duration `envconfig:"PRLOOP_PERMISSION_CACHE_TTL" default:"1h"`
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

// Validate checks the configuration.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate()}
	for _, r := range c.Repos {
		if strings.TrimSpace(r) == "" {
			continue // PRLOOP_REPOS= (set but empty) means none
		}
		if _, err := ghref.ParseRepo(r); err != nil {
			errs = append(errs, fmt.Errorf("PRLOOP_REPOS: %w", err))
		}
	}
	protos, err := c.Protocols()
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range protos {
		if p == review.ProtocolQuorum && len(review.ParseReviewers(c.RequiredReviewers)) == 0 {
			errs = append(errs, errors.New("PRLOOP_REVIEW_PROTOCOLS includes quorum but PRLOOP_REQUIRED_REVIEWERS is empty: name the bot reviewers, e.g. copilot-pull-request-reviewer,github-actions[bot]/OpenAI Code Review"))
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

// Protocols parses ReviewProtocols.
func (c Config) Protocols() ([]review.Protocol, error) {
	var out []review.Protocol
	for _, p := range c.ReviewProtocols {
		switch proto := review.Protocol(strings.ToLower(strings.TrimSpace(p))); proto {
		case review.ProtocolEmoji, review.ProtocolReviews, review.ProtocolQuorum:
			out = append(out, proto)
		case "":
		default:
			return nil, fmt.Errorf("PRLOOP_REVIEW_PROTOCOLS: unknown protocol %q, want emoji, reviews or quorum", p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("PRLOOP_REVIEW_PROTOCOLS is empty: enable at least one of emoji, reviews, quorum")
	}
	return out, nil
}

// Policy is the review policy the configuration describes.
func (c Config) Policy(self string) review.Policy {
	protos, _ := c.Protocols()
	return review.Policy{
		Protocols:            protos,
		Quorum:               review.ParseReviewers(c.RequiredReviewers),
		FailurePatterns:      c.ReviewFailurePatterns,
		ApprovalSurvivesPush: c.ApprovalSurvivesPush,
		Self:                 self,
	}
}
