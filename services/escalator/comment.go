package escalator

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// Request is an escalation to perform, from a PREscalationRequested or a
// ReviewTimeout event.
type Request struct {
	PR                  ghref.PR
	HeadSHA             string
	Reason              events.Reason
	Severity            events.Severity
	FixCycle            int
	Detail              string
	LastError           string
	MissingReviewers    []string
	HumanReviewRequired bool
	// Actor is the service or person that asked.
	Actor string
	// Epoch is the PR's escalation epoch the request belongs to, as the
	// event that asked says (see "Event ids" in package events).
	Epoch int
	// Agent summarises the coding agent's last run, when a preset ran it.
	Agent *events.AgentRunSummary
}

var reasonRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// RequestOf turns a consumed event into a Request. It reports false for
// event types the escalator does not handle, and an error for a request it
// cannot act on (no valid reason code).
func RequestOf(d events.Data) (Request, bool, error) {
	var r Request
	switch d := d.(type) {
	case *events.EscalationRequested:
		r = Request{
			PR: d.PR, HeadSHA: d.HeadSHA, Reason: d.Reason, Severity: d.Severity, FixCycle: d.FixCycle,
			Detail: d.Detail, LastError: d.LastError, MissingReviewers: d.MissingReviewers,
			HumanReviewRequired: d.HumanReviewRequired, Actor: d.Actor, Epoch: d.Epoch, Agent: d.Agent,
		}
	case *events.ReviewTimeout:
		r = Request{
			PR: d.PR, HeadSHA: d.HeadSHA, Reason: d.Reason, Severity: events.SeverityWarning, Detail: d.Detail,
			MissingReviewers: d.MissingReviewers, HumanReviewRequired: true, Actor: "poller", Epoch: d.Epoch,
		}
		if r.Reason == "" {
			r.Reason = events.ReasonReviewTimeout
		}
	default:
		return Request{}, false, nil
	}
	if !reasonRE.MatchString(string(r.Reason)) {
		return r, true, fmt.Errorf("escalation request for %s: reason %q is not a reason code", r.PR, r.Reason)
	}
	switch r.Severity {
	case events.SeverityInfo, events.SeverityWarning, events.SeverityBlocking:
	default:
		r.Severity = events.SeverityWarning
	}
	return r, true, nil
}

// reasonInfo says in words what a reason code means and what a human can do.
type reasonInfo struct {
	title, why string
	// review is set when a human review (👍) is what the PR needs.
	review bool
	next   []string
}

var reasons = map[events.Reason]reasonInfo{
	events.ReasonReviewTimeout: {
		title: "no review in time", review: true,
		why: "No approval arrived within the review timeout.",
	},
	events.ReasonMaxFixCycles: {
		title: "fix-cycle limit reached", review: true,
		why:  "prloop's agent addressed review feedback as many times as it may, and the PR is still not approved.",
		next: []string{"Read the open review comments and push a fix yourself, or decide the PR is good as it is."},
	},
	events.ReasonFeedbackFailed: {
		title: "the agent could not address the feedback", review: true,
		why:  "prloop's coding agent failed while addressing review feedback.",
		next: []string{"Read the last error above, then address the feedback yourself, or fix what made the agent fail."},
	},
	events.ReasonAgentBudgetExhausted: {
		title: "the agent's budget is spent", review: true,
		why: "prloop's coding agent used up what it may spend on this PR without getting it approved: its wall time (PRLOOP_AGENT_BUDGET), " +
			"its cost (PRLOOP_AGENT_MAX_COST_USD) or one run's turns (PRLOOP_AGENT_MAX_TURNS); the details say which, with the figures.",
		next: []string{"Address the open review comments yourself, or raise the budget the details name if the PR deserves more agent work."},
	},
	events.ReasonReviewWorkflowFailed: {
		title: "a review workflow failed", review: true,
		why:  "A required reviewer's workflow failed, so the PR cannot be reviewed automatically.",
		next: []string{"Re-run the failed review workflow, or review the PR yourself."},
	},
	events.ReasonChecksFailed: {
		title: "required checks failed",
		why:   "Required checks did not pass on the PR's head, so prloop will not merge it.",
		next:  []string{"Fix the failing checks: push a fix, or re-run the ones that are flaky."},
	},
	events.ReasonMergeConflict: {
		title: "merge conflict",
		why:   "The PR conflicts with its base branch, so prloop cannot merge it.",
		next:  []string{"Resolve the conflicts: merge or rebase the base branch into the PR and push."},
	},
	events.ReasonNotMergeable: {
		title: "GitHub will not merge it",
		why:   "GitHub refused to merge the PR (a draft, branch protection, or another block).",
		next:  []string{"See what blocks the merge at the bottom of the PR page (draft, required reviews, branch protection) and clear it."},
	},
}

// Advice is what a reason code means and what a human can do, in the
// words of the escalation comment: `prloop explain` says the same.
type Advice struct {
	// Title names the reason in a few words, Why says it in a sentence.
	Title, Why string
	// Review is set when a human review (👍) is what the PR needs.
	Review bool
	// Next are the reason's own next steps, before ReviewStep and
	// ResumeStep.
	Next []string
}

// AdviceFor returns the advice for a reason code.
func AdviceFor(r events.Reason) Advice {
	i := infoOf(r)
	return Advice{Title: i.title, Why: i.why, Review: i.review, Next: slices.Clone(i.next)}
}

// ReviewStep is the next step when a human review is what the PR needs.
const ReviewStep = "Review the PR and react 👍 to it to approve it; prloop then merges it."

// ResumeStep is the next step that hands the PR back to prloop: removing
// the escalation label.
func ResumeStep(label string) string {
	return fmt.Sprintf("Remove the `%s` label to let prloop resume: the loop starts again with its fix-cycle count reset.", label)
}

func infoOf(r events.Reason) reasonInfo {
	if i, ok := reasons[r]; ok {
		return i
	}
	return reasonInfo{title: strings.ReplaceAll(string(r), "_", " "), why: "prloop stopped and needs a human."}
}

// CommentOptions are the parts of the comment that come from configuration.
type CommentOptions struct {
	Label    string
	Mentions []string
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// Marker is the hidden first line of the escalation comment for reason,
// head and escalation epoch. The escalator looks for it before posting, so
// that a comment posted just before a crash is not posted again, while the
// same failure after a human removed the label (a new epoch) is. The first
// epoch's marker has no epoch, as before epochs existed.
func Marker(reason events.Reason, head string, epoch int) string {
	if !hexRE.MatchString(head) {
		head = "none"
	}
	m := "<!-- prloop:escalation reason=" + string(reason) + " head=" + head
	if epoch > 0 {
		m += " epoch=" + strconv.Itoa(epoch)
	}
	return m + " -->"
}

// maxText bounds each piece of free text quoted in the comment.
const maxText = 2000

// RenderComment writes the escalation comment: why prloop stopped (in
// words and as the reason code), what was tried, and what a human can do
// next. Free text from events (detail, last error) is quoted in code
// blocks, so it can neither format the comment nor mention anyone.
func RenderComment(r Request, epoch int, o CommentOptions) string {
	info := infoOf(r.Reason)
	var b strings.Builder
	b.WriteString(Marker(r.Reason, r.HeadSHA, epoch) + "\n")
	fmt.Fprintf(&b, "### prloop needs a human: %s\n\n", info.title)
	fmt.Fprintf(&b, "**Why:** %s (reason `%s`, severity **%s**)\n\n", info.why, r.Reason, r.Severity)

	var tried []string
	if r.FixCycle > 0 {
		tried = append(tried, "Fix cycles pushed by prloop: "+strconv.Itoa(r.FixCycle))
	}
	if len(r.MissingReviewers) > 0 {
		names := make([]string, len(r.MissingReviewers))
		for i, m := range r.MissingReviewers {
			names[i] = codeSpan(m)
		}
		tried = append(tried, "Still waiting for: "+strings.Join(names, ", "))
	}
	if hexRE.MatchString(r.HeadSHA) {
		tried = append(tried, "Head commit: "+codeSpan(r.HeadSHA[:min(len(r.HeadSHA), 12)]))
	}
	if r.Agent != nil {
		tried = append(tried, "The agent's last run: "+codeSpan(r.Agent.Text()))
	}
	if len(tried) > 0 || r.Detail != "" || r.LastError != "" {
		b.WriteString("**What was tried:**\n")
		for _, t := range tried {
			b.WriteString("- " + t + "\n")
		}
		if r.Detail != "" {
			b.WriteString("- Details:\n" + codeBlock(r.Detail))
		}
		if r.LastError != "" {
			b.WriteString("- Last error:\n" + codeBlock(r.LastError))
		}
		if r.Agent != nil && r.Agent.Final != "" {
			b.WriteString("- The agent's last message:\n" + codeBlock(r.Agent.Final))
		}
		b.WriteString("\n")
	}

	b.WriteString("**What you can do next:**\n")
	for _, n := range info.next {
		b.WriteString("- " + n + "\n")
	}
	if info.review || r.HumanReviewRequired {
		b.WriteString("- " + ReviewStep + "\n")
	}
	b.WriteString("- " + ResumeStep(o.Label) + "\n\n")
	fmt.Fprintf(&b, "While the `%s` label is on this PR, prloop runs no agent for it.\n", o.Label)
	if m := mentions(o.Mentions); m != "" {
		b.WriteString("\ncc " + m + "\n")
	}
	return b.String()
}

// mentions renders configured logins and teams as @mentions.
func mentions(ms []string) string {
	var out []string
	for _, m := range ms {
		if m = strings.TrimPrefix(strings.TrimSpace(m), "@"); m != "" && mentionRE.MatchString(m) {
			out = append(out, "@"+m)
		}
	}
	return strings.Join(out, " ")
}

// codeSpan quotes s as inline code, whatever backticks it holds.
func codeSpan(s string) string {
	s = strings.ReplaceAll(truncate(s, 200), "\n", " ")
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	return fence + " " + s + " " + fence
}

// codeBlock quotes s as an indented fenced code block, with a fence longer
// than any run of backticks in s.
func codeBlock(s string) string {
	s = strings.TrimRight(truncate(s, maxText), "\n")
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	var b strings.Builder
	b.WriteString("  " + fence + "text\n")
	for _, line := range strings.Split(s, "\n") {
		b.WriteString("  " + line + "\n")
	}
	b.WriteString("  " + fence + "\n")
	return b.String()
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " … (truncated)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
