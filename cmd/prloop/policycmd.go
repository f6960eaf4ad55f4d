package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// errInvalidPolicy is prloop policy check's answer to a file with
// problems (already printed, one a line).
var errInvalidPolicy = errors.New("invalid policy file")

// runPolicy is `prloop policy check [FILE]`: the same decoding and
// validation the services apply to a base's .github/prloop.yml, and the
// effective policy under this environment's PRLOOP_* settings.
func runPolicy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "Usage: prloop policy check [-branch main] [-json] [FILE]")
		return fmt.Errorf("%w: want 'prloop policy check [FILE]'", errUsage)
	}
	fs := flag.NewFlagSet("prloop policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	branch := fs.String("branch", "main", "the base branch whose overrides apply")
	asJSON := fs.Bool("json", false, "print the effective policy as JSON")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: prloop policy check [-branch main] [-json] [FILE]

Checks a repository policy file (default %s) with the code prloop runs,
and prints the effective policy on -branch: each value and where it came
from (file, branch override, operator default, ceiling), under the PRLOOP_*
settings of this environment. Exits 1 with every problem, as
file:line: message, when the file is invalid.

`, policy.Path)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	name := policy.Path
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: one file at most", errUsage)
	} else if fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read policy: %w", err)
	}
	op, err := operatorFromEnv()
	if err != nil {
		return err
	}
	f, err := policy.Decode(name, data)
	if inv, ok := policy.AsInvalid(err); ok {
		for _, p := range inv.Problems {
			fmt.Fprintln(stdout, p.Error())
		}
		return fmt.Errorf("%w: %d problem(s) in %s", errInvalidPolicy, len(inv.Problems), name)
	}
	e := policy.Resolve(op, f, *branch)
	if *asJSON {
		return writePolicyJSON(stdout, e)
	}
	fmt.Fprintf(stdout, "%s: valid; effective policy on %s%s:\n", name, *branch, overrideNote(e))
	_, err = io.WriteString(stdout, e.Format())
	return err
}

func overrideNote(e policy.Effective) string {
	if e.Branch == "" {
		return ""
	}
	return fmt.Sprintf(" (override %q)", e.Branch)
}

// policyJSON is an effective policy as JSON: each setting's value and
// source, the warnings, and the problem of an invalid file.
type policyJSON struct {
	Invalid  string        `json:"invalid,omitempty"`
	Branch   string        `json:"override,omitempty"`
	Settings []policy.Line `json:"settings"`
	Warnings []string      `json:"warnings,omitempty"`
}

func policyView(e policy.Effective) policyJSON {
	v := policyJSON{Branch: e.Branch, Settings: e.Lines(), Warnings: e.Warnings}
	if e.Invalid != nil {
		v.Invalid = e.Invalid.Error()
	}
	return v
}

func writePolicyJSON(w io.Writer, e policy.Effective) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(policyView(e))
}

// operatorFromEnv is the operator's side of every policy: the defaults
// and ceilings the services read from this environment's PRLOOP_*
// settings, each from the service that owns it. Only filled, not
// validated: checking a file needs no credentials.
func operatorFromEnv() (policy.Operator, error) {
	var c allConfig
	for _, cfg := range []any{&c.Poller, &c.Feedback, &c.Merger, &c.Escalator} {
		if err := envconfig.Process("", cfg); err != nil {
			return policy.Operator{}, fmt.Errorf("read the PRLOOP_* settings: %w", err)
		}
	}
	return operatorOf(c.Poller, c.Feedback, c.Merger, c.Escalator), nil
}

// operatorOf joins the services' settings into one Operator.
func operatorOf(p poller.Config, fb feedback.Config, m merger.Config, e escalator.Config) policy.Operator {
	op := policy.FromReview(p.PolicyConfig)
	op.ReviewTimeout, op.MaxFixCycles, op.FixChecks = p.ReviewTimeout, fb.MaxFixCycles, p.FixChecksMode()
	op.AgentTimeout, op.AgentBudget, op.AgentMayEditWorkflows = fb.AgentTimeout, fb.AgentBudget, fb.AgentMayEditWorkflows
	op.MergeMethod, op.RequiredChecks, op.QueueMode, op.QueueDepth = m.MergeMethod, m.RequiredChecks, m.QueueMode, m.QueueDepth
	op.DeleteBranch, op.EscalationLabel, op.Mentions = m.DeleteBranch, e.Label, e.Mentions
	op.Ceilings = policy.Ceilings{
		MaxFixCycles: p.MaxFixCyclesCeiling, MergeMethods: m.MergeMethods,
		AgentTimeout: fb.AgentTimeout, AgentBudget: fb.AgentBudget, AgentMayEditWorkflows: fb.AgentMayEditWorkflows,
	}
	return op
}

// explainPolicy is the effective policy of pr as its base on GitHub says
// now (nil with why when GitHub cannot be asked), for prloop explain.
func explainPolicy(ctx context.Context, pr ghref.PR, live *liveState) (*policyJSON, string) {
	if live == nil {
		return nil, "GitHub was not asked"
	}
	op, err := operatorFromEnv()
	if err != nil {
		return nil, err.Error()
	}
	c, err := cliGitHub(ctx)
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := policy.NewReader(op, policy.Settings{RepoPolicy: true, MaxFixCyclesCeiling: op.Ceilings.MaxFixCycles, MergeMethods: op.Ceilings.MergeMethods}, c, nil)
	e, _, err := r.At(ctx, pr.RepoRef(), live.Base, live.Head)
	if err != nil {
		return nil, err.Error()
	}
	v := policyView(e)
	return &v, ""
}

// printPolicy writes explain's policy section.
func printPolicy(w io.Writer, p *policyJSON, skipped string) {
	fmt.Fprintf(w, "\nPolicy (%s on the base's tip, then PRLOOP_* settings)\n", policy.Path)
	if p == nil {
		fmt.Fprintf(w, "  skipped: %s\n", skipped)
		return
	}
	if p.Invalid != "" {
		fmt.Fprintf(w, "  INVALID: %s (nothing is merged and no agent runs)\n", p.Invalid)
	}
	if p.Branch != "" {
		fmt.Fprintf(w, "  override: branches.%q\n", p.Branch)
	}
	for _, l := range p.Settings {
		fmt.Fprintf(w, "  %-30s %-30s (%s)\n", l.Key, l.Value, l.From)
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
}
