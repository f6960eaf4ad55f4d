package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testOperator() Operator {
	return Operator{
		Protocols: []string{"emoji", "reviews"}, ReviewTimeout: 2 * time.Hour,
		MaxFixCycles: 2, FixChecks: "none",
		AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour,
		MergeMethod: "squash", QueueMode: "serial", QueueDepth: 4,
		EscalationLabel: "human-review-required",
		Ceilings: Ceilings{
			MaxFixCycles: 5, AgentTimeout: 10 * time.Minute, AgentBudget: time.Hour,
			MergeMethods: []string{"squash", "merge", "rebase"},
		},
	}
}

func mustDecode(t *testing.T, s string) *File {
	t.Helper()
	f, err := Decode(Path, []byte(s))
	require.NoError(t, err)
	return f
}

func TestResolve_Precedence(t *testing.T) {
	t.Parallel()
	f := mustDecode(t, issueExample)
	tests := []struct {
		name   string
		file   *File
		branch string
		check  func(t *testing.T, e Effective)
	}{
		{
			name: "no file: every value is the operator's",
			check: func(t *testing.T, e Effective) {
				assert.False(t, e.File)
				for _, l := range e.Lines() {
					assert.Equal(t, FromOperator, l.From, l.Key)
				}
				assert.Equal(t, "squash", e.MergeMethod.V)
			},
		},
		{
			name: "file over operator defaults on main", file: f, branch: "main",
			check: func(t *testing.T, e Effective) {
				assert.Empty(t, e.Branch)
				assert.Equal(t, Value[[]string]{[]string{"alice", "@acme/core"}, FromFile}, e.Reviewers)
				assert.Equal(t, Value[string]{"squash", FromFile}, e.MergeMethod)
				assert.Equal(t, Value[bool]{true, FromFile}, e.DeleteBranch)
				assert.Equal(t, Value[time.Duration]{10 * time.Minute, FromOperator}, e.AgentTimeout, "not in the file")
				assert.Empty(t, e.Warnings)
			},
		},
		{
			name: "release/* override over the file", file: f, branch: "release/1.2",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, "release/*", e.Branch)
				assert.Equal(t, Value[string]{"merge", `branches."release/*"`}, e.MergeMethod)
				assert.Equal(t, Value[[]string]{[]string{"@acme/release"}, `branches."release/*"`}, e.Reviewers)
				assert.Equal(t, Value[[]string]{[]string{"ci", "lint"}, FromFile}, e.RequiredChecks, "what the override leaves out comes from the file")
			},
		},
		{
			name: "a glob's star does not cross a slash", file: f, branch: "release/1/hotfix",
			check: func(t *testing.T, e Effective) {
				assert.Empty(t, e.Branch)
				assert.Equal(t, "squash", e.MergeMethod.V)
			},
		},
		{
			name:   "the first matching override wins",
			file:   mustDecode(t, "version: 1\nbranches:\n  \"docs/*\": {merge: {method: rebase}}\n  \"*/*\": {merge: {method: merge}}\n"),
			branch: "docs/x",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[string]{"rebase", `branches."docs/*"`}, e.MergeMethod)
			},
		},
		{
			name: "an empty reviewer list means write permission, not the operator's list",
			file: mustDecode(t, "version: 1\nreview: {reviewers: []}\n"),
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[[]string]{[]string{}, FromFile}, e.Reviewers)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op := testOperator()
			op.Reviewers = []string{"operator-reviewer"}
			tt.check(t, Resolve(op, tt.file, tt.branch))
		})
	}
}

func TestResolve_Ceilings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     string
		ceilings func(*Ceilings)
		check    func(t *testing.T, e Effective)
		warnings []string
	}{
		{
			name: "fix cycles above the ceiling are cut",
			file: "version: 1\nfeedback: {max_fix_cycles: 9}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[int]{5, FromCeiling}, e.MaxFixCycles)
			},
			warnings: []string{"feedback.max_fix_cycles 9 is above the operator's ceiling (PRLOOP_MAX_FIX_CYCLES_CEILING=5); using 5"},
		},
		{
			name: "fix cycles at or below the ceiling stand",
			file: "version: 1\nfeedback: {max_fix_cycles: 5}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[int]{5, FromFile}, e.MaxFixCycles)
			},
		},
		{
			name: "agent time above the operator's is cut; below stands",
			file: "version: 1\nagent: {timeout: 1h, budget: 30m}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[time.Duration]{10 * time.Minute, FromCeiling}, e.AgentTimeout)
				assert.Equal(t, Value[time.Duration]{30 * time.Minute, FromFile}, e.AgentBudget)
			},
			warnings: []string{"agent.timeout 1h0m0s is above the operator's ceiling (PRLOOP_AGENT_TIMEOUT=10m0s); using 10m0s"},
		},
		{
			name: "the agent may not edit workflows unless the operator allows it",
			file: "version: 1\nagent: {may_edit_workflows: true}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[bool]{false, FromCeiling}, e.AgentMayEditWorkflows)
			},
			warnings: []string{"agent.may_edit_workflows true is above the operator's ceiling (PRLOOP_AGENT_MAY_EDIT_WORKFLOWS=false); using false"},
		},
		{
			name:     "an operator who allows workflow edits lets a file ask for them",
			file:     "version: 1\nagent: {may_edit_workflows: true}\n",
			ceilings: func(c *Ceilings) { c.AgentMayEditWorkflows = true },
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[bool]{true, FromFile}, e.AgentMayEditWorkflows)
			},
		},
		{
			name:     "a merge method the operator does not allow",
			file:     "version: 1\nbranches:\n  main: {merge: {method: rebase}}\n",
			ceilings: func(c *Ceilings) { c.MergeMethods = []string{"squash", "merge"} },
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[string]{"squash", FromCeiling}, e.MergeMethod)
			},
			warnings: []string{"merge.method rebase is not allowed by the operator (PRLOOP_MERGE_METHODS=squash,merge); using squash"},
		},
		{
			name: "the merge queue is the operator's",
			file: "version: 1\nmerge: {queue: {mode: speculative, depth: 8}}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[string]{"serial", FromCeiling}, e.QueueMode)
				assert.Equal(t, Value[int]{4, FromCeiling}, e.QueueDepth)
				assert.Equal(t, "ceiling: merge.queue.mode=serial, merge.queue.depth=4", e.CeilingNote())
			},
			warnings: []string{
				"merge.queue.mode speculative: the merge queue is the operator's to set (PRLOOP_QUEUE_MODE=serial); using serial",
				"merge.queue.depth 8: the merge queue is the operator's to set (PRLOOP_QUEUE_DEPTH=4); using 4",
			},
		},
		{
			name: "a file that names the operator's queue stands",
			file: "version: 1\nbranches:\n  main: {merge: {queue: {mode: serial, depth: 4}}}\n",
			check: func(t *testing.T, e Effective) {
				assert.Equal(t, Value[string]{"serial", `branches."main"`}, e.QueueMode)
				assert.Equal(t, Value[int]{4, `branches."main"`}, e.QueueDepth)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op := testOperator()
			if tt.ceilings != nil {
				tt.ceilings(&op.Ceilings)
			}
			e := Resolve(op, mustDecode(t, tt.file), "main")
			tt.check(t, e)
			assert.Equal(t, tt.warnings, e.Warnings)
			assert.Equal(t, len(tt.warnings) > 0, e.CeilingNote() != "", e.CeilingNote())
		})
	}
}

func TestFailed_KeepsTheProblemAndActsOnNothing(t *testing.T) {
	t.Parallel()
	_, err := Decode(Path, []byte("version: 1\nreview:\n  reviwers: []\n"))
	require.Error(t, err)
	e := Failed(testOperator(), err)
	assert.True(t, e.File)
	assert.Equal(t, err, e.Invalid)
	assert.Contains(t, e.Format(), `INVALID (nothing is merged and no agent runs): .github/prloop.yml:3: unknown key "reviwers"`)
}

// TestValue_Named: a message names the setting a person would change: the
// variable for the operator's value or ceiling, the file's key otherwise.
func TestValue_Named(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    Value[time.Duration]
		want string
	}{
		{name: "operator", v: Value[time.Duration]{time.Hour, FromOperator}, want: "PRLOOP_AGENT_BUDGET=1h0m0s"},
		{name: "ceiling", v: Value[time.Duration]{time.Hour, FromCeiling}, want: "PRLOOP_AGENT_BUDGET=1h0m0s"},
		{name: "file", v: Value[time.Duration]{time.Minute, FromFile}, want: "agent.budget: 1m0s in .github/prloop.yml"},
		{name: "branch override", v: Value[time.Duration]{time.Minute, `branches."release/*"`}, want: `branches."release/*".agent.budget: 1m0s in .github/prloop.yml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.v.Named("agent.budget", "PRLOOP_AGENT_BUDGET"))
		})
	}
}
