package merger

import (
	"context"
	"log/slog"

	"github.com/prloop/prloop/pkg/ghref"
)

// conflicted takes the entry st out of its queue because its head
// conflicts with its base, outside process (the speculative queue's
// paths): core's conflicted decides the events.
func (s *Service) conflicted(ctx context.Context, st stored, baseSHA, why string, log *slog.Logger) error {
	log.Info("merge conflict", "why", why, "base_sha", ghref.ShortSHA(baseSHA), "resolve", s.cfg.ResolveConflicts)
	return s.saved(s.apply(ctx, &st, nil, conflicted(st.Entry, baseSHA, why, s.cfg.policy()), log))
}
