package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prloop/prloop/pkg/review"
)

// Settings are the operator's settings about repository policies, read from
// the PRLOOP_* variables its tags name. Each service that acts on a
// policy embeds it in its own configuration; the other ceilings are the
// services' own settings (PRLOOP_AGENT_TIMEOUT, PRLOOP_AGENT_BUDGET,
// PRLOOP_AGENT_MAY_EDIT_WORKFLOWS).
type Settings struct {
	// RepoPolicy reads each base's .github/prloop.yml; false holds every
	// repository to the operator's settings alone.
	RepoPolicy bool `envconfig:"PRLOOP_REPO_POLICY" default:"true" desc:"read each base branch's .github/prloop.yml; false holds every repository to these variables alone"`
	// MaxFixCyclesCeiling caps feedback.max_fix_cycles.
	MaxFixCyclesCeiling int `envconfig:"PRLOOP_MAX_FIX_CYCLES_CEILING" default:"5" desc:"the most fix cycles a repository's .github/prloop.yml may ask for (feedback.max_fix_cycles)"`
	// MergeMethods are the merge methods a file may choose.
	MergeMethods []string `envconfig:"PRLOOP_MERGE_METHODS" default:"squash,merge,rebase" desc:"the merge methods a repository's .github/prloop.yml may choose (comma-separated)"`
}

// Validate checks the settings; errors name the variable.
func (c Settings) Validate() error {
	var errs []error
	if c.MaxFixCyclesCeiling < 0 {
		errs = append(errs, fmt.Errorf("PRLOOP_MAX_FIX_CYCLES_CEILING=%d: want 0 or more", c.MaxFixCyclesCeiling))
	}
	for _, m := range c.MergeMethods {
		if !slices.Contains(MergeMethods, m) {
			errs = append(errs, fmt.Errorf("PRLOOP_MERGE_METHODS=%s: unknown method %q, want %s", strings.Join(c.MergeMethods, ","), m, oneOf(MergeMethods)))
		}
	}
	return errors.Join(errs...)
}

// SplitList splits a comma-separated setting (PRLOOP_REQUIRED_REVIEWERS)
// into its non-empty items.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// FromReview is the operator's side of the review section: the
// PRLOOP_* review settings every service that judges reviews shares
// (review.PolicyConfig). Each service adds its own settings to it.
func FromReview(c review.PolicyConfig) Operator {
	return Operator{
		Protocols: c.ReviewProtocols, Reviewers: c.Reviewers, Quorum: SplitList(c.RequiredReviewers),
		ApprovalSurvivesPush: c.ApprovalSurvivesPush,
	}
}
