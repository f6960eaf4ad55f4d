package poller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	gh "github.com/google/go-github/v66/github"
	"golang.org/x/time/rate"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/prstatus"
)

// StatusGitHub is the part of the GitHub client the status writer uses.
type StatusGitHub interface {
	CreateStatus(ctx context.Context, repo ghref.Repo, sha string, in github.StatusInput) (*gh.RepoStatus, error)
	GetCombinedStatus(ctx context.Context, repo ghref.Repo, ref string) (*gh.CombinedStatus, error)
}

var _ StatusGitHub = (*github.Client)(nil)

// checkRunGitHub is the part of the GitHub client a check-run sink uses;
// a client that is a GitHub App (IsApp) writes check runs, since GitHub
// lets only Apps write them.
type checkRunGitHub interface {
	IsApp() bool
	CreateCheckRun(ctx context.Context, repo ghref.Repo, in github.CheckRunInput) (*gh.CheckRun, error)
	UpdateCheckRun(ctx context.Context, repo ghref.Repo, id int64, in github.CheckRunInput) (*gh.CheckRun, error)
	FindCheckRun(ctx context.Context, repo ghref.Repo, ref, name string) (*gh.CheckRun, error)
}

var _ checkRunGitHub = (*github.Client)(nil)

// Status write limits: GitHub allows 80 content-creating requests a minute
// per token. A burst of statusBurst and a refill of statusPerMinute keep
// any sliding minute within statusBurst+statusPerMinute = 80.
const (
	statusBurst     = 10
	statusPerMinute = 70
)

// recentMerge is how long after its merge a PR's final line is still
// checked at start: a writer that was down when the PR merged writes it.
const recentMerge = 24 * time.Hour

// StatusOptions configure a StatusWriter.
type StatusOptions struct {
	// Context is PRLOOP_STATUS_CONTEXT; Coalesce PRLOOP_STATUS_COALESCE.
	Context  string
	Coalesce time.Duration
	// DryRun logs each status instead of writing it.
	DryRun bool
	// Line are the settings the line names.
	Line prstatus.Options
	// Owns, when set, limits writing to the repositories this replica
	// polls, so that replicas do not each write the same status.
	Owns func(ghref.Repo) bool
	// OnWrite, when set, is called after each status written (or logged,
	// in a dry run): the demo prints them.
	OnWrite func(pr ghref.PR, sha string, l prstatus.Line)
}

// StatusWriter writes prloop's commit status on the head of every watched
// PR: the line prstatus renders from the event stream. With a client that
// is a GitHub App it writes a check run of that name instead (see
// checkRunSink).
//
// It follows the stream with a prstatus.Follower (an ordered consumer from
// the stream's start) rather than a durable consumer: the line is a pure
// function of the stream, so at-least-once delivery buys nothing. After a
// restart the follower re-reads the stream and the writer compares each
// line with what GitHub shows before writing, so a restart rewrites
// nothing that did not change. Writes are coalesced per PR (the first
// change opens a window of Coalesce; the line written is the latest) and
// rate-limited per token; a write that waits for the limiter writes the
// line current when it may go.
type StatusWriter struct {
	opts   StatusOptions
	sink   statusSink
	js     prstatus.Stream
	log    *slog.Logger
	follow *prstatus.Follower
	limit  *rate.Limiter

	mu      sync.Mutex
	caught  bool
	pending map[string]ghref.PR // waiting out their coalescing window
	ready   map[string]ghref.PR // due for a flush
	wake    chan struct{}
	onWrite func(pr ghref.PR, sha string, l prstatus.Line)
	// last is what prloop last wrote (or found on GitHub) per PR and head.
	last map[string]written
}

type written struct {
	head string
	line prstatus.Line
}

// NewStatusWriter returns a writer following js and writing with client.
func NewStatusWriter(opts StatusOptions, client StatusGitHub, js prstatus.Stream, log *slog.Logger) *StatusWriter {
	if opts.Context == "" {
		opts.Context = "prloop"
	}
	var sink statusSink = &commitStatusSink{gh: client, context: opts.Context}
	if app, ok := client.(checkRunGitHub); ok && app.IsApp() {
		sink = newCheckRunSink(app, opts.Context)
	}
	w := &StatusWriter{
		opts: opts, sink: sink, js: js, log: log,
		follow:  prstatus.NewFollower(log),
		limit:   rate.NewLimiter(rate.Every(time.Minute/statusPerMinute), statusBurst),
		pending: map[string]ghref.PR{}, ready: map[string]ghref.PR{},
		wake: make(chan struct{}, 1), last: map[string]written{},
	}
	w.follow.OnApply = w.changed
	w.onWrite = opts.OnWrite
	return w
}

// SetOnWrite replaces StatusOptions.OnWrite, also while the writer runs.
func (w *StatusWriter) SetOnWrite(fn func(pr ghref.PR, sha string, l prstatus.Line)) {
	w.mu.Lock()
	w.onWrite = fn
	w.mu.Unlock()
}

// Follower is the board the writer keeps current.
func (w *StatusWriter) Follower() *prstatus.Follower { return w.follow }

// Run follows the stream and writes until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- w.follow.Run(ctx, w.js) }()
	select {
	case <-w.follow.CaughtUp():
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
	w.catchUp()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-w.wake:
		}
		for _, pr := range w.due() {
			if err := w.flush(ctx, pr); err != nil && ctx.Err() == nil {
				w.log.Warn("cannot write prloop's "+w.sink.kind(), "pr", pr.String(), "err", err)
			}
		}
	}
}

// changed is the follower's OnApply: before the follower caught up, the
// stream's history is only folded; afterwards each change opens (or joins)
// the PR's coalescing window.
func (w *StatusWriter) changed(pr ghref.PR) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := pr.Key()
	if !w.caught {
		return
	}
	if _, ok := w.pending[key]; ok {
		return
	}
	if _, ok := w.ready[key]; ok {
		return
	}
	w.pending[key] = pr
	time.AfterFunc(w.opts.Coalesce, func() {
		w.mu.Lock()
		delete(w.pending, key)
		w.ready[key] = pr
		w.mu.Unlock()
		w.signal()
	})
}

// catchUp makes every open PR on the board, and every recently merged
// one, due: each is compared with GitHub and written only if it differs.
func (w *StatusWriter) catchUp() {
	var prs []ghref.PR
	w.follow.View(func(b *prstatus.Board) {
		for _, p := range b.PRs() {
			if !p.Closed || (p.Merged && time.Since(p.LastAt) < recentMerge) {
				prs = append(prs, p.PR)
			}
		}
	})
	w.mu.Lock()
	w.caught = true
	for _, pr := range prs {
		w.ready[pr.Key()] = pr
	}
	w.mu.Unlock()
	w.signal()
}

func (w *StatusWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *StatusWriter) due() []ghref.PR {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]ghref.PR, 0, len(w.ready))
	for k, pr := range w.ready {
		out = append(out, pr)
		delete(w.ready, k)
	}
	return out
}

// current is the PR's head and line, and whether a status belongs there:
// not for a PR closed without merging, nor before a head is known.
func (w *StatusWriter) current(pr ghref.PR) (string, prstatus.Line, bool) {
	var head string
	var l prstatus.Line
	ok := false
	w.follow.View(func(b *prstatus.Board) {
		p := b.Get(pr)
		if p == nil || p.Head == "" || (p.Closed && !p.Merged) {
			return
		}
		head, l, ok = p.Head, b.Line(pr, w.opts.Line), true
	})
	return head, l, ok
}

// flush writes the PR's line on its head unless it is what prloop last
// wrote there, or (first time for this head) what GitHub already shows.
func (w *StatusWriter) flush(ctx context.Context, pr ghref.PR) error {
	if w.opts.Owns != nil && !w.opts.Owns(pr.RepoRef()) {
		return nil
	}
	key := pr.Key()
	head, l, ok := w.current(pr)
	if !ok {
		w.forget(key)
		return nil
	}
	w.mu.Lock()
	last, known := w.last[key]
	w.mu.Unlock()
	if known && last.head == head && last.line == l {
		return nil
	}
	if !known || last.head != head {
		shown, err := w.sink.shown(ctx, pr, head)
		if err != nil {
			return err
		}
		if shown == l {
			w.remember(pr, head, l)
			return nil
		}
	}
	if err := w.limit.Wait(ctx); err != nil {
		return err
	}
	// The latest line wins: the wait may have outlived the one read above.
	if head, l, ok = w.current(pr); !ok {
		w.forget(key)
		return nil
	}
	if w.opts.DryRun {
		w.log.Info("dry run: would write prloop's "+w.sink.kind(), "pr", pr.String(), "head", head, "state", l.State, "description", l.Text)
	} else if err := w.sink.write(ctx, pr, head, l); err != nil {
		return fmt.Errorf("write the %s of %s: %w", w.sink.kind(), pr, err)
	}
	w.remember(pr, head, l)
	w.mu.Lock()
	onWrite := w.onWrite
	w.mu.Unlock()
	if onWrite != nil {
		onWrite(pr, head, l)
	}
	return nil
}

// remember keeps the line on the PR's head, but of a merged PR nothing:
// its line is final, and a late event about it compares with GitHub first
// and writes nothing.
func (w *StatusWriter) remember(pr ghref.PR, head string, l prstatus.Line) {
	if w.merged(pr) {
		w.forget(pr.Key())
		return
	}
	w.mu.Lock()
	w.last[pr.Key()] = written{head: head, line: l}
	w.mu.Unlock()
}

// merged reports whether the board says the PR was merged.
func (w *StatusWriter) merged(pr ghref.PR) bool {
	m := false
	w.follow.View(func(b *prstatus.Board) {
		if p := b.Get(pr); p != nil {
			m = p.Merged
		}
	})
	return m
}

// forget drops what the writer keeps of a PR that is done.
func (w *StatusWriter) forget(key string) {
	w.mu.Lock()
	delete(w.last, key)
	w.mu.Unlock()
}

// statusSink is where the writer puts a PR's line: a commit status, or,
// for a GitHub App, a check run.
type statusSink interface {
	// kind names what is written, for logs.
	kind() string
	// shown is prloop's line on head as GitHub shows it (zero when none).
	shown(ctx context.Context, pr ghref.PR, head string) (prstatus.Line, error)
	// write puts l on pr's head.
	write(ctx context.Context, pr ghref.PR, head string, l prstatus.Line) error
}

// commitStatusSink writes the line as the commit status named context.
type commitStatusSink struct {
	gh      StatusGitHub
	context string
}

var _ statusSink = (*commitStatusSink)(nil)

func (s *commitStatusSink) kind() string { return "commit status" }

func (s *commitStatusSink) shown(ctx context.Context, pr ghref.PR, head string) (prstatus.Line, error) {
	cs, err := s.gh.GetCombinedStatus(ctx, pr.RepoRef(), head)
	if err != nil {
		return prstatus.Line{}, err
	}
	for _, st := range cs.Statuses {
		if st.GetContext() == s.context {
			return prstatus.Line{State: prstatus.State(st.GetState()), Text: st.GetDescription()}, nil
		}
	}
	return prstatus.Line{}, nil
}

func (s *commitStatusSink) write(ctx context.Context, pr ghref.PR, head string, l prstatus.Line) error {
	_, err := s.gh.CreateStatus(ctx, pr.RepoRef(), head, github.StatusInput{State: string(l.State), Description: l.Text, Context: s.context})
	return err
}

// checkRunSink writes the line as the check run named name: one run per
// head, created once and then updated. A run GitHub completed is not
// reopened (GitHub does not take a completed run back to in_progress), so
// the line after a completed one is a new run on the head; GitHub shows
// the latest run of a name.
type checkRunSink struct {
	gh   checkRunGitHub
	name string

	mu sync.Mutex
	// runs is prloop's latest run on each PR's head, as last read or
	// written; one entry per PR, like the writer's own memory.
	runs map[string]knownRun
}

// knownRun is prloop's run on head (nil: none).
type knownRun struct {
	head string
	run  *gh.CheckRun
}

var _ statusSink = (*checkRunSink)(nil)

func newCheckRunSink(client checkRunGitHub, name string) *checkRunSink {
	return &checkRunSink{gh: client, name: name, runs: map[string]knownRun{}}
}

func (s *checkRunSink) kind() string { return "check run" }

func (s *checkRunSink) shown(ctx context.Context, pr ghref.PR, head string) (prstatus.Line, error) {
	cr, err := s.lookup(ctx, pr, head)
	if err != nil {
		return prstatus.Line{}, err
	}
	return lineOfCheckRun(cr), nil
}

// lookup finds prloop's run on head: from what this sink last read or
// wrote there, else from GitHub.
func (s *checkRunSink) lookup(ctx context.Context, pr ghref.PR, head string) (*gh.CheckRun, error) {
	s.mu.Lock()
	k, ok := s.runs[pr.Key()]
	s.mu.Unlock()
	if ok && k.head == head {
		return k.run, nil
	}
	cr, err := s.gh.FindCheckRun(ctx, pr.RepoRef(), head, s.name)
	if err != nil {
		return nil, err
	}
	s.remember(pr, head, cr)
	return cr, nil
}

func (s *checkRunSink) remember(pr ghref.PR, head string, cr *gh.CheckRun) {
	s.mu.Lock()
	s.runs[pr.Key()] = knownRun{head: head, run: cr}
	s.mu.Unlock()
}

func (s *checkRunSink) write(ctx context.Context, pr ghref.PR, head string, l prstatus.Line) error {
	repo := pr.RepoRef()
	cur, err := s.lookup(ctx, pr, head)
	if err != nil {
		return err
	}
	in := checkRunOf(pr, l)
	var cr *gh.CheckRun
	if cur != nil && cur.GetStatus() != github.CheckCompleted {
		cr, err = s.gh.UpdateCheckRun(ctx, repo, cur.GetID(), in)
	} else {
		in.Name, in.HeadSHA = s.name, head
		cr, err = s.gh.CreateCheckRun(ctx, repo, in)
	}
	if err != nil {
		// The run may or may not have changed (a create is not retried):
		// look it up again before the next write.
		s.mu.Lock()
		delete(s.runs, pr.Key())
		s.mu.Unlock()
		return err
	}
	s.remember(pr, head, cr)
	return nil
}

// checkRunOf is the check run showing l: pending is in_progress, success
// completed/success, and error (a human is needed) completed with
// action_required. The title is the line; the summary says in a sentence
// where the PR stands.
func checkRunOf(pr ghref.PR, l prstatus.Line) github.CheckRunInput {
	in := github.CheckRunInput{Output: &github.CheckRunOutput{Title: l.Text}}
	var summary string
	switch l.State {
	case prstatus.Success:
		in.Status, in.Conclusion = github.CheckCompleted, github.CheckSuccess
		summary = "prloop has nothing left to wait for on %s."
	case prstatus.Error:
		in.Status, in.Conclusion = github.CheckCompleted, github.CheckActionRequired
		summary = "prloop has stopped on %s: a human is needed."
	default:
		in.Status = github.CheckInProgress
		summary = "prloop is working on %s or waiting for it."
	}
	in.Output.Summary = fmt.Sprintf(summary, pr)
	return in
}

// lineOfCheckRun is the line a check run shows (zero for none): the
// inverse of checkRunOf, so that a restart finds the line it would write.
func lineOfCheckRun(cr *gh.CheckRun) prstatus.Line {
	if cr == nil {
		return prstatus.Line{}
	}
	l := prstatus.Line{Text: cr.GetOutput().GetTitle()}
	switch {
	case cr.GetStatus() != github.CheckCompleted:
		l.State = prstatus.Pending
	case cr.GetConclusion() == github.CheckSuccess:
		l.State = prstatus.Success
	case cr.GetConclusion() == github.CheckActionRequired:
		l.State = prstatus.Error
	default:
		l.State = prstatus.State(cr.GetConclusion()) // not prloop's: rewritten
	}
	return l
}
