// Package policy is a repository's own prloop policy: the file
// .github/prloop.yml on the base branch's tip (its types, strict decoding
// with errors a person can act on, validation), and the Effective policy
// of one PR: the file and its branch overrides laid over the operator's
// PRLOOP_* defaults and cut to the operator's ceilings, each value with
// where it came from.
//
// It is the one owner of policy facts and a read-only library: every
// service loads the base's policy itself through a Loader (cached by
// repository and base commit) and nobody records it anywhere.
package policy

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Path is where a repository keeps its policy, read on the base branch's
// tip only: never the PR's head, or a PR could loosen its own rules.
const Path = ".github/prloop.yml"

// Version is the one version of the file this prloop reads.
const Version = 1

// File is .github/prloop.yml. Every section and key is optional: what is
// absent falls back to the operator's PRLOOP_* settings.
type File struct {
	// Version of the file's format; must be 1.
	Version int `yaml:"version" json:"version" jsonschema:"enum=1" doc:"Format version; must be 1."`
	Section `yaml:",inline"`
	// Branches override sections for base branches matching a glob
	// (path.Match: "release/*"); the first matching glob in file order wins.
	Branches Branches `yaml:"branches,omitempty" json:"branches,omitempty" doc:"Overrides per base branch: a glob (release/*) to the sections it changes. The first matching glob, in file order, applies."`
}

// Section is what a file and each branch override may set.
type Section struct {
	Review     *Review     `yaml:"review,omitempty" json:"review,omitempty" doc:"Which review signals count and whose."`
	Feedback   *Feedback   `yaml:"feedback,omitempty" json:"feedback,omitempty" doc:"What goes back to the coding agent."`
	Agent      *Agent      `yaml:"agent,omitempty" json:"agent,omitempty" doc:"The coding agent's limits (within the operator's ceilings)."`
	Merge      *Merge      `yaml:"merge,omitempty" json:"merge,omitempty" doc:"How an approved PR is merged."`
	Escalation *Escalation `yaml:"escalation,omitempty" json:"escalation,omitempty" doc:"How a PR is handed to a human."`
}

// Review is the review section.
type Review struct {
	// Protocols are the signals that count, as PRLOOP_REVIEW_PROTOCOLS:
	// emoji, native (GitHub reviews; "reviews" is the same), quorum.
	Protocols []string `yaml:"protocols,omitempty" json:"protocols,omitempty" jsonschema:"enum=emoji|native|reviews|quorum" doc:"Which signals count: emoji, native (GitHub reviews; also spelled reviews), quorum."`
	// Reviewers are logins and org teams ("@acme/core") whose signals
	// count; an empty list means everyone with write permission.
	Reviewers *[]string `yaml:"reviewers,omitempty" json:"reviewers,omitempty" doc:"Logins and organisation teams (@org/team) whose signals count; [] means everyone with write permission."`
	// Quorum are the bot reviewers the quorum protocol waits for
	// ("login" or "login/marker text"), as PRLOOP_REQUIRED_REVIEWERS.
	Quorum []string `yaml:"quorum,omitempty" json:"quorum,omitempty" doc:"Bot reviewers the quorum protocol waits for: login or login/marker text."`
	// ApprovalSurvivesPush lets an approval of an earlier head approve
	// the new one.
	ApprovalSurvivesPush *bool `yaml:"approval_survives_push,omitempty" json:"approval_survives_push,omitempty" doc:"Whether an approval given before the latest push approves the new head."`
	// Timeout is how long a PR may wait for approval before escalation.
	Timeout *Duration `yaml:"timeout,omitempty" json:"timeout,omitempty" doc:"How long a PR may wait for approval before it is escalated (Go duration: 90m, 2h)."`
}

// Feedback is the feedback section.
type Feedback struct {
	// MaxFixCycles is how many fixes prloop may push per PR (capped by
	// the operator's ceiling).
	MaxFixCycles *int `yaml:"max_fix_cycles,omitempty" json:"max_fix_cycles,omitempty" jsonschema:"minimum=0" doc:"How many fixes prloop may push per PR before escalating (at most the operator's ceiling)."`
	// FixChecks says which failing CI checks go back to the agent: none,
	// required or all.
	FixChecks string `yaml:"fix_checks,omitempty" json:"fix_checks,omitempty" jsonschema:"enum=none|required|all" doc:"Which failing CI checks go back to the agent: none, required or all."`
}

// Agent is the agent section: a repository may ask for less than the
// operator allows, never more.
type Agent struct {
	// Timeout bounds one agent run.
	Timeout *Duration `yaml:"timeout,omitempty" json:"timeout,omitempty" doc:"How long one agent run may take (at most the operator's PRLOOP_AGENT_TIMEOUT)."`
	// Budget bounds the agent's total time on one PR.
	Budget *Duration `yaml:"budget,omitempty" json:"budget,omitempty" doc:"The agent's total time on one PR (at most the operator's PRLOOP_AGENT_BUDGET)."`
	// MayEditWorkflows lets the agent change .github/workflows.
	MayEditWorkflows *bool `yaml:"may_edit_workflows,omitempty" json:"may_edit_workflows,omitempty" doc:"Whether the agent may change .github/workflows (only if the operator allows it)."`
}

// Merge is the merge section.
type Merge struct {
	// Method is squash, merge or rebase.
	Method string `yaml:"method,omitempty" json:"method,omitempty" jsonschema:"enum=squash|merge|rebase" doc:"squash, merge or rebase (one the operator allows)."`
	// RequiredChecks are checks that must pass besides the base's rules.
	RequiredChecks *[]string `yaml:"required_checks,omitempty" json:"required_checks,omitempty" doc:"Checks (status contexts or check run names) that must pass, besides those the base's branch rules require."`
	// Queue is the merge queue's shape.
	Queue *Queue `yaml:"queue,omitempty" json:"queue,omitempty" doc:"The merge queue."`
	// DeleteBranch deletes the head branch after a merge.
	DeleteBranch *bool `yaml:"delete_branch,omitempty" json:"delete_branch,omitempty" doc:"Whether the head branch is deleted after the merge."`
	// PriorityLabel is the label that puts a queued PR ahead of the others.
	PriorityLabel string `yaml:"priority_label,omitempty" json:"priority_label,omitempty" doc:"The label that puts a queued PR ahead of every PR without it (default: the operator's PRLOOP_PRIORITY_LABEL)."`
}

// Queue is the merge queue's mode and depth.
type Queue struct {
	// Mode is serial or speculative.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty" jsonschema:"enum=serial|speculative" doc:"serial or speculative."`
	// Depth is how many PRs a speculative queue tests at once.
	Depth *int `yaml:"depth,omitempty" json:"depth,omitempty" jsonschema:"minimum=1" doc:"How many PRs a speculative queue tests at once."`
}

// Escalation is the escalation section.
type Escalation struct {
	// Label marks an escalated PR.
	Label string `yaml:"label,omitempty" json:"label,omitempty" doc:"The label that marks an escalated PR; removing it resumes the loop."`
	// Mentions are the people and teams an escalation comment names.
	Mentions *[]string `yaml:"mentions,omitempty" json:"mentions,omitempty" doc:"People and teams (@login, @org/team) the escalation comment mentions."`
}

// Branch is one override: a glob over base branch names and the sections
// it sets.
type Branch struct {
	Glob string
	// Line is where the glob is written in the file.
	Line    int
	Section Section
}

// Branches are the overrides in file order (a YAML mapping, whose order
// decides which glob wins).
type Branches []Branch

// Duration is a time.Duration written as Go writes it ("90m", "2h").
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("want a duration like 90m or 2h, got %s", describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("want a duration like 90m or 2h, got %q", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the Go form.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes the Go form as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%q", time.Duration(d).String())), nil
}

// describe names a node for an error: its value for a scalar, its kind
// otherwise.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return "nothing"
}
