package review

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// PolicyConfig is the review-policy configuration, read from the PRLOOP_*
// variables its tags name. Every service that judges review signals (the
// poller deciding the status, the feedback service collecting what to fix)
// embeds it in its own configuration, so they apply the same rules.
type PolicyConfig struct {
	// ReviewProtocols are the enabled review protocols: emoji, reviews, quorum.
	ReviewProtocols []string `envconfig:"PRLOOP_REVIEW_PROTOCOLS" default:"emoji,reviews" desc:"how reviewers signal: any of emoji, reviews, quorum"`
	// Reviewers are the logins whose signals count; empty means everyone with
	// write, maintain or admin permission on the repository.
	Reviewers []string `envconfig:"PRLOOP_REVIEWERS" desc:"whose review signals count; empty: anyone with write, maintain or admin permission (never the author)"`
	// RequiredReviewers are the quorum's bot reviewers: comma-separated
	// "login" or "login/marker text".
	RequiredReviewers string `envconfig:"PRLOOP_REQUIRED_REVIEWERS" desc:"quorum bots: login or login/marker text, comma-separated"`
	// ReviewFailurePatterns mark a quorum reviewer's comment as a failed
	// review workflow (case-insensitive).
	ReviewFailurePatterns []string `envconfig:"PRLOOP_REVIEW_FAILURE_PATTERNS" default:"API Error,Timeout,503,workflow failed" desc:"text that marks a quorum bot's review as a failure"`
	// FindingIgnore are regular expressions (comma-separated,
	// case-insensitive) that set a quorum bot's finding aside as not
	// actionable unless it is critical (see Classify); the default is
	// DefaultFindingIgnore, and an empty value leaves only the built-in
	// rules. Backslashes are doubled in the tag: struct tags unquote them.
	FindingIgnore []string `envconfig:"PRLOOP_FINDING_IGNORE" default:"^[\\W_]*(nit(s|pick\\w*)?|style|formatting|typo|cosmetic|trivial)\\b,\\[(nit|style|formatting|typo|cosmetic|trivial)\\],severity\\W*(low|trivial|info)\\b,\\blow[- ]priority\\b,!\\[low\\]" desc:"comma-separated regular expressions that set a quorum bot's finding aside (default: nit, style, formatting, typo, trivial and low-severity markers); empty: only the built-in rules"`
	// ApprovalSurvivesPush lets an approval given before the latest push
	// approve the new head.
	ApprovalSurvivesPush bool `envconfig:"PRLOOP_APPROVAL_SURVIVES_PUSH" default:"false" desc:"whether an approval given before the latest push approves it"`
	// PermissionCacheTTL is how long a reviewer's looked-up permission is trusted.
	PermissionCacheTTL time.Duration `envconfig:"PRLOOP_PERMISSION_CACHE_TTL" default:"1h" desc:"how long a looked-up reviewer permission is trusted"`
	// PermissionMaxStale is how long after PermissionCacheTTL a looked-up
	// permission still stands in for a lookup that fails (a GitHub outage
	// must not flip a verdict); older answers are forgotten.
	PermissionMaxStale time.Duration `envconfig:"PRLOOP_PERMISSION_MAX_STALE" default:"24h" desc:"how long after that TTL the last known permission stands in for a failed lookup (a GitHub outage never flips a verdict; with no known answer the evaluation waits)"`
}

// Validate checks the policy settings; errors name the variable.
func (c PolicyConfig) Validate() error {
	protos, err := c.Protocols()
	errs := []error{err}
	for _, p := range protos {
		if p == ProtocolQuorum && len(ParseReviewers(c.RequiredReviewers)) == 0 {
			errs = append(errs, errors.New("PRLOOP_REVIEW_PROTOCOLS includes quorum but PRLOOP_REQUIRED_REVIEWERS is empty: name the bot reviewers, e.g. copilot-pull-request-reviewer,github-actions[bot]/OpenAI Code Review"))
		}
	}
	if _, err := CompileFindingIgnore(c.FindingIgnore); err != nil {
		errs = append(errs, err)
	}
	if c.PermissionCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_PERMISSION_CACHE_TTL=%s: want a positive duration", c.PermissionCacheTTL))
	}
	if c.PermissionMaxStale < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_PERMISSION_MAX_STALE=%s: want a positive duration", c.PermissionMaxStale))
	}
	return errors.Join(errs...)
}

// Protocols parses ReviewProtocols.
func (c PolicyConfig) Protocols() ([]Protocol, error) {
	var out []Protocol
	for _, p := range c.ReviewProtocols {
		switch proto := Protocol(strings.ToLower(strings.TrimSpace(p))); proto {
		case ProtocolEmoji, ProtocolReviews, ProtocolQuorum:
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

// Policy is the review policy the configuration describes; self is
// prloop's own login, whose signals never count.
func (c PolicyConfig) Policy(self string) Policy {
	protos, _ := c.Protocols()
	ignore, _ := CompileFindingIgnore(c.FindingIgnore) // Validate reports a bad one
	return Policy{
		FindingIgnore:        ignore,
		Protocols:            protos,
		Quorum:               ParseReviewers(c.RequiredReviewers),
		FailurePatterns:      c.ReviewFailurePatterns,
		ApprovalSurvivesPush: c.ApprovalSurvivesPush,
		Self:                 self,
	}
}

// Authorization returns the reviewer authorization the configuration
// describes, looking permissions up with lookup.
func (c PolicyConfig) Authorization(lookup PermissionLookup) *Authorization {
	return NewAuthorization(c.Reviewers, lookup, c.PermissionCacheTTL, c.PermissionMaxStale)
}
