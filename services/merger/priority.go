package merger

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Priority (docs/queue.md, Priority).
//
// A PR labelled with the priority label (PRLOOP_PRIORITY_LABEL, or the
// base's merge.priority_label) goes ahead of every PR without it, arrival
// order kept among equals. Only the PRs prloop already spent work on keep
// their places ahead of it (pinned): in the speculative queue those riding
// in the candidates CI is testing, which would merge before it anyway, so
// the priority PR enters the next batch first; in the serial queue the PR
// whose branch prloop already updated or whose merge it started. The
// merger reads the labels whenever it looks at the queue (prioritise), so
// a label added or removed while a PR waits takes effect on the next look.

// DefaultPriorityLabel is the priority label when PRLOOP_PRIORITY_LABEL is
// not set (a Config built in code).
const DefaultPriorityLabel = "prloop:priority"

// queueOrder orders a queue's entries: first those pinned, in the order
// of pinned (PR numbers, a prefix kept only as far as each is queued;
// PRs that left at the front passed over), then the others, those with
// Priority first, each group in arrival order
// (the approval's sequence, then the key). It is pure, and every path
// that orders a queue goes through it (queue.list, the speculative pass).
func queueOrder(entries []stored, pinned []int) []stored {
	out := slices.Clone(entries)
	place := map[int]int{}
	for i, n := range pinned {
		if !slices.ContainsFunc(entries, func(s stored) bool { return s.PR.Number == n }) {
			if len(place) == 0 {
				continue // merged from the front: the rest still stands
			}
			break // a PR ahead left: the candidates after it change anyway
		}
		place[n] = i
	}
	rank := func(s stored) (int, int) {
		if i, ok := place[s.PR.Number]; ok {
			return 0, i
		}
		if s.Priority {
			return 1, 0
		}
		return 2, 0
	}
	slices.SortStableFunc(out, func(a, b stored) int {
		ga, ia := rank(a)
		gb, ib := rank(b)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ia, ib), cmp.Compare(a.Seq, b.Seq), strings.Compare(a.key, b.key))
	})
	return out
}

// spent returns, in arrival order, the PRs of a queue prloop already spent
// a step on: a merge or branch update under way (Intent), or a head
// prloop made by updating the branch, whose CI is running. They keep
// their places (queueOrder's pinned): overtaking them would throw that
// work away. It is pure.
func spent(entries []stored) []int {
	var out []int
	for _, s := range entries {
		if s.Intent != nil || (s.Head != "" && s.Head != s.ApprovedHead) {
			out = append(out, s.PR.Number)
		}
	}
	return out
}

// riders returns the PRs of a queue riding in b's candidates, in chain
// order, as far as each is still queued on the head its candidate was
// built from: the batch CI is testing, which a priority PR does not
// overtake. Candidates at the front whose PRs left are passed over: the
// merges of a batch leave from the front, and the candidates behind them
// still test what will merge (by tree). One that left or changed after a
// PR still riding ends the batch: every candidate after it changes. It is
// pure.
func (b Batch) riders(entries []stored) []int {
	var out []int
	for _, c := range b.Candidates {
		i := slices.IndexFunc(entries, func(s stored) bool { return s.PR.Number == c.PR.Number })
		switch {
		case i < 0 && len(out) == 0:
			continue
		case i < 0 || entries[i].Head != c.Head:
			return out
		}
		out = append(out, c.PR.Number)
	}
	return out
}

// pinnedOf is queueOrder's pinned for a queue: the PRs riding in its
// candidates, then those prloop spent a step on. It is pure.
func pinnedOf(entries []stored, b Batch) []int {
	pinned := b.riders(entries)
	for _, n := range spent(entries) {
		if !slices.Contains(pinned, n) {
			pinned = append(pinned, n)
		}
	}
	return pinned
}

// hasLabel reports whether the PR carries the label (GitHub compares
// label names case-insensitively).
func hasLabel(p *gh.PullRequest, label string) bool {
	if label == "" {
		return false
	}
	return slices.ContainsFunc(p.Labels, func(l *gh.Label) bool { return strings.EqualFold(l.GetName(), label) })
}

// priorityLabel is the priority label on base of repo: the base's
// merge.priority_label, or PRLOOP_PRIORITY_LABEL.
func (s *Service) priorityLabel(ctx context.Context, repo ghref.Repo, base string) (string, error) {
	e, _, err := s.pol.At(ctx, repo, base, "")
	if err != nil {
		return "", err
	}
	return cmp.Or(strings.TrimSpace(e.PriorityLabel.V), s.cfg.priorityLabel()), nil
}

// ordered returns a queue's entries in queueOrder, after reading each
// PR's labels on GitHub (prioritise). A read that fails leaves the
// entries' priorities as they were: the order is never worth a stalled
// queue.
func (s *Service) ordered(ctx context.Context, qid string) ([]stored, error) {
	entries, err := s.q.list(ctx, qid)
	if err != nil || len(entries) == 0 {
		return entries, err
	}
	changed, err := s.prioritise(ctx, entries)
	if err != nil {
		s.log.Info("cannot read the queued PRs' labels; keeping their priorities", "queue", qid, "err", err)
	}
	if !changed {
		return s.order(ctx, qid, entries)
	}
	// Saved and announced: read the queue again, in its new order.
	entries, err = s.q.list(ctx, qid)
	if err != nil {
		return nil, err
	}
	return s.order(ctx, qid, entries)
}

// order puts entries (in arrival order) in queueOrder, with the
// candidates of the queue's batch pinned.
func (s *Service) order(ctx context.Context, qid string, entries []stored) ([]stored, error) {
	b, err := s.q.batch(ctx, qid)
	if err != nil {
		return nil, err
	}
	return queueOrder(entries, pinnedOf(entries, b)), nil
}

// prioritise reads each queued PR's labels and, for each whose priority
// changed, stores it with a PRMergeQueued saying so (its new place and
// the priority) in its outbox, and publishes it. It reports whether any
// changed.
func (s *Service) prioritise(ctx context.Context, entries []stored) (bool, error) {
	if len(entries) == 0 {
		return false, nil
	}
	label, err := s.priorityLabel(ctx, entries[0].PR.RepoRef(), entries[0].Base)
	if err != nil {
		return false, err
	}
	now := make([]bool, len(entries))
	// A few reads at a time: a long queue must not burst GitHub (they are
	// conditional requests, mostly answered 304 from the cache).
	const atOnce = 8
	for from := 0; from < len(entries); from += atOnce {
		part := entries[from:min(from+atOnce, len(entries))]
		if err := parallel(len(part), func(i int) error {
			p, err := s.d.GitHub.GetPull(ctx, part[i].PR)
			if err != nil {
				return about(part[i].PR, err)
			}
			now[from+i] = hasLabel(p, label)
			return nil
		}); err != nil {
			return false, err
		}
	}
	next := slices.Clone(entries)
	changed := false
	for i := range next {
		if next[i].Priority != now[i] {
			next[i].Priority, changed = now[i], true
		}
	}
	if !changed {
		return false, nil
	}
	b, err := s.q.batch(ctx, queueID(entries[0].PR.RepoRef(), entries[0].Base))
	if err != nil {
		return false, err
	}
	order := queueOrder(next, pinnedOf(next, b))
	for i, st := range next {
		if st.Priority == entries[i].Priority {
			continue
		}
		st := entries[i]
		t := reprioritised(st.Entry, next[i].Priority, order, s.cfg.queueMode())
		log := s.log.With("pr", st.PR.String())
		log.Info("priority changed while queued", "priority", next[i].Priority, "position", t.Events[0].Data.(*events.MergeQueued).Position)
		if err := s.apply(ctx, &st, nil, t, log); err != nil {
			return true, unlessReplaced(err)
		}
	}
	return true, nil
}

// reprioritised is the transition of a queued entry whose priority label
// was added (priority) or removed: the entry records it, and a new
// PRMergeQueued says its place in order (the queue as it now stands) and
// its priority. The id counts the changes, so that a label added again is
// news. It is pure.
func reprioritised(e Entry, priority bool, order []stored, mode string) Transition {
	next := e
	next.Priority = priority
	next.Reprioritised++
	pos, ahead := placeIn(order, e.PR)
	return Transition{Next: next, Events: []outEvent{{Data: &events.MergeQueued{
		Base: events.Base{PR: e.PR, HeadSHA: e.ApprovedHead}, Position: pos, BaseBranch: e.Base, Mode: mode, Ahead: ahead, Priority: priority,
	}, Parts: []string{e.ApprovedHead, strconv.FormatUint(e.Seq, 10), "priority", strconv.Itoa(next.Reprioritised)}}},
		Why: "priority changed while queued"}
}

// placeIn is the 1-based place of pr in a queue in order, and the numbers
// of the PRs ahead of it.
func placeIn(order []stored, pr ghref.PR) (int, []int) {
	var ahead []int
	for _, s := range order {
		if s.PR.Number == pr.Number {
			break
		}
		ahead = append(ahead, s.PR.Number)
	}
	return len(ahead) + 1, ahead
}

// yields reports whether the serial queue's entry st, being processed,
// is no longer first in its queue's order (a priority PR came in ahead of
// it before prloop spent a step on it): the drain then takes the new
// first.
func (s *Service) yields(ctx context.Context, st stored, log *slog.Logger) bool {
	entries, err := s.ordered(ctx, queueID(st.PR.RepoRef(), st.Base))
	if err != nil || len(entries) == 0 {
		return false
	}
	if entries[0].key != st.key {
		log.Info("a priority PR goes first; this one waits", "first", entries[0].PR.String())
		return true
	}
	return false
}
