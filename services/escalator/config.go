package escalator

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/policy"
)

// DefaultLabel is the escalation label unless PRLOOP_ESCALATION_LABEL says
// otherwise: a constant, for tests and callers that need one, equal to
// that variable's tag on Config.Label (New reads the tag;
// TestNew_ZeroConfigTakesTheTagDefaults keeps the two equal).
const DefaultLabel = "human-review-required"

// Config is the escalator's configuration, read from PRLOOP_* variables.
type Config struct {
	config.Common
	github.Config

	// Label is put on an escalated PR. While it is there the feedback
	// service runs no agent for the PR; removing it resumes the loop.
	Label string `envconfig:"PRLOOP_ESCALATION_LABEL" default:"human-review-required" desc:"the label that hands a PR to a human (1 to 50 characters, no commas); while it is on, prloop runs no agent for the PR; removing it resumes the loop"`
	// Mentions are GitHub logins or teams (org/team) the escalation comment
	// mentions, e.g. "alice,acme/maintainers".
	Mentions []string `envconfig:"PRLOOP_ESCALATION_MENTIONS" desc:"GitHub logins or teams (org/team) the escalation comment mentions"`
	// Settings are the operator's settings on repository policies
	// (.github/prloop.yml: the label and mentions).
	policy.Settings
	// WebhookURL, when set, receives a JSON summary of each escalation
	// (Slack-compatible "text" plus structured fields). It is a secret: Slack
	// webhook URLs are credentials, so it is never logged.
	WebhookURL github.Secret `envconfig:"PRLOOP_ESCALATION_WEBHOOK_URL" desc:"receives a JSON summary of each escalation (Slack-compatible); a secret, never logged"`
	// WebhookRetries is how often a failed webhook delivery (network error,
	// 5xx, 429) is retried.
	WebhookRetries int `envconfig:"PRLOOP_ESCALATION_WEBHOOK_RETRIES" default:"3" desc:"retries of a failed webhook delivery (network error, 5xx, 429), 0 to 10"`
	// WebhookBackoff is the wait before the first retry; it doubles after
	// each one.
	WebhookBackoff time.Duration `envconfig:"PRLOOP_ESCALATION_WEBHOOK_BACKOFF" default:"1s" desc:"wait before the first webhook retry; it doubles after each one"`
	// WebhookTimeout bounds one delivery attempt.
	WebhookTimeout time.Duration `envconfig:"PRLOOP_ESCALATION_WEBHOOK_TIMEOUT" default:"10s" desc:"timeout of one webhook delivery attempt"`
	// GitHubLogin is prloop's own login; when set, only its comments count
	// when looking for an escalation comment already posted.
	GitHubLogin string `envconfig:"PRLOOP_GITHUB_LOGIN" desc:"prloop's own login, whose signals never count; empty: asked from GitHub"`
	// ClaimTTL is the lease one replica holds on an escalation while doing
	// it, so that two replicas never escalate the same PR and reason at once.
	ClaimTTL time.Duration `envconfig:"PRLOOP_ESCALATION_CLAIM_TTL" default:"2m" desc:"lease one replica holds on an escalation while doing it; at least 1s"`
	// RetryBackoff are the redelivery delays after a failed attempt (GitHub
	// down, the claim held by a replica that died), by delivery; the last
	// repeats. A delivery cut short by a crash counts too, so after a few
	// crashes the next try waits the longer delays.
	RetryBackoff []time.Duration `envconfig:"PRLOOP_ESCALATION_RETRY_BACKOFF" default:"1s,5s,30s,2m,5m" desc:"redelivery delays of an escalation after a failed attempt; the last repeats"`
}

var mentionRE = regexp.MustCompile(`^@?[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9_.-]+)?$`)

// Validate checks the configuration.
func (c Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Config.Validate(), c.Settings.Validate()}
	if l := strings.TrimSpace(c.Label); l == "" || len(l) > 50 || strings.Contains(l, ",") {
		errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_LABEL=%q: want a GitHub label name, 1 to 50 characters without commas", c.Label))
	}
	for _, m := range c.Mentions {
		if !mentionRE.MatchString(strings.TrimSpace(m)) {
			errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_MENTIONS: %q is not a GitHub login or org/team", m))
		}
	}
	if c.WebhookURL != "" {
		// The URL is a secret: say what is wrong without repeating it.
		u, err := url.Parse(c.WebhookURL.Reveal())
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, errors.New("PRLOOP_ESCALATION_WEBHOOK_URL: want an http or https URL with a host"))
		}
	}
	if c.WebhookRetries < 0 || c.WebhookRetries > 10 {
		errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_WEBHOOK_RETRIES=%d: want 0 to 10", c.WebhookRetries))
	}
	if c.WebhookBackoff < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_WEBHOOK_BACKOFF=%s: want a duration such as 1s", c.WebhookBackoff))
	}
	if c.WebhookTimeout <= 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_WEBHOOK_TIMEOUT=%s: want a positive duration such as 10s", c.WebhookTimeout))
	}
	if c.ClaimTTL < time.Second {
		errs = append(errs, fmt.Errorf("PRLOOP_ESCALATION_CLAIM_TTL=%s: want at least 1s", c.ClaimTTL))
	}
	if err := config.CheckBackoff("PRLOOP_ESCALATION_RETRY_BACKOFF", c.RetryBackoff); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
