package poller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/state"
)

// Failing checks go back to the agent (issue #32). The poller owns the
// facts about a PR's head, so it reads the head's checks when it evaluates
// the PR and publishes PRChecksFailed when gating checks failed: once per
// set of failures on a head (a re-run that fails again is a new set, round
// 2), never for prloop's own status context, never while the change
// request or conflict on the head is being worked on, and never for a PR
// approved (the merger's then). The feedback service decides what to do
// about it: re-run, fix, or escalate.

// PRLOOP_FIX_CHECKS values.
const (
	// FixRequired: the base's required checks (branch rules and
	// PRLOOP_REQUIRED_CHECKS); every check when none are known.
	FixRequired = "required"
	// FixAll: every check but prloop's own.
	FixAll = "all"
	// FixNone: failing checks are not handed to anyone.
	FixNone = "none"
)

// checksRecheck is how many poll intervals apart a PR whose gating checks
// are pending is evaluated again.
const checksRecheck = 4

// checksGitHub is the part of the GitHub client reading checks takes. A
// client without it (a test's fake) reads none.
type checksGitHub interface {
	GetCombinedStatus(ctx context.Context, repo ghref.Repo, ref string) (*gh.CombinedStatus, error)
	ListCheckRuns(ctx context.Context, repo ghref.Repo, ref string) ([]*gh.CheckRun, error)
	ListBranchRules(ctx context.Context, repo ghref.Repo, branch string) ([]github.BranchRule, error)
}

var _ checksGitHub = (*github.Client)(nil)

// CheckFacts is what one read of a head's checks shows, as judgeChecks
// judged it.
type CheckFacts struct {
	// Failed are the gating checks that completed without passing,
	// sorted by name.
	Failed []events.FailedCheck
	// Pending says a gating check has not completed yet.
	Pending bool
	// Green says gating checks reported and every one passed.
	Green bool
}

// ChecksInput is what judgeChecks looks at.
type ChecksInput struct {
	// Mode is PRLOOP_FIX_CHECKS; Required the base's required checks;
	// Own prloop's status context (and check run name), never a check.
	Mode     string
	Required []string
	Own      string
	Combined *gh.CombinedStatus
	Runs     []*gh.CheckRun
}

// failedConclusion reports whether a completed check run did not pass.
func failedConclusion(c string) bool {
	switch c {
	case "failure", "timed_out", "cancelled", "action_required", "startup_failure":
		return true
	}
	return false
}

// judgeChecks decides which of a head's checks gate and which of those
// failed. It is pure. With mode required and required checks known only
// those gate; otherwise every check but prloop's own. A check that ran
// more than once counts by its latest run (a re-run replaces a failure).
func judgeChecks(in ChecksInput) CheckFacts {
	var c CheckFacts
	if in.Mode == FixNone {
		return c
	}
	gates := func(name string) bool {
		if name == "" || (in.Own != "" && name == in.Own) {
			return false
		}
		return in.Mode != FixRequired || len(in.Required) == 0 || slices.Contains(in.Required, name)
	}
	reported := 0
	if in.Combined != nil {
		for _, st := range in.Combined.Statuses {
			if st == nil || !gates(st.GetContext()) {
				continue
			}
			reported++
			switch st.GetState() {
			case "success":
			case "pending":
				c.Pending = true
			default: // failure, error
				c.Failed = append(c.Failed, github.FailedStatus(st))
			}
		}
	}
	latest := map[string]*gh.CheckRun{}
	for _, r := range in.Runs {
		if r == nil || !gates(r.GetName()) {
			continue
		}
		if cur, ok := latest[r.GetName()]; !ok || r.GetID() > cur.GetID() {
			latest[r.GetName()] = r
		}
	}
	for _, r := range latest {
		reported++
		switch {
		case r.GetStatus() != "completed":
			c.Pending = true
		case failedConclusion(r.GetConclusion()):
			c.Failed = append(c.Failed, github.FailedRun(r))
		}
	}
	if in.Mode == FixRequired && len(in.Required) > 0 && reported < len(in.Required) {
		c.Pending = true // a required check has not reported yet
	}
	slices.SortFunc(c.Failed, func(a, b events.FailedCheck) int { return strings.Compare(a.Name+a.Kind, b.Name+b.Kind) })
	c.Failed = c.Failed[:min(len(c.Failed), events.MaxFailedChecks)]
	c.Green = reported > 0 && !c.Pending && len(c.Failed) == 0
	return c
}

// checksKey fingerprints a set of failures: the same checks (by id) with
// the same conclusions are the same failure.
func checksKey(failed []events.FailedCheck) string {
	h := sha256.New()
	for _, f := range failed {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\n", f.Kind, f.Name, f.ID, f.Conclusion)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// checksFailed decides what next's failing checks publish. fr is the
// PRFeedbackReceived this decision publishes, if any: the failures ride
// in it (one prompt for both) instead of an event of their own. It is
// pure; it updates next's checks record.
//
//   - A new head starts fresh; a flaky pass (a published failure that
//     passed on the same head) is counted once.
//   - The same failures on the same head are news once.
//   - A PR approved is the merger's; a head being worked on (a change
//     request or conflict in hand) is left alone until that ends.
func checksFailed(next *state.PR, facts *CheckFacts, fr *events.FeedbackReceived) []Emit {
	if facts == nil || next.Closed || next.HeadSHA == "" {
		return nil
	}
	rec := &next.Checks
	if rec.HeadSHA != next.HeadSHA {
		*rec = state.ChecksRecord{HeadSHA: next.HeadSHA, FlakyPasses: rec.FlakyPasses}
	}
	if len(facts.Failed) == 0 {
		if rec.Round > 0 && facts.Green && !rec.Passed {
			rec.Passed, rec.Failing = true, nil
			rec.FlakyPasses++
		}
		return nil
	}
	key := checksKey(facts.Failed)
	if rec.Key == key {
		return nil
	}
	if fr != nil {
		fr.FailedChecks = slices.Clone(facts.Failed)
		rec.Key, rec.Round, rec.Failing, rec.Passed = key, rec.Round+1, events.CheckNames(facts.Failed), false
		return nil
	}
	if next.Status == events.StatusApproved || next.FeedbackHeadSHA != "" {
		return nil
	}
	rec.Key, rec.Round, rec.Failing, rec.Passed = key, rec.Round+1, events.CheckNames(facts.Failed), false
	next.FeedbackHeadSHA = next.HeadSHA // held like a change request until the feedback service answers
	return []Emit{{Data: &events.ChecksFailed{
		Base:   events.Base{PR: next.PR, HeadSHA: next.HeadSHA},
		Checks: slices.Clone(facts.Failed), Round: rec.Round, FixCycle: next.FixCycle, Epoch: next.Epoch,
		Worktree: next.Worktree, ContextPath: next.ContextPath, Anchor: next.HeadAnchor, BaseBranch: next.BaseRef,
		ChangesRequested: next.Status == events.StatusChangesRequested, AddressedItems: slices.Clone(next.AddressedItems),
	}, Parts: []string{ghref.EventSHA(next.HeadSHA), strconv.Itoa(rec.Round), key}}}
}

// readChecks reads head's checks and judges them under mode (the base
// policy's feedback.fix_checks, PRLOOP_FIX_CHECKS without one), or returns
// nil when there is nothing to judge: mode none, a client that cannot
// read checks, an approved PR, or a head being worked on. A failed read is
// logged and judged another time: checks never hold the review loop up.
func (s *Service) readChecks(ctx context.Context, cur state.PR, pr ghref.PR, head, base string, status events.Status, mode string, log *slog.Logger) *CheckFacts {
	c, ok := s.d.GitHub.(checksGitHub)
	if !ok || mode == FixNone || head == "" || status == events.StatusApproved || (cur.FeedbackHeadSHA != "" && cur.FeedbackHeadSHA == head) {
		return nil
	}
	in := ChecksInput{Mode: mode, Own: s.cfg.StatusContext, Required: s.cfg.requiredChecks()}
	var err error
	if mode == FixRequired && base != "" {
		var rules []github.BranchRule
		if rules, err = c.ListBranchRules(ctx, pr.RepoRef(), base); err == nil {
			var req []string
			if req, err = github.RequiredChecks(rules); err == nil {
				in.Required = append(in.Required, req...)
			}
		}
	}
	if err == nil {
		in.Combined, err = c.GetCombinedStatus(ctx, pr.RepoRef(), head)
	}
	if err == nil {
		in.Runs, err = c.ListCheckRuns(ctx, pr.RepoRef(), head)
	}
	if err != nil {
		log.Warn("checks not read; judged on the next evaluation", "err", err)
		return nil
	}
	facts := judgeChecks(in)
	return &facts
}
