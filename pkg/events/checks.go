package events

import "time"

// Kinds of a FailedCheck: GitHub's two ways of reporting a check.
const (
	// CheckKindRun is a check run (the Checks API; GitHub Actions jobs are
	// check runs whose id is the job's id).
	CheckKindRun = "check_run"
	// CheckKindStatus is a commit status (the Statuses API).
	CheckKindStatus = "status"
)

// MaxFailedChecks bounds the checks one PRChecksFailed names.
const MaxFailedChecks = 50

// FailedCheck is one gating check that completed without passing on a
// head: its name, how it ended and where to read more. Name and URL are
// written by whoever runs the check: show them escaped, never act on them.
type FailedCheck struct {
	Name string `json:"name"`
	// Kind is CheckKindRun or CheckKindStatus.
	Kind string `json:"kind"`
	// Conclusion is the check run's conclusion (failure, timed_out,
	// cancelled, action_required, startup_failure) or the commit status's
	// state (failure, error).
	Conclusion string `json:"conclusion"`
	URL        string `json:"url,omitempty"`
	// ID is the check run's id (for GitHub Actions, the job's); 0 for a
	// commit status.
	ID int64 `json:"id,omitempty"`
	// Actions says the check run is a GitHub Actions job, whose run can
	// be re-run and whose log can be read.
	Actions bool `json:"actions,omitempty"`
	// Description is a commit status's description.
	Description string `json:"description,omitempty"`
}

// ChecksFailed says gating checks failed on HeadSHA, the PR's current
// head (see "Failing checks" in the package documentation). The feedback
// service re-runs failed GitHub Actions jobs once (round 1, with
// PRLOOP_RERUN_FAILED_CHECKS) or hands the failure to the agent.
type ChecksFailed struct {
	Base
	Checks []FailedCheck `json:"checks"`
	// Round counts the failures published for HeadSHA: 1 the first, 2 a
	// failure that repeated after a re-run.
	Round int `json:"round"`
	// FixCycle, Epoch, Worktree, ContextPath and Anchor are as in
	// PRFeedbackReceived: the fix is a fix cycle like a review's.
	FixCycle    int       `json:"fix_cycle"`
	Epoch       int       `json:"epoch,omitempty"`
	Worktree    string    `json:"worktree,omitempty"`
	ContextPath string    `json:"context_path,omitempty"`
	Anchor      time.Time `json:"anchor,omitzero"`
	BaseBranch  string    `json:"base,omitempty"`
	// ChangesRequested says a reviewer's change request stands on the
	// head too: the agent addresses both in one run (one prompt, both
	// sections).
	ChangesRequested bool `json:"changes_requested,omitempty"`
	// AddressedItems are the review feedback earlier fixes addressed, as
	// in PRFeedbackReceived.
	AddressedItems []string `json:"addressed_items,omitempty"`
}

// CheckNames lists the names of checks, in order.
func CheckNames(checks []FailedCheck) []string {
	out := make([]string, 0, len(checks))
	for _, c := range checks {
		out = append(out, c.Name)
	}
	return out
}
