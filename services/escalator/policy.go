package escalator

import (
	"context"
	"log/slog"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
)

// pullReader reads a PR's base: a GitHub without it (a test's narrow
// fake) escalates with the operator's label and mentions.
type pullReader interface {
	GetPull(ctx context.Context, pr ghref.PR) (*gh.PullRequest, error)
}

// newPolicies is the escalator's reader of each base's
// .github/prloop.yml (pkg/policy, the one owner of policy facts): the
// label and the mentions of an escalation.
func newPolicies(cfg Config, g GitHub) *policy.Reader {
	return policy.NewReader(policy.Operator{EscalationLabel: cfg.Label, Mentions: cfg.Mentions}, cfg.Settings, g, nil)
}

// optionsFor are the label and mentions of an escalation of pr: its
// base's policy's. An escalation calls a person whatever the policy
// says, so a base whose file is invalid, or a failed read, escalates
// with the operator's (logged).
func (s *Service) optionsFor(ctx context.Context, pr ghref.PR, log *slog.Logger) CommentOptions {
	opts := CommentOptions{Label: s.cfg.Label, Mentions: s.cfg.Mentions}
	g, ok := s.d.GitHub.(pullReader)
	if !ok || !s.pol.Reads() {
		return opts
	}
	p, err := g.GetPull(ctx, pr)
	if err != nil {
		log.Warn("cannot read the PR's base; escalating with the operator's label and mentions", "err", err)
		return opts
	}
	e, _, err := s.pol.At(ctx, pr.RepoRef(), p.GetBase().GetRef(), "")
	if err != nil || e.Invalid != nil {
		log.Warn("the base's policy is unreadable or invalid; escalating with the operator's label and mentions", "err", err, "invalid", e.Invalid)
		return opts
	}
	return CommentOptions{Label: e.EscalationLabel.V, Mentions: e.Mentions.V}
}
