package feedback

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Conflict resolution (PRLOOP_RESOLVE_CONFLICTS, the merger's setting): the
// merger found a queued PR in conflict with its base and asked, with
// PRConflictResolveRequested, that the agent resolve it. The request is a
// trigger, not an authority: it goes through the same attempt as a change
// request (plan's checks of the PR on GitHub, one attempt per PR under its
// lease, the fix-cycle bound, the agent loop, the mirror, the fenced push),
// with three differences, all here: prloop's git merges the base tip into
// the head in the worktree before each agent run, the prompt is the
// conflict and the two sides' commit messages, and the agent's merge
// commit is checked strictly (checkResolution) before it is pushed. A
// failure escalates merge_conflict.

//go:embed conflict.tmpl
var conflictTemplateText string

// conflictTemplate is the built-in conflict prompt.
var conflictTemplate = template.Must(ParseTemplate("conflict.tmpl", conflictTemplateText))

// Bounds of the commit messages the conflict prompt quotes.
const (
	conflictMaxCommits      = 20
	conflictMaxBodyBytes    = 1000
	conflictMaxFiles        = 200
	conflictMaxSubjectBytes = 200
)

// Conflict is what a PRConflictResolveRequested adds to a Request: the
// base branch, and the base tip the merger saw the head conflict with.
type Conflict struct {
	BaseBranch, BaseSHA string
}

// conflictRequestOf reads a conflict resolution request from its event.
func conflictRequestOf(d *events.ConflictResolveRequested, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Conflict: &Conflict{BaseBranch: d.BaseBranch, BaseSHA: d.BaseSHA},
	}
}

// errCleanMerge says the head merges with the base tip without a
// conflict in prloop's mirror, although the merger saw one.
var errCleanMerge = errors.New("the head merges cleanly with the base")

// ErrBadResolution is wrapped by checkResolution's refusals: prloop does
// not push a resolution it cannot verify, and retrying the agent is left
// to a human.
var ErrBadResolution = fmt.Errorf("the conflict resolution is refused: %w", ErrRefused)

// resolution is what prloop's mirror says of the agent's resolution of a
// conflict: the facts checkResolution judges.
type resolution struct {
	// Head is the PR's head the conflict was on, Base the base tip merged
	// into it, Target the agent's result.
	Head, Base, Target string
	// Parents are Target's parents, in order.
	Parents []string
	// New are the commits of Target that neither Head nor Base has.
	New []string
	// Ours and Theirs are the paths the head and the base changed since
	// their merge base; Changed the paths Target changes from it.
	Ours, Theirs, Changed []string
	// Conflicted are the paths the merge of Head and Base conflicts in.
	Conflicted []string
	// MarkerFiles are Target's files with a "<<<<<<< " or ">>>>>>> " line,
	// SeparatorFiles those with a "=======" line.
	MarkerFiles, SeparatorFiles []string
	// Workflows are the paths under .github/workflows whose content in
	// Target is neither side's, and ForbidWorkflows the setting that
	// forbids the agent to write them (limits.ForbidWorkflows; "" allows
	// it).
	Workflows       []string
	ForbidWorkflows string
}

// checkResolution accepts exactly one new commit, a merge of the head and
// the base tip in that order, without conflict markers in any file the
// merge touched (a "=======" line only counts in a conflicted file: it is
// a Markdown heading elsewhere), that changes no file neither side
// changed and writes no workflow of its own. It is pure.
func checkResolution(r resolution) error {
	var why []string
	if len(r.New) != 1 || r.New[0] != r.Target {
		why = append(why, fmt.Sprintf("%d new commits, want exactly one merge commit", len(r.New)))
	}
	if !slices.Equal(r.Parents, []string{r.Head, r.Base}) {
		why = append(why, fmt.Sprintf("parents %s, want the head %s and the base %s in that order",
			shortList(r.Parents), ghref.ShortSHA(r.Head), ghref.ShortSHA(r.Base)))
	}
	var marked []string
	for _, f := range r.MarkerFiles {
		if slices.Contains(r.Changed, f) {
			marked = append(marked, f)
		}
	}
	for _, f := range r.SeparatorFiles {
		if slices.Contains(r.Conflicted, f) && !slices.Contains(marked, f) {
			marked = append(marked, f)
		}
	}
	if len(marked) > 0 {
		why = append(why, "conflict markers left in "+strings.Join(bounded(marked), ", "))
	}
	var unrelated []string
	for _, f := range r.Changed {
		if !slices.Contains(r.Ours, f) && !slices.Contains(r.Theirs, f) {
			unrelated = append(unrelated, f)
		}
	}
	if len(unrelated) > 0 {
		why = append(why, "changes files neither side changed: "+strings.Join(bounded(unrelated), ", "))
	}
	if len(r.Workflows) > 0 && r.ForbidWorkflows != "" {
		why = append(why, "writes workflows of its own: "+strings.Join(bounded(r.Workflows), ", ")+" ("+r.ForbidWorkflows+")")
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: %s", ErrBadResolution, strings.Join(why, "; "))
	}
	return nil
}

// bounded keeps an error's list of paths short; paths are cleaned, since
// they are the agent's or the authors' words.
func bounded(paths []string) []string {
	const n = 10
	out := make([]string, 0, min(len(paths), n+1))
	for _, p := range paths[:min(len(paths), n)] {
		out = append(out, Truncate(SanitizeLine(p), 200))
	}
	if len(paths) > n {
		out = append(out, fmt.Sprintf("and %d more", len(paths)-n))
	}
	return out
}

func shortList(shas []string) string {
	out := make([]string, len(shas))
	for i, s := range shas {
		out[i] = ghref.ShortSHA(s)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// conflictPromptData is what the conflict prompt shows. Ours and Theirs
// are cleaned commit messages ("subject\n\nbody"), newest first.
type conflictPromptData struct {
	URL, Ref, Title, Branch, HeadSHA string
	BaseBranch, BaseSHA              string
	Files                            []string
	Ours, Theirs                     []string
	OursMore, TheirsMore             int
}
