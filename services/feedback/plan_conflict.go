package feedback

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/gitx"
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

// conflictGit is prloop's git as conflict resolution uses it, besides Git.
type conflictGit interface {
	SyncBase(ctx context.Context, wt Worktree, base string) (string, error)
	Conflicts(ctx context.Context, wt Worktree, head, base string) ([]string, error)
	StartMerge(ctx context.Context, wt Worktree, base string) error
	Messages(ctx context.Context, wt Worktree, from, to string, n int) ([]string, int, error)
	Resolution(ctx context.Context, wt Worktree, head, base, target string) (resolution, error)
	CommitAll(ctx context.Context, wt Worktree, message string) error
	Head(ctx context.Context, wt Worktree) (string, error)
}

var _ conflictGit = (*realGit)(nil)

// conflictGit returns the attempt's git for conflict resolution.
func (a *attempt) conflictGit() (conflictGit, error) {
	g, ok := a.git.(conflictGit)
	if !ok {
		return nil, fmt.Errorf("resolve the conflict of %s: %T cannot merge", a.req.PR, a.git)
	}
	return g, nil
}

// failReason is the reason an attempt escalates with when the agent's
// work fails: merge_conflict for a conflict, feedback_failed otherwise.
func (a *attempt) failReason() events.Reason {
	if a.req.Conflict != nil {
		return events.ReasonMergeConflict
	}
	return events.ReasonFeedbackFailed
}

// conflictBase brings the base branch into the mirror and fixes the base
// tip the attempt merges (a conflict's, or a failed candidate's base): the
// one recorded by an interrupted attempt, or the branch's tip now (it may
// be newer than the merger's: what matters is the base as it is).
func (a *attempt) conflictBase(ctx context.Context) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	branch := a.req.baseBranch()
	if got := a.pull.GetBase().GetRef(); got != branch {
		return fmt.Errorf("%w: %s's base is %q now, not %q", ErrUnusable, a.req.PR, got, branch)
	}
	wt := a.wt
	if u := a.pull.GetBase().GetRepo().GetCloneURL(); u != "" {
		wt.Remote = u // a fork's base is in the base repository
	}
	if err := checkRemote(wt.Remote); err != nil {
		return err
	}
	tip, err := g.SyncBase(ctx, wt, branch)
	if err != nil {
		return err
	}
	if a.rec.ConflictBase == "" || !a.git.HasCommit(ctx, a.wt, a.rec.ConflictBase) {
		a.rec.ConflictBase = tip
	}
	return nil
}

// conflictPrompt renders the conflict task from what the mirror says:
// the files in conflict and the two sides' commit messages, cleaned and
// bounded like every text of strangers the prompt carries.
func (a *attempt) conflictPrompt(ctx context.Context) (string, error) {
	g, err := a.conflictGit()
	if err != nil {
		return "", err
	}
	head, base := a.req.HeadSHA, a.rec.ConflictBase
	files, err := g.Conflicts(ctx, a.wt, head, base)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("%w: %s into %s", errCleanMerge, ghref.ShortSHA(base), ghref.ShortSHA(head))
	}
	ours, oursMore, err := g.Messages(ctx, a.wt, base, head, conflictMaxCommits)
	if err != nil {
		return "", err
	}
	theirs, theirsMore, err := g.Messages(ctx, a.wt, head, base, conflictMaxCommits)
	if err != nil {
		return "", err
	}
	data := conflictPromptData{
		URL: a.pull.GetHTMLURL(), Ref: a.req.PR.String(), Title: SanitizeLine(a.pull.GetTitle()), Branch: SanitizeLine(a.wt.Branch),
		HeadSHA: head, BaseBranch: SanitizeLine(a.req.Conflict.BaseBranch), BaseSHA: base,
		Files: bounded(files[:min(len(files), conflictMaxFiles)]), Ours: ours, OursMore: oursMore, Theirs: theirs, TheirsMore: theirsMore,
	}
	if data.URL == "" {
		data.URL = a.req.PR.URL
	}
	a.log.Info("conflict task prepared", "base_sha", ghref.EventSHA(base), "files", len(files), "ours", len(ours), "theirs", len(theirs))
	var b strings.Builder
	if err := conflictTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render the conflict prompt for %s: %w", a.req.PR, err)
	}
	return b.String(), nil
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

// prepareRun puts the worktree in the state the agent starts from: for a
// conflict, the head with the base tip merged in by prloop's git,
// conflict markers and all (a reset first discards an earlier run's
// work); for a change request, as it is.
func (a *attempt) prepareRun(ctx context.Context) error {
	if a.req.candidate() != nil {
		return a.mergeBase(ctx)
	}
	if a.req.Conflict == nil {
		return nil
	}
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	if err := a.git.Reset(ctx, a.wt, a.req.HeadSHA); err != nil {
		return err
	}
	return g.StartMerge(ctx, a.wt, a.rec.ConflictBase)
}

// mergeBase puts the worktree at prloop's merge of the base tip into the
// head, for a fix of a failed candidate: the agent starts on top of the
// current base, and what it adds is checked from that merge. A base that
// conflicts with the head is not for the agent to fix here.
func (a *attempt) mergeBase(ctx context.Context) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	if err := a.git.Reset(ctx, a.wt, a.req.HeadSHA); err != nil {
		return err
	}
	base := a.rec.ConflictBase
	files, err := g.Conflicts(ctx, a.wt, a.req.HeadSHA, base)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return fmt.Errorf("%w: %s conflicts with %s at %s in %s", ErrUnusable, a.req.PR,
			SanitizeLine(a.req.baseBranch()), ghref.ShortSHA(base), strings.Join(bounded(files), ", "))
	}
	if err := g.StartMerge(ctx, a.wt, base); err != nil {
		return err
	}
	if err := g.CommitAll(ctx, a.wt, fmt.Sprintf("merge %s into #%d", SanitizeLine(a.req.baseBranch()), a.req.PR.Number)); err != nil {
		return err
	}
	if a.rec.BaseMerge, err = g.Head(ctx, a.wt); err != nil {
		return err
	}
	a.log.Info("merged the base into the head before the agent runs", "base_sha", ghref.EventSHA(base), "merge", ghref.EventSHA(a.rec.BaseMerge))
	return nil
}

// checkConflictResult checks, in the mirror, the agent's resolution
// target of the conflict between the head and the base tip.
func (a *attempt) checkConflictResult(ctx context.Context, target string) error {
	g, err := a.conflictGit()
	if err != nil {
		return err
	}
	r, err := g.Resolution(ctx, a.wt, a.req.HeadSHA, a.rec.ConflictBase, target)
	if err != nil {
		return err
	}
	r.ForbidWorkflows = a.lim.ForbidWorkflows
	return checkResolution(r)
}

// Conflicts lists the paths in which head and base conflict, from git
// merge-tree in the mirror (git 2.38 or newer): none when they merge
// cleanly.
func (g *realGit) Conflicts(ctx context.Context, wt Worktree, head, base string) ([]string, error) {
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", head, base)
	if err != nil && gitx.ExitCode(err) != 1 {
		return nil, err
	}
	if err == nil {
		return nil, nil // exit 0: a clean merge
	}
	// The tree, then each conflicted path (once per stage written).
	fields := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	var files []string
	for _, f := range fields[1:] {
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files, nil
}

// StartMerge merges base (a commit the mirror has) into the worktree's
// head without committing, leaving conflict markers: the worktree's git
// fetches it from the mirror (read-only there) and merges, in the
// sandbox, without credentials.
func (g *realGit) StartMerge(ctx context.Context, wt Worktree, base string) error {
	if !shaRE.MatchString(base) {
		return fmt.Errorf("%w: base %q is not a commit id", ErrUnusable, base)
	}
	if _, err := g.worktreeGit(ctx, wt, nil, "", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", wt.Mirror, wt.baseRef()); err != nil {
		return err
	}
	_, err := g.worktreeGit(ctx, wt, g.identity(), "", "merge", "--quiet", "--no-commit", "--no-ff", "--no-edit", base)
	if err != nil && gitx.ExitCode(err) != 1 {
		return err // exit 1 is the conflict the agent is to resolve
	}
	return nil
}

// Messages returns the cleaned messages of the commits of to that from
// lacks, newest first, at most n, and how many more there are.
func (g *realGit) Messages(ctx context.Context, wt Worktree, from, to string, n int) ([]string, int, error) {
	total, err := g.CountCommits(ctx, wt, from, to)
	if err != nil {
		return nil, 0, err
	}
	out, err := g.mirrorGit(ctx, wt.Mirror, "", "log", "--format=%s%x00%b%x1e", fmt.Sprintf("--max-count=%d", n), from+".."+to)
	if err != nil {
		return nil, 0, err
	}
	var msgs []string
	for _, rec := range strings.Split(out, "\x1e") {
		subject, body, _ := strings.Cut(strings.TrimLeft(rec, "\n"), "\x00")
		if subject == "" && strings.TrimSpace(body) == "" {
			continue
		}
		msg := Truncate(SanitizeLine(subject), conflictMaxSubjectBytes)
		if body = strings.TrimSpace(Sanitize(body)); body != "" {
			msg += "\n\n" + Truncate(body, conflictMaxBodyBytes)
		}
		msgs = append(msgs, msg)
	}
	return msgs, max(0, total-len(msgs)), nil
}

// markerRE finds conflict marker lines for git grep.
const (
	markerRE    = `^(<<<<<<<|>>>>>>>)( |$)`
	separatorRE = `^=======$`
)

// Resolution gathers, in the mirror, the facts checkResolution judges
// about target, the agent's resolution of head's conflict with base.
func (g *realGit) Resolution(ctx context.Context, wt Worktree, head, base, target string) (resolution, error) {
	r := resolution{Head: head, Base: base, Target: target}
	run := func(args ...string) (string, error) { return g.mirrorGit(ctx, wt.Mirror, "", args...) }
	lines := func(out string) []string { return strings.Fields(out) }
	paths := func(out string) []string {
		if out == "" {
			return nil
		}
		return strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	}
	out, err := run("rev-list", "--parents", "--max-count=1", target)
	if err != nil {
		return r, err
	}
	if f := lines(out); len(f) > 0 {
		r.Parents = f[1:]
	}
	if out, err = run("rev-list", target, "^"+head, "^"+base); err != nil {
		return r, err
	}
	r.New = lines(out)
	mb, err := g.MergeBase(ctx, wt, head, base)
	if err != nil {
		return r, err
	}
	diff := func(a, b string, pathspec ...string) ([]string, error) {
		out, err := run(append([]string{"diff", "--name-only", "--no-renames", "-z", a, b, "--"}, pathspec...)...)
		return paths(out), err
	}
	if r.Ours, err = diff(mb, head); err != nil {
		return r, err
	}
	if r.Theirs, err = diff(mb, base); err != nil {
		return r, err
	}
	if r.Changed, err = diff(mb, target); err != nil {
		return r, err
	}
	if r.Conflicted, err = g.Conflicts(ctx, wt, head, base); err != nil {
		return r, err
	}
	grep := func(re string) ([]string, error) {
		out, err := run("grep", "-I", "-l", "-z", "-E", "-e", re, target, "--")
		if err != nil && gitx.ExitCode(err) == 1 {
			return nil, nil // no match
		}
		var files []string
		for _, f := range paths(out) {
			files = append(files, strings.TrimPrefix(f, target+":"))
		}
		return files, err
	}
	if r.MarkerFiles, err = grep(markerRE); err != nil {
		return r, err
	}
	if r.SeparatorFiles, err = grep(separatorRE); err != nil {
		return r, err
	}
	fromHead, err := diff(head, target, ".github/workflows")
	if err != nil {
		return r, err
	}
	fromBase, err := diff(base, target, ".github/workflows")
	if err != nil {
		return r, err
	}
	for _, f := range fromHead {
		if slices.Contains(fromBase, f) {
			r.Workflows = append(r.Workflows, f)
		}
	}
	return r, nil
}
