package escalator

import (
	"context"
	"errors"
	"fmt"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// labelRemover is the part of the GitHub client "/prloop retry" needs.
type labelRemover interface {
	RemoveLabel(ctx context.Context, pr ghref.PR, label string) error
}

var _ labelRemover = (*github.Client)(nil)

// retry carries out "/prloop retry" (docs/commands.md), the escalator's
// part of it: the escalation of the command's epoch is over in its
// records (a late request of that epoch is old news, as after a human's
// removal of the label), and its label comes off the PR. The poller sees
// the label gone and resumes the loop, as when a human removes it; a
// label already gone is no error.
func (s *Service) retry(ctx context.Context, d *events.CommandReceived) error {
	log := s.log.With("pr", d.PR.String(), "comment", d.CommentID)
	if err := s.resolved(ctx, d.PR, d.Epoch+1); err != nil {
		return fmt.Errorf("record the retry of %s: %w", d.PR, err)
	}
	g, ok := s.d.GitHub.(labelRemover)
	if !ok {
		return nil
	}
	label := s.optionsFor(ctx, d.PR, log).Label
	if label == "" {
		return nil
	}
	if err := g.RemoveLabel(ctx, d.PR, label); err != nil && !errors.Is(err, github.ErrNotFound) {
		return fmt.Errorf("remove the escalation label of %s for /prloop retry: %w", d.PR, err)
	}
	log.Info("/prloop retry: the escalation label is off; the loop resumes", "label", label, "author", d.Author)
	return nil
}
