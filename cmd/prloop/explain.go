package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/eta"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/logging"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/escalator"
)

// explanation is everything `prloop explain` says about one PR.
type explanation struct {
	PR ghref.PR `json:"pr"`
	// History is the PR's events, oldest first.
	History []historyEntry `json:"history"`
	// Line is where it stands, as prloop's commit status says it.
	Line prstatus.Line `json:"line"`
	// LastEvent is its latest event and LastEventAt when it happened (the
	// age status and the page show), absent when no event named it.
	LastEvent   events.Type `json:"last_event,omitempty"`
	LastEventAt time.Time   `json:"last_event_at,omitzero"`
	// GitHub is what GitHub says now; GitHubSkipped says why it was not
	// asked, or what went wrong asking.
	GitHub        *liveState `json:"github,omitempty"`
	GitHubSkipped string     `json:"github_skipped,omitempty"`
	// Records is what prloop's state and events hold (nil when prloop has
	// no state record of the PR).
	Records *records `json:"records,omitempty"`
	// Next is the one action that would unblock the PR.
	Next string `json:"next"`
	// Policy is the effective policy of the PR's base and where each
	// value came from (policycmd.go); PolicySkipped says why it is not.
	Policy        *policyJSON `json:"policy,omitempty"`
	PolicySkipped string      `json:"policy_skipped,omitempty"`
}

// historyEntry is one event about the PR.
type historyEntry struct {
	Time   time.Time   `json:"time"`
	Type   events.Type `json:"type"`
	Head   string      `json:"head_sha,omitempty"`
	Who    []string    `json:"who,omitempty"`
	Detail string      `json:"detail"`
}

// liveState is the PR on GitHub now.
type liveState struct {
	State          string   `json:"state"`
	Draft          bool     `json:"draft,omitempty"`
	Head           string   `json:"head_sha"`
	Base           string   `json:"base"`
	MergeableState string   `json:"mergeable_state"`
	Label          string   `json:"label"`
	LabelPresent   bool     `json:"label_present"`
	ChecksPending  []string `json:"checks_pending"`
	ChecksFailed   []string `json:"checks_failed"`
}

// records is what prloop holds about the PR.
type records struct {
	Verdict events.Status `json:"review_verdict"`
	// Reviewers are whose review signals count (PRLOOP_REVIEWERS); empty
	// means anyone with write permission. The author never counts.
	Reviewers        []string `json:"reviewers"`
	MissingReviewers []string `json:"missing_reviewers,omitempty"`
	// IgnoredFindings are quorum bots' findings on the head that the
	// finding classifier set aside: they request no changes.
	IgnoredFindings []events.IgnoredFinding `json:"ignored_findings,omitempty"`
	Author          string                  `json:"author,omitempty"`
	Approvers       []string                `json:"approvers,omitempty"`
	FixCyclesUsed   int                     `json:"fix_cycles_used"`
	MaxFixCycles    int                     `json:"max_fix_cycles"`
	// FixLimitFromFile says MaxFixCycles is the base's policy file's
	// (feedback.max_fix_cycles), not PRLOOP_MAX_FIX_CYCLES.
	FixLimitFromFile bool `json:"max_fix_cycles_from_file,omitempty"`
	// Queue is its place in its base branch's merge queue, nil when it is
	// not queued.
	Queue *queueSpot `json:"queue,omitempty"`
	// Conflict is the merger's request that the agent resolve a conflict
	// with the base, while the agent works on it.
	Conflict *prstatus.Conflict `json:"conflict,omitempty"`
	// FailingChecks are the checks the agent is making pass
	// (PRChecksFailed), and FlakyPasses the heads whose failing checks
	// passed on a re-run (the poller's count).
	FailingChecks []string `json:"failing_checks,omitempty"`
	FlakyPasses   int      `json:"flaky_passes,omitempty"`
	// Escalation is why a human is needed now, nil when none is.
	Escalation *escalation `json:"escalation,omitempty"`
	// Escalated are the escalations the escalator recorded, and when.
	Escalated map[events.Reason]time.Time `json:"escalated,omitempty"`
}

// queueSpot is a PR's place in a merge queue.
type queueSpot struct {
	Base     string     `json:"base"`
	Position int        `json:"position"`
	Ahead    []ghref.PR `json:"ahead"`
	Waiting  []string   `json:"waiting_for_checks,omitempty"`
	// Mode is the queue's mode, prstatus.Speculative or empty (serial).
	Mode string `json:"mode,omitempty"`
	// Batch are the PRs ahead that a speculative queue tests it together
	// with (prstatus.Board.Batch).
	Batch []int `json:"batch,omitempty"`
	// Candidate is the speculative queue's candidate it rides in, nil
	// before one is built.
	Candidate *prstatus.Candidate `json:"candidate,omitempty"`
	// ETA is when it is expected to merge (prstatus.Board.ETA), nil when
	// the merger made no estimate.
	ETA *prstatus.ETA `json:"eta,omitempty"`
}

// escalation is a current escalation, in the escalator's words.
type escalation struct {
	Reason events.Reason `json:"reason"`
	Title  string        `json:"title"`
	Why    string        `json:"why"`
	Detail string        `json:"detail,omitempty"`
	// Clear are the ways to clear it, the escalation comment's next steps.
	Clear []string `json:"clear"`
}

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the explanation as one JSON object")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: prloop explain [-json] owner/repo#N

Says why a PR is not merged yet: its history from prloop's events, where it
stands, what blocks it (live from GitHub when a token is available:
GITHUB_TOKEN, GH_TOKEN or 'gh auth token'; and from prloop's records in
NATS at $PRLOOP_NATS_URL, default %s), and the next action that would
unblock it. Accepts owner/repo#N or a PR URL.

`, defaultNATSURL)
		fs.PrintDefaults()
	}
	pr, err := parsePRArg(fs, args)
	if err != nil {
		return err
	}
	settings, err := loadCLISettings()
	if err != nil {
		return err
	}
	conn, err := connectCLI(ctx)
	if err != nil {
		if pr.Owner == ghsim.DemoOwner {
			err = fmt.Errorf("%w; the demo's NATS stops when 'prloop demo' exits: run 'prloop demo -keep' and use the explain command it prints", err)
		}
		return err
	}
	defer conn.Close(context.Background())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	follower, err := followBoard(ctx, conn.JS, stderr, nil)
	if err != nil {
		return withCredsHint(err, conn)
	}
	x := explanation{PR: pr}
	if x.History, err = prHistory(ctx, conn.JS, pr); err != nil {
		return withCredsHint(err, conn)
	}
	var rec *state.PR
	if kv, err := conn.JS.KeyValue(ctx, state.Bucket); err == nil {
		if r, _, err := state.NewStore(kv).Get(ctx, pr); err == nil {
			rec = &r
		} else if !errors.Is(err, state.ErrNotFound) {
			return err
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return withCredsHint(fmt.Errorf("open state bucket: %w", err), conn)
	}
	x.GitHub, x.GitHubSkipped = readLive(ctx, pr, settings.Label, settings.StatusContext)
	x.Policy, x.PolicySkipped = explainPolicy(ctx, pr, x.GitHub)
	follower.View(func(b *prstatus.Board) {
		row, _ := b.Row(pr, settings.lineOptions())
		x.Line, x.LastEvent, x.LastEventAt = row.Line, row.Last, row.LastAt
		x.Records = recordsOf(b, pr, rec, settings)
		x.Next = nextStep(b.Get(pr), x, settings)
	})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(x)
	}
	return printExplanation(stdout, x, time.Now())
}

// prHistory reads the PR's events from the stream, oldest first.
func prHistory(ctx context.Context, js jetstream.JetStream, pr ghref.PR) ([]historyEntry, error) {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.PRFilter(pr)}})
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", pr, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", pr, err)
	}
	out := []historyEntry{}
	for pending := info.NumPending; pending > 0; {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read the events of %s: %w", pr, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("read the events of %s: %w", pr, err)
		}
		pending = md.NumPending
		ce, d, err := events.Decode(msg.Data())
		if err != nil {
			out = append(out, historyEntry{Detail: fmt.Sprintf("(malformed message on %s: %v)", msg.Subject(), err)})
			continue
		}
		h := historyEntry{Time: ce.Time(), Type: d.EventType(), Detail: describe(d), Who: whoOf(d)}
		if hd, ok := d.(interface{ Head() string }); ok {
			h.Head = hd.Head()
		}
		out = append(out, h)
	}
	return out, nil
}

// whoOf names the people and services an event names: its actor,
// approvers, reviewers and missing reviewers, whatever its type.
func whoOf(d events.Data) []string {
	var who struct {
		Actor     string   `json:"actor"`
		Approvers []string `json:"approvers"`
		Reviewers []string `json:"reviewers"`
		Missing   []string `json:"missing_reviewers"`
	}
	b, err := json.Marshal(d)
	if err != nil || json.Unmarshal(b, &who) != nil {
		return nil
	}
	var out []string
	for _, w := range slices.Concat([]string{who.Actor}, who.Approvers, who.Reviewers) {
		if w != "" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	for _, m := range who.Missing {
		out = append(out, "missing "+m)
	}
	return out
}

// readLive asks GitHub where the PR stands, or says why it did not. own is
// prloop's own status context and check run name: never a check the PR
// waits for.
func readLive(ctx context.Context, pr ghref.PR, label, own string) (*liveState, string) {
	c, err := cliGitHub(ctx)
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := c.GetPull(ctx, pr)
	if err != nil {
		return nil, err.Error()
	}
	live := &liveState{State: p.GetState(), Draft: p.GetDraft(), Head: p.GetHead().GetSHA(), Base: p.GetBase().GetRef(),
		MergeableState: p.GetMergeableState(), Label: label, ChecksPending: []string{}, ChecksFailed: []string{}}
	if p.GetMerged() {
		live.State = "merged"
	}
	for _, l := range p.Labels {
		live.LabelPresent = live.LabelPresent || strings.EqualFold(l.GetName(), label)
	}
	st, err := c.GetCombinedStatus(ctx, pr.RepoRef(), live.Head)
	if err != nil {
		return live, err.Error()
	}
	for _, s := range st.Statuses {
		if s.GetContext() == own {
			continue
		}
		switch s.GetState() {
		case "pending":
			live.ChecksPending = append(live.ChecksPending, s.GetContext())
		case "failure", "error":
			live.ChecksFailed = append(live.ChecksFailed, s.GetContext())
		}
	}
	runs, err := c.ListCheckRuns(ctx, pr.RepoRef(), live.Head)
	if err != nil {
		return live, err.Error()
	}
	for _, r := range runs {
		switch {
		case r.GetName() == own:
		case r.GetStatus() != "completed":
			live.ChecksPending = append(live.ChecksPending, r.GetName())
		case slices.Contains([]string{"failure", "timed_out", "cancelled", "action_required", "startup_failure"}, r.GetConclusion()):
			live.ChecksFailed = append(live.ChecksFailed, r.GetName())
		}
	}
	return live, ""
}

// errNoToken says the operator's commands found no GitHub credentials.
var errNoToken = errors.New("no GitHub token (set GITHUB_TOKEN or GH_TOKEN, or log in with 'gh auth login')")

// cliGitHub is the operator commands' GitHub client: GitHub App auth when
// configured, else the token of GITHUB_TOKEN, GH_TOKEN or 'gh auth token'.
func cliGitHub(ctx context.Context) (*github.Client, error) {
	cfg, err := github.LoadConfig()
	if err != nil {
		return nil, err
	}
	if !cfg.UsesApp() {
		tok, _, err := github.ResolveToken(ctx)
		if err != nil {
			return nil, errNoToken
		}
		cfg.Token = tok
	}
	return github.New(ctx, cfg, github.Options{Logger: logging.New(io.Discard, "error", "text"), MaxRateLimitWaits: 1})
}

// recordsOf gathers what prloop holds about pr: its state record (nil when
// there is none) and the board.
func recordsOf(b *prstatus.Board, pr ghref.PR, rec *state.PR, s cliSettings) *records {
	p := b.Get(pr)
	if p == nil && rec == nil {
		return nil
	}
	r := &records{Reviewers: s.Reviewers, MaxFixCycles: s.MaxFixCycles}
	if r.Reviewers == nil {
		r.Reviewers = []string{}
	}
	if rec != nil {
		r.Verdict, r.MissingReviewers, r.Author, r.FixCyclesUsed, r.Escalated = rec.Status, rec.MissingReviewers, rec.Author, rec.FixCycle, rec.Escalations
		r.FlakyPasses = rec.Checks.FlakyPasses
	}
	if p == nil {
		return r
	}
	if p.Status != "" {
		r.Verdict = p.Status
	}
	r.Approvers, r.FixCyclesUsed, r.IgnoredFindings = p.Approvers, max(r.FixCyclesUsed, p.FixCycle), p.Ignored
	r.FailingChecks = p.FailingChecks
	r.MaxFixCycles, r.FixLimitFromFile = p.FixLimit(prstatus.Options{MaxFixCycles: s.MaxFixCycles}), p.MaxFixCycles != nil
	if pos := b.Position(pr); pos > 0 {
		q := &queueSpot{Base: p.Base, Position: pos, Ahead: []ghref.PR{}, Waiting: p.Waiting, Mode: p.QueueMode, Batch: b.Batch(pr), Candidate: p.Candidate, ETA: b.ETA(pr)}
		for _, a := range b.Queue(pr.RepoRef(), p.Base)[:pos-1] {
			q.Ahead = append(q.Ahead, a.PR)
		}
		r.Queue = q
	}
	r.Conflict = p.Conflict
	if p.Escalation != "" {
		a := escalator.AdviceFor(p.Escalation)
		r.Escalation = &escalation{Reason: p.Escalation, Title: a.Title, Why: a.Why, Detail: p.EscalationDetail, Clear: clearSteps(a, s.Label)}
	}
	return r
}

// clearSteps are the escalation comment's next steps for an advice.
func clearSteps(a escalator.Advice, label string) []string {
	steps := slices.Clone(a.Next)
	if a.Review {
		steps = append(steps, escalator.ReviewStep)
	}
	return append(steps, escalator.ResumeStep(label))
}

// nextStep is the one action that would unblock the PR.
func nextStep(p *prstatus.PR, x explanation, s cliSettings) string {
	live, r := x.GitHub, x.Records
	switch {
	case p == nil:
		return fmt.Sprintf("ask prloop to watch it: prloop watch %s", x.PR)
	case p.Merged || live != nil && live.State == "merged":
		return "nothing: it is merged"
	case p.Closed || live != nil && live.State == "closed":
		return fmt.Sprintf("nothing while it is closed: reopen it and run 'prloop watch %s'", x.PR)
	case r != nil && r.Escalation != nil:
		steps := r.Escalation.Clear
		return strings.Join(steps[:len(steps)-1], " ") + " Or: " + steps[len(steps)-1]
	case p.AgentWait != nil:
		return fmt.Sprintf("wait until %s: the agents' daily budget is spent (PRLOOP_AGENT_DAILY_COST_USD=$%.2f); to go on now, raise it and restart the feedback service",
			p.AgentWait.ResumeAt.UTC().Format("2006-01-02 15:04 UTC"), p.AgentWait.BudgetUSD)
	case p.Conflict != nil:
		// Before GitHub's word: the conflict it shows (mergeable state
		// dirty) is the one the agent is resolving.
		return fmt.Sprintf("wait: the agent is resolving the conflict with %s; the resolved head then needs review again", p.Conflict.Base)
	case len(p.FailingChecks) > 0:
		return "wait: the agent is fixing the failing checks " + strings.Join(p.FailingChecks, ", ") + "; the fixed head then needs review"
	case live != nil && len(live.ChecksFailed) > 0:
		return escalator.AdviceFor(events.ReasonChecksFailed).Next[0] + " Failed: " + strings.Join(live.ChecksFailed, ", ") + "."
	case live != nil && live.MergeableState == "dirty":
		return escalator.AdviceFor(events.ReasonMergeConflict).Next[0]
	case p.Fixing:
		return fmt.Sprintf("wait: the agent is addressing the change request (fix cycle %d of %d)", p.FixCycle, p.FixLimit(prstatus.Options{MaxFixCycles: s.MaxFixCycles}))
	case p.Status == events.StatusChangesRequested:
		return "wait: the agent addresses the change request"
	case p.Status == events.StatusApproved && r != nil && r.Queue != nil && r.Queue.Candidate != nil:
		return candidateStep(r.Queue)
	case p.Status == events.StatusApproved && r != nil && r.Queue != nil && len(r.Queue.Waiting) > 0:
		return "wait for the checks to pass: " + strings.Join(r.Queue.Waiting, ", ")
	case p.Status == events.StatusApproved && r != nil && r.Queue != nil && r.Queue.Mode == prstatus.Speculative:
		return "wait: the merger builds the candidate that tests it" + when(len(r.Queue.Batch) > 0, " together with "+prstatus.Numbers(r.Queue.Batch))
	case p.Status == events.StatusApproved && r != nil && r.Queue != nil && r.Queue.Position > 1:
		return fmt.Sprintf("wait: %d PR(s) ahead of it in the merge queue for %s", r.Queue.Position-1, r.Queue.Base)
	case p.Status == events.StatusApproved:
		return "wait: prloop's merger merges it"
	}
	who := "a reviewer"
	if len(s.Reviewers) > 0 {
		who = strings.Join(s.Reviewers, " or ")
	}
	return escalator.ReviewStep + " (" + who + ")"
}

// candidateStep is the next step of a PR riding in a speculative queue's
// candidate: in a speculative queue the PRs ahead do not hold it back, the
// candidate's checks do.
func candidateStep(q *queueSpot) string {
	c := q.Candidate
	switch {
	case !c.Built():
		return "wait: the merger builds a new candidate for " + q.Base
	case len(q.Waiting) > 0:
		return fmt.Sprintf("wait for the checks to pass on candidate %s (%s): %s", orDash(c.Branch), ghref.ShortSHA(c.SHA), strings.Join(q.Waiting, ", "))
	case c.Checked:
		return "wait: the candidate passed its checks; the merger merges it" + when(len(c.Ahead) > 0, " after "+prstatus.Numbers(c.Ahead))
	}
	return fmt.Sprintf("wait: CI runs on candidate %s (%s)", orDash(c.Branch), ghref.ShortSHA(c.SHA))
}

// printExplanation renders the explanation for a terminal.
func printExplanation(w io.Writer, x explanation, now time.Time) error {
	fmt.Fprintf(w, "%s: %s\n", x.PR, x.Line.Text)
	if x.LastEvent != "" {
		fmt.Fprintf(w, "state %s; last event %s %s ago\n", x.Line.State, x.LastEvent, prstatus.Age(now, x.LastEventAt))
	}
	fmt.Fprintf(w, "\nHistory (%d events)\n", len(x.History))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, h := range x.History {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", h.Time.Local().Format("15:04:05"), h.Type, orDash(ghref.ShortSHA(h.Head)), orDash(strings.Join(h.Who, ", ")), h.Detail)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nGitHub now")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if l := x.GitHub; l != nil {
		draft := ""
		if l.Draft {
			draft = " (draft)"
		}
		fmt.Fprintf(tw, "  state\t%s%s, head %s into %s, mergeable state %s\n", l.State, draft, ghref.ShortSHA(l.Head), l.Base, orDash(l.MergeableState))
		fmt.Fprintf(tw, "  label\t%s: %s\n", l.Label, map[bool]string{true: "present", false: "absent"}[l.LabelPresent])
		fmt.Fprintf(tw, "  checks\tpending: %s; failed: %s\n", orNone(l.ChecksPending), orNone(l.ChecksFailed))
	}
	if x.GitHubSkipped != "" {
		fmt.Fprintf(tw, "  skipped\t%s\n", x.GitHubSkipped)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nprloop's records")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if r := x.Records; r == nil {
		fmt.Fprintf(tw, "  none\tprloop has no record of this PR\n")
	} else {
		counts := "anyone with write permission"
		if len(r.Reviewers) > 0 {
			counts = strings.Join(r.Reviewers, ", ")
		}
		review := fmt.Sprintf("%s; counts: %s", orDash(string(r.Verdict)), counts)
		if len(r.Approvers) > 0 {
			review += "; approved by " + strings.Join(r.Approvers, ", ")
		}
		if len(r.MissingReviewers) > 0 {
			review += "; missing: " + strings.Join(r.MissingReviewers, ", ")
		}
		if r.Author != "" {
			review += "; never the author, " + r.Author
		}
		fmt.Fprintf(tw, "  review\t%s\n", review)
		for _, f := range r.IgnoredFindings {
			fmt.Fprintf(tw, "  set aside\t%s%s: %s%s\n", f.Author, when(f.Location != "", " on "+f.Location), f.Reason, when(f.URL != "", " ("+f.URL+")"))
		}
		limit := fmt.Sprintf("PRLOOP_MAX_FIX_CYCLES=%d", r.MaxFixCycles)
		if r.FixLimitFromFile {
			limit = fmt.Sprintf("feedback.max_fix_cycles: %d in %s", r.MaxFixCycles, policy.Path)
		}
		fmt.Fprintf(tw, "  fix cycles\t%d used, %d left (%s)\n", r.FixCyclesUsed, max(0, r.MaxFixCycles-r.FixCyclesUsed), limit)
		if len(r.FailingChecks) > 0 {
			fmt.Fprintf(tw, "  checks\tagent fixing failing checks: %s\n", strings.Join(r.FailingChecks, ", "))
		}
		if r.FlakyPasses > 0 {
			fmt.Fprintf(tw, "  flaky\t%d failing check run(s) passed on a re-run; the agent never saw them\n", r.FlakyPasses)
		}
		if q := r.Queue; q != nil {
			ahead := make([]string, len(q.Ahead))
			for i, a := range q.Ahead {
				ahead[i] = a.String()
			}
			mode := ""
			switch {
			case q.Mode == prstatus.Speculative && len(q.Batch) > 0:
				mode = " (speculative, tested together with " + prstatus.Numbers(q.Batch) + ")"
			case q.Mode == prstatus.Speculative:
				mode = " (speculative, tested alone)"
			}
			fmt.Fprintf(tw, "  merge queue\tposition %d for %s%s; ahead: %s\n", q.Position, q.Base, mode, orNone(ahead))
			if e := q.ETA; e != nil && e.Known {
				fmt.Fprintf(tw, "  eta\t%s (median CI time %s over the last %d runs)\n", e.Text(), e.CIMedian.Round(time.Second), e.Measurements)
			} else if e != nil {
				fmt.Fprintf(tw, "  eta\tunknown: %d of the %d CI runs measured that an estimate needs\n", e.Measurements, eta.MinSamples)
			}
			if c := q.Candidate; c != nil && c.Built() {
				fmt.Fprintf(tw, "  candidate\t%d%s on %s at %s, from %s at %s: %s\n", c.Position, when(len(c.Ahead) > 0, " (with "+prstatus.Numbers(c.Ahead)+" ahead)"),
					orDash(c.Branch), ghref.ShortSHA(c.SHA), q.Base, orDash(ghref.ShortSHA(c.BaseSHA)), c.Progress(q.Waiting))
			} else if c != nil && c.Rerun {
				fmt.Fprintf(tw, "  candidate\t%s at %s: %s\n", orDash(c.Branch), ghref.ShortSHA(c.SHA), c.Progress(q.Waiting))
			} else if c != nil {
				fmt.Fprintf(tw, "  candidate\t%s invalidated%s; a new one is being built\n", ghref.ShortSHA(c.SHA), when(c.Detail != "", ": "+c.Detail))
			}
		} else {
			fmt.Fprintf(tw, "  merge queue\tnot queued\n")
		}
		if c := r.Conflict; c != nil {
			fmt.Fprintf(tw, "  conflict\twith %s at %s: the agent is resolving it%s\n", c.Base, orDash(ghref.ShortSHA(c.BaseSHA)), when(c.Detail != "", " ("+c.Detail+")"))
		}
		if e := r.Escalation; e != nil {
			fmt.Fprintf(tw, "  escalation\t%s (%s): %s\n", e.Reason, e.Title, e.Why)
			if e.Detail != "" {
				fmt.Fprintf(tw, "  \t%s\n", e.Detail)
			}
			for _, c := range e.Clear {
				fmt.Fprintf(tw, "  to clear it\t%s\n", c)
			}
		} else {
			fmt.Fprintf(tw, "  escalation\tnone\n")
		}
	}
	tw.Flush()
	printPolicy(w, x.Policy, x.PolicySkipped)
	_, err := fmt.Fprintf(w, "\nnext: %s\n", x.Next)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
