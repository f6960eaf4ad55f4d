package prstatus

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Freeze is a merge queue's freeze as PRQueueFrozen said it: nothing
// merges on Base (events.AllBases: every base of Repo) until
// PRQueueUnfrozen.
type Freeze struct {
	Repo ghref.Repo `json:"repo"`
	// Base and Reason are cleaned (events.CleanTitle): they end up in a
	// commit status and on a terminal.
	Base   string    `json:"base,omitempty"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until,omitzero"`
	Actor  string    `json:"actor,omitempty"`
	Since  time.Time `json:"since"`
}

// Text says the freeze for people: "queue frozen: release 2.0 (until
// 18:00 UTC)".
func (f Freeze) Text() string {
	return "queue frozen: " + f.Reason + when(!f.Until.IsZero(), " (until "+f.Until.UTC().Format("Jan 2 15:04")+" UTC)")
}

func freezeKey(repo ghref.Repo, base string) string {
	return repo.Key() + "\x00" + strings.ToLower(base)
}

// applyRepo folds an event about a repository rather than a PR
// (events.RepoLevel): a queue's freeze and its end. It reports the PRs
// whose line it changes: those queued on the base (or on every base).
func (b *Board) applyRepo(d events.Data, at time.Time) []ghref.PR {
	repo := d.Ref().RepoRef()
	var base string
	switch e := d.(type) {
	case *events.QueueFrozen:
		base = events.CleanTitle(e.BaseBranch)
		if b.freezes == nil {
			b.freezes = map[string]Freeze{}
		}
		b.freezes[freezeKey(repo, base)] = Freeze{
			Repo: repo, Base: base, Reason: events.CleanTitle(e.Reason), Until: e.Until, Actor: events.CleanTitle(e.Actor), Since: at,
		}
	case *events.QueueUnfrozen:
		base = events.CleanTitle(e.BaseBranch)
		delete(b.freezes, freezeKey(repo, base))
	default:
		return nil // a command (PRCreateRequested, PRQueueFreezeRequested): its answer says what changed
	}
	var out []ghref.PR
	for _, p := range b.prs {
		if p.Queued() && p.PR.RepoRef().Key() == repo.Key() && (base == events.AllBases || strings.EqualFold(p.Base, base)) {
			out = append(out, p.PR)
		}
	}
	slices.SortFunc(out, func(x, y ghref.PR) int { return strings.Compare(x.Key(), y.Key()) })
	return out
}

// Frozen returns the freeze that holds the merge queue of base in repo,
// if any: one of that base or of every base.
func (b *Board) Frozen(repo ghref.Repo, base string) (Freeze, bool) {
	if f, ok := b.freezes[freezeKey(repo, base)]; ok {
		return f, true
	}
	f, ok := b.freezes[freezeKey(repo, events.AllBases)]
	return f, ok
}

// Freezes returns every freeze on the board, by repository and base.
func (b *Board) Freezes() []Freeze {
	out := make([]Freeze, 0, len(b.freezes))
	for _, f := range b.freezes {
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y Freeze) int {
		return cmp.Or(strings.Compare(x.Repo.Key(), y.Repo.Key()), strings.Compare(x.Base, y.Base))
	})
	return out
}

// Queues returns every merge queue on the board that holds a PR, as
// repository and base, in order.
func (b *Board) Queues() []Freeze {
	seen := map[string]bool{}
	var out []Freeze
	for _, p := range b.PRs() {
		k := freezeKey(p.PR.RepoRef(), p.Base)
		if p.Queued() && !seen[k] {
			seen[k] = true
			out = append(out, Freeze{Repo: p.PR.RepoRef(), Base: p.Base})
		}
	}
	return out
}

// queueOrder orders a merge queue as the merger does (its queueOrder):
// the PRs it already spent work on first (riding in a candidate, by
// place; a branch it updated), then those with the priority label, then
// the rest, each in the order they joined.
func queueOrder(q []*PR) {
	rank := func(p *PR) (int, int) {
		switch {
		case p.Candidate != nil && p.Candidate.Built():
			return 0, p.Candidate.Position
		case p.Spent:
			return 1, 0
		case p.Priority:
			return 2, 0
		}
		return 3, 0
	}
	slices.SortStableFunc(q, func(x, y *PR) int {
		gx, ix := rank(x)
		gy, iy := rank(y)
		return cmp.Or(cmp.Compare(gx, gy), cmp.Compare(ix, iy), cmp.Compare(x.QueuedSeq, y.QueuedSeq))
	})
}
