package feedback

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/github"
)

// Failing checks (PRChecksFailed, issue #32): the poller saw gating checks
// fail on a head and the service treats it like a change request, through
// the same attempt (the PR's lease, the sandbox, the verified push from the
// mirror, PRFeedbackAddressed), with three differences, all here: a head's
// first failure of GitHub Actions jobs is re-run once before the agent is
// asked (PRLOOP_RERUN_FAILED_CHECKS), the prompt quotes the failure as
// gathered with prloop's token (a check run's output and annotations, a
// job's failed steps and the tail of its log, a commit status's
// description), cleaned, fenced, bounded and without any token, and the
// cycles may be bounded on their own (PRLOOP_MAX_CI_FIX_CYCLES); when
// they are used up a human is asked once, reason checks_failed.

//go:embed checks.tmpl
var checksTemplateText string

// Bounds of what the checks section quotes.
const (
	maxPromptChecks      = 10
	maxCheckAnnotations  = 50
	maxCheckOutputBytes  = 8 << 10
	maxAnnotationBytes   = 1 << 10
	maxExcerptLines      = 5
	maxExcerptLineBytes  = 200
	maxCheckSectionBytes = 96 << 10
)

// ChecksFailure is what a PRChecksFailed adds to a Request.
type ChecksFailure struct {
	// Round is the poller's count of failures of the head (1: the first).
	Round int
	// ChangesRequested says a reviewer's change request stands on the
	// head too: the prompt carries both.
	ChangesRequested bool
	// Candidate is set when the checks failed on the speculative queue's
	// candidate, not on the head (PRMergeFailed, candidate_failed).
	Candidate *CandidateFailure
}

// CandidateFailure is the candidate a PR failed on while its own head is
// green: the commit the checks ran on, and the base branch with the tip
// the candidate was built on. prloop brings the base in (its tip now) and
// the agent fixes on top.
type CandidateFailure struct {
	SHA, BaseBranch, BaseSHA string
}

// candidateRequestOf reads a candidate's failure from the merger's
// PRMergeFailed (reason candidate_failed): a failing-checks request with
// no re-run (the PR left the queue; its fix runs CI again), bounded like
// every CI fix.
func candidateRequestOf(d *events.MergeFailed, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Checks:       &ChecksFailure{Candidate: &CandidateFailure{SHA: d.Candidate, BaseBranch: d.BaseBranch, BaseSHA: d.BaseSHA}},
		FailedChecks: d.Checks,
	}
}

// checkedSHA is the commit the failing checks ran on: the candidate's,
// or the head's.
func (r Request) checkedSHA() string {
	if r.Checks != nil && r.Checks.Candidate != nil {
		return r.Checks.Candidate.SHA
	}
	return r.HeadSHA
}

// candidate is the candidate the request's checks failed on (nil when
// they failed on the head).
func (r Request) candidate() *CandidateFailure {
	if r.Checks == nil {
		return nil
	}
	return r.Checks.Candidate
}

// baseBranch is the base branch prloop merges into the head before the
// agent runs: a conflict's, or a failed candidate's ("" for none).
func (r Request) baseBranch() string {
	switch {
	case r.Conflict != nil:
		return r.Conflict.BaseBranch
	case r.candidate() != nil:
		return r.candidate().BaseBranch
	}
	return ""
}

// checksRequestOf reads a failing-checks request from its event.
func checksRequestOf(d *events.ChecksFailed, eventID string) Request {
	return Request{
		PR: d.PR, HeadSHA: d.HeadSHA, FixCycle: d.FixCycle, EventID: eventID, Epoch: d.Epoch,
		Worktree: d.Worktree, ContextPath: d.ContextPath, Anchor: d.Anchor, Addressed: d.AddressedItems,
		Checks:       &ChecksFailure{Round: d.Round, ChangesRequested: d.ChangesRequested},
		FailedChecks: d.Checks,
	}
}

// planChecksFix bounds the fixes of failing checks: with
// PRLOOP_MAX_CI_FIX_CYCLES on their own, otherwise together with review
// fixes against PRLOOP_MAX_FIX_CYCLES. Used up, a human is asked with
// reason checks_failed.
func planChecksFix(rec Record, cycle int, lim limits) action {
	used, bound, setting := cycle, lim.MaxFixCycles, "PRLOOP_MAX_FIX_CYCLES"
	if lim.MaxCIFixCycles > 0 {
		used, bound, setting = rec.CIFixes, lim.MaxCIFixCycles, "PRLOOP_MAX_CI_FIX_CYCLES"
	}
	if used >= bound {
		return action{kind: actEscalate, reason: events.ReasonChecksFailed, note: "fix cycles used up on failing checks", cycle: cycle, rec: rec,
			detail: fmt.Sprintf("checks still fail after %d fixes by the agent (%s=%d)", used, setting, bound)}
	}
	rec.CIFixes++
	return action{kind: actFix, cycle: cycle, rec: rec}
}

// PromptCheck is one failing check as the prompt quotes it; every text is
// cleaned (cleanCheckText) and bounded.
type PromptCheck struct {
	Name, Kind, Conclusion, URL string
	// Title, Summary and Text are a check run's output; Description a
	// commit status's.
	Title, Summary, Text, Description string
	Annotations                       []PromptAnnotation
	// AnnotationsLeftOut counts annotations past the bound.
	AnnotationsLeftOut int
	// FailedSteps are a GitHub Actions job's failed steps; Log the tail
	// of its log.
	FailedSteps []string
	Log         string
}

// PromptAnnotation is one annotation of a check run.
type PromptAnnotation struct {
	Location, Level, Message string
}

// ansi matches terminal escape sequences (colours, cursor moves, OSC
// titles and links), which CI logs are full of.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// cleanCheckText makes text from a check fit for the prompt: escape
// sequences go, then what Sanitize removes from review comments, then
// every credential-shaped string and prloop's own token.
func cleanCheckText(s string, tok github.Secret) string {
	return github.RedactTokens(Sanitize(ansi.ReplaceAllString(s, "")), tok)
}

func checkSize(pc PromptCheck) int {
	n := len(pc.Summary) + len(pc.Text) + len(pc.Log) + len(pc.Description)
	for _, an := range pc.Annotations {
		n += len(an.Message) + len(an.Location)
	}
	return n
}

// checksExcerpt is what an escalation says of the failure: each check's
// name and conclusion, and the first lines of what it reported.
func checksExcerpt(checks []PromptCheck) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "\n- %s (%s)", c.Name, c.Conclusion)
		var lines []string
		for _, an := range c.Annotations {
			lines = append(lines, an.Location+": "+an.Message)
		}
		for _, text := range []string{c.Title, c.Summary, c.Description} {
			lines = append(lines, strings.Split(text, "\n")...)
		}
		if c.Log != "" {
			log := strings.Split(c.Log, "\n")
			lines = append(lines, log[max(0, len(log)-maxExcerptLines):]...)
		}
		n := 0
		for _, l := range lines {
			if l = strings.TrimSpace(l); l == "" || n == maxExcerptLines {
				continue
			}
			fmt.Fprintf(&b, "\n    %s", Truncate(SanitizeLine(l), maxExcerptLineBytes))
			n++
		}
	}
	return b.String()
}
