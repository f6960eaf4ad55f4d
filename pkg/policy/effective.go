package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Operator is what the operator's PRLOOP_* settings say: the defaults for
// everything a file leaves out, and the Ceilings no file can exceed. Each
// service fills in the settings it has; the values it does not use may
// stay zero.
type Operator struct {
	Protocols            []string
	Reviewers            []string
	Quorum               []string
	ApprovalSurvivesPush bool
	ReviewTimeout        time.Duration

	MaxFixCycles int
	FixChecks    string

	AgentTimeout          time.Duration
	AgentBudget           time.Duration
	AgentMayEditWorkflows bool

	MergeMethod    string
	RequiredChecks []string
	QueueMode      string
	QueueDepth     int
	DeleteBranch   bool
	// PriorityLabel is PRLOOP_PRIORITY_LABEL: the label that puts a queued
	// PR ahead of the others.
	PriorityLabel string

	EscalationLabel string
	Mentions        []string

	Ceilings Ceilings
}

// Ceilings are the limits a repository's file cannot exceed: a value
// above one is cut to it, with a warning on the PR's status line.
type Ceilings struct {
	// MaxFixCycles caps feedback.max_fix_cycles (PRLOOP_MAX_FIX_CYCLES_CEILING).
	MaxFixCycles int
	// AgentTimeout and AgentBudget cap agent.timeout and agent.budget: the
	// operator's PRLOOP_AGENT_TIMEOUT and PRLOOP_AGENT_BUDGET.
	AgentTimeout time.Duration
	AgentBudget  time.Duration
	// AgentMayEditWorkflows is PRLOOP_AGENT_MAY_EDIT_WORKFLOWS: when false, a
	// file cannot let the agent change workflows.
	AgentMayEditWorkflows bool
	// MergeMethods are the methods a file may choose (PRLOOP_MERGE_METHODS;
	// empty: every method).
	MergeMethods []string
}

// Source is where an effective value came from.
type Source string

// The sources of a value other than a branch override (whose Source names
// its glob: `branches."release/*"`).
const (
	FromOperator Source = "operator default"
	FromFile     Source = "file"
	FromCeiling  Source = "ceiling"
)

// Value is one effective setting and its source.
type Value[T any] struct {
	V    T
	From Source
}

// Named says where v was set, for a message that names the setting a
// person would change: "PRLOOP_AGENT_BUDGET=1h0m0s" for the operator's
// value or ceiling, "agent.budget: 5m0s in .github/prloop.yml" for the
// file's, and with the override's glob for a branch override's.
func (v Value[T]) Named(key, env string) string {
	switch v.From {
	case FromOperator, FromCeiling:
		return fmt.Sprintf("%s=%v", env, v.V)
	case FromFile:
		return fmt.Sprintf("%s: %v in %s", key, v.V, Path)
	}
	return fmt.Sprintf("%s.%s: %v in %s", v.From, key, v.V, Path)
}

// Effective is the policy one PR is held to: the base's file and the
// override for its base branch over the operator's defaults, cut to the
// ceilings. Invalid, when set, says the base's file is wrong and the
// repository fails closed on that base: nothing is merged and no agent
// runs (watching and the status line go on).
type Effective struct {
	// File says whether the base has a policy file; Branch is the glob of
	// the override that applied ("" for none).
	File   bool
	Branch string
	// Invalid is the base's file's problems (an *Invalid), or nil.
	Invalid error

	Protocols            Value[[]string]
	Reviewers            Value[[]string]
	Quorum               Value[[]string]
	ApprovalSurvivesPush Value[bool]
	ReviewTimeout        Value[time.Duration]

	MaxFixCycles Value[int]
	FixChecks    Value[string]

	AgentTimeout          Value[time.Duration]
	AgentBudget           Value[time.Duration]
	AgentMayEditWorkflows Value[bool]

	MergeMethod    Value[string]
	RequiredChecks Value[[]string]
	QueueMode      Value[string]
	QueueDepth     Value[int]
	DeleteBranch   Value[bool]
	PriorityLabel  Value[string]

	EscalationLabel Value[string]
	Mentions        Value[[]string]

	// Warnings say where a ceiling cut what the file asked for.
	Warnings []string
}

// Failed returns the effective policy of a base whose file is invalid:
// the operator's defaults for showing, and Invalid set, so that nothing
// acts on it.
func Failed(op Operator, err error) Effective {
	e := Resolve(op, nil, "")
	e.File, e.Invalid = true, err
	return e
}

// Resolve is the effective policy on base branch branch of a repository
// whose base has file f (nil: no file). The first override whose glob
// matches branch applies over the file's sections; the ceilings apply last.
// It is pure.
func Resolve(op Operator, f *File, branch string) Effective {
	e := Effective{
		File:                  f != nil,
		Protocols:             Value[[]string]{slices.Clone(op.Protocols), FromOperator},
		Reviewers:             Value[[]string]{slices.Clone(op.Reviewers), FromOperator},
		Quorum:                Value[[]string]{slices.Clone(op.Quorum), FromOperator},
		ApprovalSurvivesPush:  Value[bool]{op.ApprovalSurvivesPush, FromOperator},
		ReviewTimeout:         Value[time.Duration]{op.ReviewTimeout, FromOperator},
		MaxFixCycles:          Value[int]{op.MaxFixCycles, FromOperator},
		FixChecks:             Value[string]{op.FixChecks, FromOperator},
		AgentTimeout:          Value[time.Duration]{op.AgentTimeout, FromOperator},
		AgentBudget:           Value[time.Duration]{op.AgentBudget, FromOperator},
		AgentMayEditWorkflows: Value[bool]{op.AgentMayEditWorkflows, FromOperator},
		MergeMethod:           Value[string]{op.MergeMethod, FromOperator},
		RequiredChecks:        Value[[]string]{slices.Clone(op.RequiredChecks), FromOperator},
		QueueMode:             Value[string]{op.QueueMode, FromOperator},
		QueueDepth:            Value[int]{op.QueueDepth, FromOperator},
		DeleteBranch:          Value[bool]{op.DeleteBranch, FromOperator},
		PriorityLabel:         Value[string]{op.PriorityLabel, FromOperator},
		EscalationLabel:       Value[string]{op.EscalationLabel, FromOperator},
		Mentions:              Value[[]string]{slices.Clone(op.Mentions), FromOperator},
	}
	if f == nil {
		return e
	}
	e.apply(f.Section, FromFile)
	if b, ok := f.Branches.Match(branch); ok {
		e.Branch = b.Glob
		e.apply(b.Section, Source(fmt.Sprintf("branches.%q", b.Glob)))
	}
	e.cut(op.Ceilings)
	e.cutQueue(op)
	return e
}

// Match returns the first override whose glob matches branch.
func (bs Branches) Match(branch string) (Branch, bool) {
	for _, b := range bs {
		if ok, _ := path.Match(b.Glob, branch); ok {
			return b, true
		}
	}
	return Branch{}, false
}

// apply lays the values s sets over e.
func (e *Effective) apply(s Section, from Source) {
	if r := s.Review; r != nil {
		if r.Protocols != nil {
			e.Protocols = Value[[]string]{slices.Clone(r.Protocols), from}
		}
		if r.Reviewers != nil {
			e.Reviewers = Value[[]string]{slices.Clone(*r.Reviewers), from}
		}
		if r.Quorum != nil {
			e.Quorum = Value[[]string]{slices.Clone(r.Quorum), from}
		}
		setPtr(&e.ApprovalSurvivesPush, r.ApprovalSurvivesPush, from)
		if r.Timeout != nil {
			e.ReviewTimeout = Value[time.Duration]{time.Duration(*r.Timeout), from}
		}
	}
	if fb := s.Feedback; fb != nil {
		setPtr(&e.MaxFixCycles, fb.MaxFixCycles, from)
		setStr(&e.FixChecks, fb.FixChecks, from)
	}
	if a := s.Agent; a != nil {
		if a.Timeout != nil {
			e.AgentTimeout = Value[time.Duration]{time.Duration(*a.Timeout), from}
		}
		if a.Budget != nil {
			e.AgentBudget = Value[time.Duration]{time.Duration(*a.Budget), from}
		}
		setPtr(&e.AgentMayEditWorkflows, a.MayEditWorkflows, from)
	}
	if m := s.Merge; m != nil {
		setStr(&e.MergeMethod, m.Method, from)
		if m.RequiredChecks != nil {
			e.RequiredChecks = Value[[]string]{slices.Clone(*m.RequiredChecks), from}
		}
		if q := m.Queue; q != nil {
			setStr(&e.QueueMode, q.Mode, from)
			setPtr(&e.QueueDepth, q.Depth, from)
		}
		setPtr(&e.DeleteBranch, m.DeleteBranch, from)
		setStr(&e.PriorityLabel, m.PriorityLabel, from)
	}
	if es := s.Escalation; es != nil {
		setStr(&e.EscalationLabel, es.Label, from)
		if es.Mentions != nil {
			e.Mentions = Value[[]string]{slices.Clone(*es.Mentions), from}
		}
	}
}

func setPtr[T any](v *Value[T], p *T, from Source) {
	if p != nil {
		*v = Value[T]{*p, from}
	}
}

func setStr(v *Value[string], s string, from Source) {
	if s != "" {
		*v = Value[string]{s, from}
	}
}

// cut applies the ceilings to the values a file set, with a warning for
// each one it lowered. The operator's own defaults are not cut: they are
// the operator's to set.
func (e *Effective) cut(c Ceilings) {
	fromFile := func(s Source) bool { return s != FromOperator && s != FromCeiling }
	if fromFile(e.MaxFixCycles.From) && e.MaxFixCycles.V > c.MaxFixCycles {
		e.warn("feedback.max_fix_cycles", fmt.Sprint(e.MaxFixCycles.V), fmt.Sprint(c.MaxFixCycles), "PRLOOP_MAX_FIX_CYCLES_CEILING")
		e.MaxFixCycles = Value[int]{c.MaxFixCycles, FromCeiling}
	}
	if fromFile(e.AgentTimeout.From) && c.AgentTimeout > 0 && e.AgentTimeout.V > c.AgentTimeout {
		e.warn("agent.timeout", e.AgentTimeout.V.String(), c.AgentTimeout.String(), "PRLOOP_AGENT_TIMEOUT")
		e.AgentTimeout = Value[time.Duration]{c.AgentTimeout, FromCeiling}
	}
	if fromFile(e.AgentBudget.From) && c.AgentBudget > 0 && e.AgentBudget.V > c.AgentBudget {
		e.warn("agent.budget", e.AgentBudget.V.String(), c.AgentBudget.String(), "PRLOOP_AGENT_BUDGET")
		e.AgentBudget = Value[time.Duration]{c.AgentBudget, FromCeiling}
	}
	if fromFile(e.AgentMayEditWorkflows.From) && e.AgentMayEditWorkflows.V && !c.AgentMayEditWorkflows {
		e.warn("agent.may_edit_workflows", "true", "false", "PRLOOP_AGENT_MAY_EDIT_WORKFLOWS")
		e.AgentMayEditWorkflows = Value[bool]{false, FromCeiling}
	}
	if fromFile(e.MergeMethod.From) && len(c.MergeMethods) > 0 && !slices.Contains(c.MergeMethods, e.MergeMethod.V) {
		allowed := c.MergeMethods[0]
		e.Warnings = append(e.Warnings, fmt.Sprintf("merge.method %s is not allowed by the operator (PRLOOP_MERGE_METHODS=%s); using %s",
			e.MergeMethod.V, strings.Join(c.MergeMethods, ","), allowed))
		e.MergeMethod = Value[string]{allowed, FromCeiling}
	}
}

// cutQueue holds merge.queue to the operator's queue: the merger runs one
// queue per base in the mode PRLOOP_QUEUE_MODE says, with
// PRLOOP_QUEUE_DEPTH, for every repository. A file that asks for another
// mode or depth gets the operator's, with a warning, rather than a
// setting shown as applied that is not. (A queue that changed mode between
// two passes would leave the speculative queue's candidates and their
// branches behind, and speculative's own conditions are checked once, at
// start, on the operator's settings.) A service that does not know the
// operator's queue (QueueMode "") leaves the file's values.
func (e *Effective) cutQueue(op Operator) {
	fromFile := func(s Source) bool { return s != FromOperator && s != FromCeiling }
	if fromFile(e.QueueMode.From) && op.QueueMode != "" && e.QueueMode.V != op.QueueMode {
		e.operatorOnly("merge.queue.mode", e.QueueMode.V, op.QueueMode, "PRLOOP_QUEUE_MODE")
		e.QueueMode = Value[string]{op.QueueMode, FromCeiling}
	}
	if fromFile(e.QueueDepth.From) && op.QueueDepth > 0 && e.QueueDepth.V != op.QueueDepth {
		e.operatorOnly("merge.queue.depth", fmt.Sprint(e.QueueDepth.V), fmt.Sprint(op.QueueDepth), "PRLOOP_QUEUE_DEPTH")
		e.QueueDepth = Value[int]{op.QueueDepth, FromCeiling}
	}
}

func (e *Effective) operatorOnly(key, asked, operator, env string) {
	e.Warnings = append(e.Warnings, fmt.Sprintf("%s %s: the merge queue is the operator's to set (%s=%s); using %s", key, asked, env, operator, operator))
}

// CeilingNote is the short form of the warnings, for a status line:
// "ceiling: feedback.max_fix_cycles=3, merge.method=squash"; "" when no
// ceiling cut anything.
func (e Effective) CeilingNote() string {
	var cut []string
	for _, l := range e.Lines() {
		if l.From == FromCeiling {
			cut = append(cut, l.Key+"="+l.Value)
		}
	}
	if len(cut) == 0 {
		return ""
	}
	return "ceiling: " + strings.Join(cut, ", ")
}

func (e *Effective) warn(key, asked, ceiling, env string) {
	e.Warnings = append(e.Warnings, fmt.Sprintf("%s %s is above the operator's ceiling (%s=%s); using %s", key, asked, env, ceiling, ceiling))
}

// Line is one effective setting for people: its key, value and source.
type Line struct {
	Key   string
	Value string
	From  Source
}

// Lines lists every effective setting in the file's order, for
// `prloop policy check` and `prloop explain`.
func (e Effective) Lines() []Line {
	list := func(v []string) string {
		if len(v) == 0 {
			return "[]"
		}
		return "[" + strings.Join(v, ", ") + "]"
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return "none"
		}
		return d.String()
	}
	return []Line{
		{"review.protocols", list(e.Protocols.V), e.Protocols.From},
		{"review.reviewers", list(e.Reviewers.V), e.Reviewers.From},
		{"review.quorum", list(e.Quorum.V), e.Quorum.From},
		{"review.approval_survives_push", fmt.Sprint(e.ApprovalSurvivesPush.V), e.ApprovalSurvivesPush.From},
		{"review.timeout", dur(e.ReviewTimeout.V), e.ReviewTimeout.From},
		{"feedback.max_fix_cycles", fmt.Sprint(e.MaxFixCycles.V), e.MaxFixCycles.From},
		{"feedback.fix_checks", e.FixChecks.V, e.FixChecks.From},
		{"agent.timeout", dur(e.AgentTimeout.V), e.AgentTimeout.From},
		{"agent.budget", dur(e.AgentBudget.V), e.AgentBudget.From},
		{"agent.may_edit_workflows", fmt.Sprint(e.AgentMayEditWorkflows.V), e.AgentMayEditWorkflows.From},
		{"merge.method", e.MergeMethod.V, e.MergeMethod.From},
		{"merge.required_checks", list(e.RequiredChecks.V), e.RequiredChecks.From},
		{"merge.queue.mode", e.QueueMode.V, e.QueueMode.From},
		{"merge.queue.depth", fmt.Sprint(e.QueueDepth.V), e.QueueDepth.From},
		{"merge.delete_branch", fmt.Sprint(e.DeleteBranch.V), e.DeleteBranch.From},
		{"merge.priority_label", e.PriorityLabel.V, e.PriorityLabel.From},
		{"escalation.label", e.EscalationLabel.V, e.EscalationLabel.From},
		{"escalation.mentions", list(e.Mentions.V), e.Mentions.From},
	}
}

// Format writes the effective policy as aligned "key  value  (source)"
// lines, then its warnings.
func (e Effective) Format() string {
	var b strings.Builder
	if e.Invalid != nil {
		fmt.Fprintf(&b, "INVALID (nothing is merged and no agent runs): %v\n", e.Invalid)
	}
	for _, l := range e.Lines() {
		fmt.Fprintf(&b, "%-30s %-30s (%s)\n", l.Key, l.Value, l.From)
	}
	for _, w := range e.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}
