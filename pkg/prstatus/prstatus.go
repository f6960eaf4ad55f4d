// Package prstatus says in one line where a PR stands and what it waits
// for: the line prloop writes as its commit status on the PR's head, prints
// in `prloop status` and `prloop explain`, and shows on its web page.
//
// The line is a pure function of the event stream. A Board folds events,
// in stream order, into what they say about each PR and about each base
// branch's merge queue (Apply), and Line renders one PR. Nothing here reads
// GitHub or a service's records: a writer of the line gets the same answer
// from the same events, after any crash, on any replica.
package prstatus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
)

// State is the commit status state the line goes with.
type State string

// States: pending while prloop works or waits, success when the PR is
// merged or approved with nothing left to wait for, error only when a human
// is needed. failure is never used: prloop's status must not read as a
// failed check of the PR's code.
const (
	Pending State = "pending"
	Success State = "success"
	Error   State = "error"
)

// Line is where a PR stands, as a commit status: State and a one-line
// description (GitHub keeps 140 characters of it).
type Line struct {
	State State  `json:"state"`
	Text  string `json:"text"`
}

// MaxText is the length GitHub keeps of a commit status description.
const MaxText = 140

// Options are the settings the line names.
type Options struct {
	// MaxFixCycles is PRLOOP_MAX_FIX_CYCLES ("cycle 1 of 2"); 0 leaves the
	// "of" out.
	MaxFixCycles int
	// Label is the escalation label (PRLOOP_ESCALATION_LABEL).
	Label string
}

// PR is what the events say about one pull request.
type PR struct {
	PR   ghref.PR `json:"pr"`
	Head string   `json:"head_sha,omitempty"`
	// Title is the PR's title from the latest event that carried one:
	// the author's text, to be shown escaped.
	Title string `json:"title,omitempty"`
	// Status is the last review status the poller published.
	Status events.Status `json:"status,omitempty"`
	// Reviewing is who signalled "in review" (👀) on the head.
	Reviewing string `json:"reviewing,omitempty"`
	// RequestedBy are who asked for the changes being addressed.
	RequestedBy []string `json:"requested_by,omitempty"`
	// Approvers approved the head.
	Approvers []string `json:"approvers,omitempty"`
	// QuorumResponded and QuorumMissing are the quorum's bots that have and
	// have not responded on the head, while the quorum is incomplete.
	QuorumResponded []string `json:"quorum_responded,omitempty"`
	QuorumMissing   []string `json:"quorum_missing,omitempty"`
	// Ignored are quorum bots' findings on the head that request no
	// changes (set aside by the finding classifier).
	Ignored []events.IgnoredFinding `json:"ignored_findings,omitempty"`
	// FixCycle is the fix being made (Fixing) or the fixes pushed.
	FixCycle int  `json:"fix_cycle"`
	Fixing   bool `json:"fixing,omitempty"`
	// Base is the base branch of its merge queue, QueuedSeq its place in
	// line (the stream order of its PRMergeQueued), QueuedAt when it joined.
	Base      string    `json:"base,omitempty"`
	QueuedSeq uint64    `json:"queued_seq,omitempty"`
	QueuedAt  time.Time `json:"queued_at,omitempty"`
	// Waiting are the checks the merger waits for on the head, or on the
	// candidate it rides in.
	Waiting []string `json:"waiting,omitempty"`
	// QueueMode is its queue's mode from PRMergeQueued (speculative, or
	// empty for serial), and Batch the PRs the merger said were queued
	// ahead of it: in speculative mode it is tested together with them.
	QueueMode string `json:"queue_mode,omitempty"`
	Batch     []int  `json:"batch,omitempty"`
	// Priority says it carries the priority label (PRMergeQueued): it goes
	// ahead of the PRs without it; Spent that the merger updated its
	// branch while queued, so that it keeps its place ahead of them.
	Priority bool `json:"priority,omitempty"`
	Spent    bool `json:"spent,omitempty"`
	// QueueETA is what the merger's PRMergeQueued said of when it
	// merges; the board estimates again from where it stands (ETA).
	QueueETA *events.QueueETA `json:"queue_eta,omitempty"`
	// Candidate is the speculative queue's candidate commit it rides in,
	// from the latest PRMergeCandidate while it is queued.
	Candidate *Candidate `json:"candidate,omitempty"`
	// FailingChecks name the checks whose failure (PRChecksFailed) the
	// agent is fixing, until the feedback service answers or a new head.
	FailingChecks []string `json:"failing_checks,omitempty"`
	// Conflict is the merger's request that the agent resolve a conflict
	// with the base, until the agent's answer (a fix or an escalation) or
	// a new head.
	Conflict *Conflict `json:"conflict,omitempty"`
	// AgentWait is the feedback service's word that the agent's next run
	// waits (PRAgentWaiting), until the run starts, the change request is
	// answered or a new head.
	AgentWait *events.AgentWaiting `json:"agent_wait,omitempty"`
	// Escalation is why a human is needed, while one is; EscalationDetail
	// says more.
	Escalation       events.Reason `json:"escalation,omitempty"`
	EscalationDetail string        `json:"escalation_detail,omitempty"`
	// Hold is why the repository's policy holds the review verdict back
	// (the detail of the poller's pending status): an invalid
	// .github/prloop.yml on the base, or a change of that file waiting
	// for a human approval.
	Hold string `json:"policy_hold,omitempty"`
	// Warning is what of that file the operator's ceilings cut, from the
	// poller's latest review status.
	Warning string `json:"policy_warning,omitempty"`
	// MaxFixCycles is the PR's fix limit from its base's policy file, from
	// the poller's latest review status (nil: Options.MaxFixCycles).
	MaxFixCycles *int `json:"max_fix_cycles,omitempty"`
	// MergeSHA is prloop's merge commit; Merged and Closed are final.
	MergeSHA string `json:"merge_sha,omitempty"`
	Merged   bool   `json:"merged,omitempty"`
	Closed   bool   `json:"closed,omitempty"`
	// Runs are the agent's latest runs on the PR (runs.go), oldest first.
	Runs []Run `json:"agent_runs,omitempty"`
	// Last is the latest event about the PR, and when it happened.
	Last   events.Type `json:"last_event,omitempty"`
	LastAt time.Time   `json:"last_event_at,omitempty"`
}

// Queued reports whether the PR is in a merge queue.
func (p *PR) Queued() bool { return p.QueuedSeq > 0 }

// Speculative is the mode of a queue that tests PRs together on candidate
// commits (events.MergeQueued's Mode, PRLOOP_QUEUE_MODE); any other mode
// is serial.
const Speculative = "speculative"

// Candidate is the candidate commit of a speculative queue that a PR rides
// in, as PRMergeCandidate describes it: the base at BaseSHA with the PRs
// Ahead and then the PR merged in, pushed as Branch for CI.
type Candidate struct {
	// State is events.CandidateBuilt or events.CandidateInvalidated.
	State string `json:"state"`
	SHA   string `json:"sha"`
	// Branch and Detail come from the event cleaned (events.CleanTitle):
	// they end up in a commit status and on a terminal.
	Branch   string `json:"branch,omitempty"`
	BaseSHA  string `json:"base_sha,omitempty"`
	Position int    `json:"position"`
	Ahead    []int  `json:"ahead,omitempty"`
	Detail   string `json:"detail,omitempty"`
	// Checked says a PRMergeWaiting has named the checks the candidate
	// waits for (the PR's Waiting) since it was built: until then its CI
	// has only started, and an empty Waiting does not mean green.
	Checked bool `json:"checked,omitempty"`
	// Rerun says the candidate failed and its failed jobs are re-run once
	// (PRMergeCandidate "rerun") before the PR would be removed.
	Rerun bool `json:"rerun,omitempty"`
}

// Built reports whether the candidate stands (it was not invalidated).
func (c *Candidate) Built() bool { return c.State == events.CandidateBuilt }

// Progress says how far the candidate's CI is, given the checks it waits
// for: "CI running", "waiting for checks: ci/build, lint" or "checks
// passed, merging".
func (c *Candidate) Progress(waiting []string) string {
	switch {
	case c.Rerun && !c.Checked:
		return "failed; re-running its failed jobs once"
	case len(waiting) > 0:
		return "waiting for checks: " + strings.Join(waiting, ", ")
	case c.Checked:
		return "checks passed, merging"
	}
	return "CI running"
}

// Conflict is the merger's request that the agent resolve the PR's
// conflict with its base (PRConflictResolveRequested).
type Conflict struct {
	// Base is the base branch, BaseSHA its tip the head conflicts with;
	// Base and Detail are cleaned (events.CleanTitle).
	Base    string `json:"base"`
	BaseSHA string `json:"base_sha,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Board is what the events say about every PR and every merge queue.
type Board struct {
	prs map[string]*PR
	// freezes are the merge queues' freezes (queue.go), by repository and
	// base.
	freezes map[string]Freeze
	seq     uint64
	// Retention is how long a closed PR stays on the board after its last
	// event; default Retain. Without it the board would hold every PR the
	// stream ever named.
	Retention time.Duration
}

// Retain is how long a board keeps a closed PR by default.
const Retain = 7 * 24 * time.Hour

// pruneEvery is how many events a board applies between two sweeps for
// closed PRs past their retention.
const pruneEvery = 256

// NewBoard returns an empty board.
func NewBoard() *Board { return &Board{prs: map[string]*PR{}, Retention: Retain} }

// Get returns the PR's entry (nil when no event named it).
func (b *Board) Get(pr ghref.PR) *PR { return b.prs[pr.Key()] }

// PRs returns every PR on the board, in key order.
func (b *Board) PRs() []*PR {
	out := make([]*PR, 0, len(b.prs))
	for _, p := range b.prs {
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y *PR) int { return strings.Compare(x.PR.Key(), y.PR.Key()) })
	return out
}

func (b *Board) entry(pr ghref.PR) *PR {
	p := b.prs[pr.Key()]
	if p == nil {
		p = &PR{PR: pr}
		b.prs[pr.Key()] = p
	}
	return p
}

// Apply folds one event, at time at (the CloudEvent's time), into the
// board. Events must come in stream order.
func (b *Board) Apply(d events.Data, at time.Time) {
	b.apply(d, at)
}

// apply is Apply, reporting the PRs other than the event's own whose line
// the event changes (an event about a repository's queue).
func (b *Board) apply(d events.Data, at time.Time) []ghref.PR {
	if events.RepoLevel(d.EventType()) {
		// About a repository (number 0), not a PR: a queue's freeze, or
		// a PR yet to be opened, which PRCreated names.
		return b.applyRepo(d, at)
	}
	b.seq++
	if b.seq%pruneEvery == 0 {
		b.prune(at)
	}
	p := b.entry(d.Ref())
	p.Last, p.LastAt = d.EventType(), at
	if u := d.Ref().URL; u != "" {
		// The first event (a watch request) often has no URL; a later one
		// from the poller or the merger has the PR's html URL.
		p.PR.URL = u
	}
	if t, ok := d.(interface{ PRTitle() string }); ok && t.PRTitle() != "" {
		p.Title = t.PRTitle()
	}
	head := ""
	if h, ok := d.(interface{ Head() string }); ok {
		head = h.Head()
	}
	newHead := head != "" && head != p.Head
	if _, waiting := d.(*events.MergeWaiting); waiting && p.Candidate != nil && head == p.Candidate.SHA {
		// Checks the candidate waits for, should the merger name the
		// candidate as the head they are on: not a push to the PR.
		newHead = false
	}
	if _, own := d.(*events.BranchUpdated); own && newHead {
		// The merger brought the approved head up to date: the approval
		// carries over, the checks start again, and a candidate built
		// from the old head is gone.
		p.Head, p.Waiting, p.Candidate, newHead = head, nil, nil, false
		p.Spent = p.Queued() // it keeps its place ahead of a priority PR
	}
	if newHead {
		// A new head: nothing said about the old one holds, but a queue
		// place (the merger re-verifies and says so) and an escalation.
		// A candidate and a conflict were of the old head.
		p.Head, p.Reviewing, p.Approvers, p.Waiting = head, "", nil, nil
		p.QuorumResponded, p.QuorumMissing, p.Ignored = nil, nil, nil
		p.Candidate, p.Conflict, p.FailingChecks, p.AgentWait = nil, nil, nil, nil
	}
	review := func(s events.Status) {
		p.Status, p.Fixing, p.Escalation, p.EscalationDetail, p.Hold = s, false, "", "", ""
		if w, ok := d.(interface{ PolicyWarningOf() string }); ok {
			p.Warning = events.CleanTitle(w.PolicyWarningOf())
		}
		if m, ok := d.(interface{ MaxFixCyclesOf() *int }); ok {
			p.MaxFixCycles = m.MaxFixCyclesOf()
		}
	}
	p.addRun(d, at)
	switch e := d.(type) {
	case *events.WatchRequested, *events.Created:
		p.Closed, p.Merged = false, false
	case *events.ReviewPending:
		if !p.quorumAgain(e.Status) {
			review(e.Status)
			p.Approvers, p.Reviewing = nil, ""
			b.leaveQueue(p)
		}
		p.Hold = events.CleanTitle(e.Detail)
		p.QuorumResponded, p.QuorumMissing, p.Ignored = nil, slices.Clone(e.MissingReviewers), nil
	case *events.ReviewInProgress:
		if !p.quorumAgain(e.Status) {
			review(e.Status)
			b.leaveQueue(p)
		}
		p.Reviewing = e.Actor
		p.QuorumResponded, p.QuorumMissing = slices.Clone(e.QuorumResponded), slices.Clone(e.MissingReviewers)
		p.Ignored = slices.Clone(e.IgnoredFindings)
	case *events.FeedbackReceived:
		review(e.Status)
		p.QuorumResponded, p.QuorumMissing, p.Ignored = nil, nil, slices.Clone(e.IgnoredFindings)
		p.Fixing, p.FixCycle = true, e.FixCycle+1
		p.RequestedBy = slices.Clone(e.Reviewers)
		if len(p.RequestedBy) == 0 && e.Actor != "" {
			p.RequestedBy = []string{e.Actor}
		}
		b.leaveQueue(p)
	case *events.FeedbackAddressed:
		// Also the answer to a conflict resolution: a fix cycle.
		p.Fixing, p.FixCycle, p.Conflict, p.FailingChecks, p.AgentWait = false, e.FixCycle, nil, nil, nil
		p.Status = events.StatusPending
	case *events.FeedbackSkipped:
		p.Fixing, p.Conflict, p.FailingChecks, p.AgentWait = false, nil, nil, nil
	case *events.AgentWaiting:
		p.AgentWait = nil
		if e.State == events.AgentWaitStarted {
			w := *e
			p.AgentWait = &w
		}
	case *events.ChecksFailed:
		// The feedback service re-runs (it then answers PRFeedbackSkipped)
		// or hands the failure to the agent.
		p.FailingChecks = CheckNames(e.Checks)
		p.FixCycle = e.FixCycle + 1
	case *events.ReviewApproved:
		review(e.Status)
		p.QuorumResponded, p.QuorumMissing, p.Ignored = nil, nil, slices.Clone(e.IgnoredFindings)
		p.Approvers = slices.Clone(e.Approvers)
		if len(p.Approvers) == 0 && e.Actor != "" {
			p.Approvers = []string{e.Actor}
		}
	case *events.ReviewTimeout:
		p.Escalation, p.EscalationDetail = e.Reason, e.Detail
	case *events.MergeQueued:
		if !p.Queued() || p.Base != e.BaseBranch {
			// A new place in line: no candidate has been built for it.
			p.QueuedSeq, p.QueuedAt, p.Candidate = b.seq, at, nil
		}
		p.Base, p.Conflict = e.BaseBranch, nil
		p.QueueMode, p.Batch, p.Priority = e.Mode, slices.Clone(e.Ahead), e.Priority
		p.QueueETA = nil
		if e.ETA != nil {
			x := *e.ETA
			p.QueueETA = &x
		}
	case *events.MergeCandidate:
		if !p.Queued() {
			// A candidate given up after the PR left the queue (or one of
			// a queue this board never saw it join) says nothing of where
			// it stands now.
			break
		}
		if e.State == events.CandidateRerun && p.Candidate != nil && p.Candidate.SHA == e.Candidate {
			// The same candidate, failed, gets one more run: its checks
			// are to be named again.
			p.Candidate.Rerun, p.Candidate.Checked, p.Candidate.Detail = true, false, events.CleanTitle(e.Detail)
			p.Waiting = nil
			break
		}
		p.Candidate = &Candidate{
			State: e.State, SHA: e.Candidate, Branch: events.CleanTitle(e.Branch), BaseSHA: e.BaseSHA,
			Position: e.Position, Ahead: slices.Clone(e.Ahead), Detail: events.CleanTitle(e.Detail),
		}
		p.Waiting, p.QueueMode = nil, Speculative // the new candidate's checks are yet to be named
	case *events.MergeWaiting:
		p.Waiting = slices.Clone(e.Checks)
		if e.BaseBranch != "" {
			p.Base = e.BaseBranch
		}
		if p.Candidate != nil && p.Candidate.Built() {
			p.Candidate.Checked = true
		}
	case *events.Merged:
		p.Merged, p.MergeSHA, p.Conflict = true, e.MergeSHA, nil
		b.leaveQueue(p)
	case *events.MergeFailed:
		b.leaveQueue(p)
	case *events.Closed:
		p.Closed, p.Merged, p.Conflict = true, e.Merged || p.Merged, nil
		b.leaveQueue(p)
	case *events.EscalationRequested:
		// Also the answer to a conflict the agent could not resolve.
		p.Escalation, p.EscalationDetail, p.Fixing = e.Reason, firstNonEmpty(e.LastError, e.Detail), false
		p.Conflict, p.FailingChecks, p.AgentWait = nil, nil, nil
	case *events.Escalated:
		p.Escalation = e.Reason
	case *events.EscalationResolved:
		p.Escalation, p.EscalationDetail, p.FixCycle, p.Conflict = "", "", 0, nil
	case *events.ConflictResolveRequested:
		// The merger took the PR out of its queue and handed the conflict
		// to the agent (through the feedback service).
		b.leaveQueue(p)
		p.FixCycle = e.FixCycle + 1 // the resolution is a fix cycle
		p.Conflict = &Conflict{Base: events.CleanTitle(e.BaseBranch), BaseSHA: e.BaseSHA, Detail: events.CleanTitle(e.Detail)}
	}
	return nil
}

// prune drops the closed PRs whose last event is older than the
// retention at now (the event time being applied, so every replica folding
// the same stream keeps the same PRs).
func (b *Board) prune(now time.Time) {
	for k, p := range b.prs {
		if p.Closed && now.Sub(p.LastAt) > b.Retention {
			delete(b.prs, k)
		}
	}
}

// quorumAgain reports whether a status event only says that the quorum
// moved on (the poller publishes the same status again when another bot
// responds): what else the line says, such as an escalation, still holds.
func (p *PR) quorumAgain(s events.Status) bool {
	return s == p.Status && len(p.QuorumMissing) > 0
}

func (b *Board) leaveQueue(p *PR) {
	p.QueuedSeq, p.QueuedAt, p.Waiting, p.Priority, p.Spent = 0, time.Time{}, nil, false, false
	p.QueueMode, p.Batch, p.Candidate, p.QueueETA = "", nil, nil, nil
}

// Queue returns the merge queue of a repository's base branch, first in
// line first (queueOrder: the priority label goes ahead).
func (b *Board) Queue(repo ghref.Repo, base string) []*PR {
	var q []*PR
	for _, p := range b.prs {
		if p.Queued() && p.Base == base && p.PR.RepoRef().Key() == repo.Key() {
			q = append(q, p)
		}
	}
	queueOrder(q)
	return q
}

// Position is the PR's place in its merge queue (1 is next), 0 when it is
// not queued.
func (b *Board) Position(pr ghref.PR) int {
	p := b.Get(pr)
	if p == nil || !p.Queued() {
		return 0
	}
	for i, q := range b.Queue(pr.RepoRef(), p.Base) {
		if q == p {
			return i + 1
		}
	}
	return 0
}

// Batch returns the PRs a speculative queue tests pr together with: those
// the merger said were queued ahead of it (PRMergeQueued's Ahead), less
// those the board has seen leave that queue since. Nil in a serial queue.
func (b *Board) Batch(pr ghref.PR) []int {
	p := b.Get(pr)
	if p == nil || !p.Queued() || p.QueueMode != Speculative {
		return nil
	}
	var out []int
	for _, n := range p.Batch {
		// A PR the board does not know (its events are older than the
		// board) is taken on the merger's word.
		if q := b.Get(pr.RepoRef().PR(n)); q == nil || q.Queued() && q.Base == p.Base {
			out = append(out, n)
		}
	}
	return out
}

// Line says where pr stands. A PR no event named is "not watched".
func (b *Board) Line(pr ghref.PR, o Options) Line {
	p := b.Get(pr)
	if p == nil {
		return Line{Pending, "not watched by prloop"}
	}
	pos := b.Position(pr)
	prefix := ""
	if f, ok := b.Frozen(pr.RepoRef(), p.Base); ok && pos > 0 && !p.Merged && !p.Closed {
		// First, so that clipping keeps it: it is why nothing merges.
		prefix = f.Text() + " — "
	}
	l := line(p, pos, b.Batch(pr), b.ETA(pr), o, MaxText-len(prefix))
	if p.Warning != "" && !p.Merged && !p.Closed && p.Hold == "" {
		l.Text += " (" + p.Warning + ")"
	}
	if l.State == Pending {
		l.Text = prefix + l.Text
	}
	return clip(l)
}

// line renders p, pos-th in its merge queue (0: not queued), tested
// together with batch in a speculative queue, expected to merge as eta
// says (nil: the merger made no estimate), in room bytes where it can
// choose (a candidate's branch and the ETA are left out otherwise).
func line(p *PR, pos int, batch []int, eta *ETA, o Options, room int) Line {
	switch {
	case p.Merged && p.MergeSHA != "":
		return Line{Success, "merged as " + ghref.ShortSHA(p.MergeSHA)}
	case p.Merged:
		return Line{Success, "merged"}
	case p.Closed:
		return Line{Pending, "closed without merging"}
	case p.Escalation != "":
		text := "needs a human: " + strings.ReplaceAll(string(p.Escalation), "_", " ")
		if o.Label != "" {
			text += " (label " + o.Label + ")"
		}
		return Line{Error, text}
	case p.Hold == policy.NeedsHuman:
		return Line{Pending, p.Hold}
	case p.Hold != "":
		// The base's policy file is wrong: nothing is merged and no agent
		// runs until a person fixes it.
		return Line{Error, p.Hold}
	case p.AgentWait != nil:
		// Said before what the agent is asked to do: it is not doing it.
		return Line{Pending, p.AgentWait.Text()}
	case p.Conflict != nil:
		return Line{Pending, "conflicts with " + p.Conflict.Base + when(p.Conflict.BaseSHA != "", " at "+ghref.ShortSHA(p.Conflict.BaseSHA)) + " — agent resolving (" + cycle(p.FixCycle, p.FixLimit(o)) + ")"}
	case len(p.FailingChecks) > 0:
		return Line{Pending, "agent fixing failing checks: " + strings.Join(p.FailingChecks, ", ") + " (" + cycle(p.FixCycle, p.FixLimit(o)) + ")"}
	case p.Fixing:
		return Line{Pending, fmt.Sprintf("changes requested%s — agent fixing (%s)%s", by(p.RequestedBy), cycle(p.FixCycle, p.FixLimit(o)), SetAside(len(p.Ignored)))}
	case p.Status == events.StatusApproved && pos > 0 && p.Candidate != nil:
		return Line{Pending, eta.after(candidateLine(p, room), room)}
	case p.Status == events.StatusApproved && pos > 0 && len(p.Waiting) > 0:
		return Line{Pending, eta.after("approved"+by(p.Approvers)+" — waiting for checks: "+strings.Join(p.Waiting, ", "), room)}
	case p.Status == events.StatusApproved && pos > 0 && p.QueueMode == Speculative:
		// The merger's count of those ahead, not the board's: the board
		// may not have seen every PR ahead join the queue.
		return Line{Pending, eta.after(fmt.Sprintf("queued %s on %s", ordinal(len(batch)+1), p.Base)+when(p.Priority, " (priority)")+when(len(batch) > 0, ", tested together with "+Numbers(batch)), room)}
	case p.Status == events.StatusApproved && pos > 0:
		return Line{Pending, eta.after(fmt.Sprintf("approved%s — %s in the merge queue for %s", by(p.Approvers), ordinal(pos), p.Base)+when(p.Priority, " (priority)"), room)}
	case p.Status == events.StatusApproved:
		return Line{Success, "approved" + by(p.Approvers) + SetAside(len(p.Ignored))}
	case p.Status == events.StatusChangesRequested:
		return Line{Pending, "changes requested" + by(p.RequestedBy)}
	case len(p.QuorumMissing) > 0:
		text := QuorumProgress(p.QuorumResponded, p.QuorumMissing)
		if p.Reviewing != "" && !slices.Contains(p.QuorumResponded, p.Reviewing) {
			text = "👀 " + p.Reviewing + " is reviewing; " + text
		}
		return Line{Pending, text}
	case p.Reviewing != "":
		return Line{Pending, "👀 " + p.Reviewing + " is reviewing"}
	}
	return Line{Pending, "waiting for review"}
}

// candidateLine says which candidate a queued PR rides in and how far its
// CI is. The branch is left out when the line would be too long: the CI's
// progress is what the reader waits for, and explain names the branch.
func candidateLine(p *PR, room int) string {
	c := p.Candidate
	if !c.Built() {
		return fmt.Sprintf("in the merge queue of %s, candidate %s invalidated%s; a new one is being built",
			p.Base, ghref.ShortSHA(c.SHA), when(c.Detail != "", " ("+c.Detail+")"))
	}
	ride := fmt.Sprintf("in the merge queue of %s, rides in candidate %d", p.Base, c.Position) + when(len(c.Ahead) > 0, " (with "+Numbers(c.Ahead)+" ahead)")
	tail := " at " + ghref.ShortSHA(c.SHA) + ": " + c.Progress(p.Waiting)
	if text := ride + " on " + c.Branch + tail; c.Branch != "" && len(text) <= room {
		return text
	}
	return ride + tail
}

// Numbers lists PR numbers as people write them: "#41, #42".
func Numbers(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprintf("#%d", n)
	}
	return strings.Join(s, ", ")
}

// QuorumProgress says how far the quorum's bots are: "2 of 3 bot reviews:
// waiting for gemini".
func QuorumProgress(responded, missing []string) string {
	return fmt.Sprintf("%d of %d bot reviews: waiting for %s", len(responded), len(responded)+len(missing), strings.Join(missing, ", "))
}

// SetAside notes the n quorum bots' findings the classifier set aside:
// "; 2 bot findings set aside", or "" for none.
func SetAside(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "; 1 bot finding set aside"
	}
	return fmt.Sprintf("; %d bot findings set aside", n)
}

func by(logins []string) string {
	if len(logins) == 0 {
		return ""
	}
	return " by " + strings.Join(logins, ", ")
}

// FixLimit is the PR's fix limit: its base's policy's, or the
// operator's.
func (p *PR) FixLimit(o Options) int {
	if p.MaxFixCycles != nil {
		return *p.MaxFixCycles
	}
	return o.MaxFixCycles
}

func cycle(n, max int) string {
	if max > 0 {
		return fmt.Sprintf("cycle %d of %d", n, max)
	}
	return fmt.Sprintf("cycle %d", n)
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// clip keeps the text within what GitHub stores, on a rune boundary.
func clip(l Line) Line {
	if len(l.Text) <= MaxText {
		return l
	}
	r := []rune(l.Text)
	for len(string(r)) > MaxText-1 {
		r = r[:len(r)-1]
	}
	l.Text = string(r) + "…"
	for len(l.Text) > MaxText {
		r = r[:len(r)-1]
		l.Text = string(r) + "…"
	}
	return l
}

func when(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// Age is how long ago t was at now, in whole seconds, for people: never
// negative (prloop's clock may have been moved, or a replica's runs
// behind), and "" for a zero t.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return max(0, now.Sub(t)).Round(time.Second).String()
}

// CheckNames are the failing checks' names as a line shows them: cleaned
// (a check's name is whoever runs it's to choose), at most five.
func CheckNames(checks []events.FailedCheck) []string {
	var out []string
	for i, c := range checks {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(checks)-i))
			break
		}
		out = append(out, events.CleanTitle(c.Name))
	}
	return out
}
