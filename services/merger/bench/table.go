package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/benchrun"
)

// Targets of issue #19 for the speculative queue at depth 4, as a multiple
// of the serial queue's merge rate: without failures, and with 10 % of
// PRs failing.
const (
	targetRatio     = 3.5
	targetRatioFail = 2.5
)

// figures are a result's numbers in modelled time, as the table shows them.
type figures struct {
	perHour, p50, p99, ciPerMerge float64
	// etaP50 and etaP90 are the median and 90th percentile of
	// |estimate − actual| in minutes; etaKnown how many merged PRs were
	// queued with a known estimate.
	etaP50, etaP90 float64
	etaKnown       int
	// perHourRealProcessing is the rate with the time no CI run was in
	// flight (the queue's own work: requests, git, polls) counted at real
	// speed instead of compressed: what the rate would be if processing
	// took the real seconds it took here rather than -compress times them.
	perHourRealProcessing float64
}

func (o options) figures(r result) figures {
	var f figures
	if modelled := r.span.Hours() * o.compress; modelled > 0 {
		f.perHour = float64(r.merged) / modelled
	}
	if modelled := r.ciBusy.Hours()*o.compress + (r.span - r.ciBusy).Hours(); modelled > 0 {
		f.perHourRealProcessing = float64(r.merged) / modelled
	}
	minutes := func(d time.Duration) float64 { return d.Minutes() * o.compress }
	f.p50 = minutes(benchrun.Percentile(r.latencies, 0.50))
	f.p99 = minutes(benchrun.Percentile(r.latencies, 0.99))
	if r.merged > 0 {
		f.ciPerMerge = float64(r.ciRuns) / float64(r.merged)
	}
	f.etaKnown = len(r.etaErrors)
	f.etaP50 = minutes(benchrun.Percentile(r.etaErrors, 0.50))
	f.etaP90 = minutes(benchrun.Percentile(r.etaErrors, 0.90))
	return f
}

// printTable prints the markdown table, serial and speculative side by
// side; the ratio is speculative ÷ serial.
func printTable(out io.Writer, o options, rs []result) {
	get := func(name string) *result {
		i := slices.IndexFunc(rs, func(r result) bool { return r.name == name })
		if i < 0 || rs[i].unavailable != "" {
			return nil
		}
		return &rs[i]
	}
	ser, spec := get("serial"), get("speculative")
	target := targetRatio
	if o.fail > 0 {
		target = targetRatioFail
	}
	fmt.Fprintf(out, "\nP=%d PRs on one base (after %d warm-up PRs), T=%s, f=%g (%d broken), flaky %g (%d), depth %d, approvals within %s; compressed %gx (CI ran %s), figures in modelled time\n\n",
		o.prs, o.warmup, o.ci, o.fail, brokenCount(rs), o.flaky, flakyCount(rs), o.depth, o.approveWithin, o.compress, o.real(o.ci).Round(time.Millisecond))
	row := func(cells ...string) {
		fmt.Fprintf(out, "| %-46s | %13s | %13s | %7s | %-30s |\n", cells[0], cells[1], cells[2], cells[3], cells[4])
	}
	row("metric", "serial", "speculative", "ratio", "target")
	fmt.Fprintf(out, "|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 48), strings.Repeat("-", 15), strings.Repeat("-", 15), strings.Repeat("-", 9), strings.Repeat("-", 32))
	num := func(r *result, f func(result) float64, format string) string {
		if r == nil {
			return "n/a"
		}
		return fmt.Sprintf(format, f(*r))
	}
	ratio := func(f func(result) float64) string {
		if ser == nil || spec == nil || f(*ser) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2fx", f(*spec)/f(*ser))
	}
	line := func(metric, target string, f func(result) float64, format string) {
		row(metric, num(ser, f, format), num(spec, f, format), ratio(f), target)
	}
	fig := func(pick func(figures) float64) func(result) float64 {
		return func(r result) float64 { return pick(o.figures(r)) }
	}
	line("PRs merged per hour per base branch", fmt.Sprintf("speculative ≥ %.1fx serial", target), fig(func(f figures) float64 { return f.perHour }), "%.2f")
	line("… the same, queue's processing not compressed", fmt.Sprintf("speculative ≥ %.1fx serial", target), fig(func(f figures) float64 { return f.perHourRealProcessing }), "%.2f")
	line("approval → merge p50 (minutes)", "", fig(func(f figures) float64 { return f.p50 }), "%.1f")
	line("approval → merge p99 (minutes)", "", fig(func(f figures) float64 { return f.p99 }), "%.1f")
	line("CI runs per merged PR", "", fig(func(f figures) float64 { return f.ciPerMerge }), "%.2f")
	line("merged PRs queued with a known ETA", "all (after -warmup)", fig(func(f figures) float64 { return float64(f.etaKnown) }), "%.0f")
	line("ETA error |estimate − actual| p50 (minutes)", "", fig(func(f figures) float64 { return f.etaP50 }), "%.1f")
	line("ETA error |estimate − actual| p90 (minutes)", "", fig(func(f figures) float64 { return f.etaP90 }), "%.1f")
	rerunTarget, flakyTarget := "", ""
	if o.flaky > 0 {
		rerunTarget = fmt.Sprintf("speculative: %d flaky + broken", flakyCount(rs))
		flakyTarget = fmt.Sprintf("speculative: %d (the flaky)", flakyCount(rs))
	}
	line("candidates re-run once (PRs)", rerunTarget, func(r result) float64 { return float64(r.reruns) }, "%.0f")
	line("… flaky: merged after the re-run", flakyTarget, func(r result) float64 { return float64(r.flaky) }, "%.0f")
	line("PRs merged", fmt.Sprintf("%d (all but the broken)", o.prs-brokenCount(rs)), func(r result) float64 { return float64(r.merged) }, "%.0f")
	line("PRs removed as failing (checks_failed)", "exactly the broken ones", func(r result) float64 { return float64(len(r.failedChecks)) }, "%.0f")
	line("merges of an untested tree", "0", func(r result) float64 { return float64(r.untested) }, "%.0f")
	line("… of a tree CI passed only after the merge", "0", func(r result) float64 { return float64(r.early) }, "%.0f")
	line("broken PRs merged", "0", func(r result) float64 { return float64(len(r.brokenMerged)) }, "%.0f")

	fmt.Fprintln(out)
	for _, r := range rs {
		switch {
		case r.unavailable != "":
			fmt.Fprintf(out, "- %s: not available: %s\n", r.name, r.unavailable)
			continue
		case r.incomplete != "":
			fmt.Fprintf(out, "- %s: incomplete: %s\n", r.name, r.incomplete)
		}
		fmt.Fprintf(out, "- %s: %s\n", r.name, strings.Join(r.verdicts(), "; "))
		if r.merged > 0 {
			fmt.Fprintf(out, "  - real time: %s from the first approval to the last merge, %.2f s per merge (one CI run: %.2f s); no CI run in flight for %s of it\n",
				r.span.Round(time.Millisecond), r.span.Seconds()/float64(r.merged), o.real(o.ci).Seconds(), (r.span - r.ciBusy).Round(time.Millisecond))
		}
		for _, n := range r.notes {
			fmt.Fprintf(out, "  - %s\n", n)
		}
	}
	if ser != nil && spec != nil {
		got := o.figures(*spec).perHour / o.figures(*ser).perHour
		verdict := "met"
		if got < target {
			verdict = "NOT met"
		}
		fmt.Fprintf(out, "- rate target (speculative ≥ %.1fx serial): %.2fx, %s\n", target, got, verdict)
	}
	fmt.Fprintf(out, "\nA merge \"of a tree CI passed only after the merge\" is wrong in both modes: in a speculative batch it would be\n"+
		"a PR merged on the strength of a later green candidate, before its own candidate reported (issue 28).\n")
	fmt.Fprintf(out, "\nProcessing is not compressed: each real second of GitHub requests, git and NATS counts %gs (%.1f min) of modelled time;\n"+
		"the second rate row counts the time no CI run was in flight at real speed instead.\n"+
		"The CI runs counted are the queue's: PR heads after update-branch and candidate branches, never main.\n"+
		"The ETA error compares the estimate each PR's PRMergeQueued announced with the time from that event to its PRMerged.\n", o.compress, o.compress/60)
	if o.flaky == 0 {
		fmt.Fprintf(out, "The simulated CI sets commit statuses, which no re-run repeats: no candidate is re-run here (-flaky makes some).\n")
		return
	}
	fmt.Fprintf(out, "The simulated CI reports a GitHub Actions job, %s, which the merger re-runs once when a candidate fails (PRLOOP_QUEUE_RETRY_FAILED);\n"+
		"a re-run takes T again. A flaky PR fails the first attempt of the commit that adds its FLAKY-<n> file, its speculative\n"+
		"candidate, and passes the re-run; a broken PR's candidate is re-run too, and fails again. Serial tests updated heads,\n"+
		"merges that add no file: no flaky failure there (serial re-runs nothing; a flaky head would leave the queue).\n", checkContext)
}

// verdicts says which of the run's correctness checks hold.
func (r result) verdicts() []string {
	var v []string
	removedOK := slices.Equal(r.failedChecks, r.broken)
	v = append(v, fmt.Sprintf("removed as failing %v, broken %v (%s)", r.failedChecks, r.broken, okIf(removedOK)))
	v = append(v, fmt.Sprintf("merges of an untested tree %d (%s)", r.untested, okIf(r.untested == 0)))
	if r.early > 0 {
		v = append(v, fmt.Sprintf("%d merges before CI passed their tree", r.early))
	}
	if r.foreign > 0 {
		v = append(v, fmt.Sprintf("%d commits on main no PR's merge made", r.foreign))
	}
	if len(r.brokenMerged) > 0 {
		v = append(v, fmt.Sprintf("broken PRs merged %v (WRONG)", r.brokenMerged))
	}
	for reason, prs := range r.others {
		v = append(v, fmt.Sprintf("left the queue with %s: %v", reason, prs))
	}
	if len(r.flakyPRs) > 0 {
		v = append(v, fmt.Sprintf("flaky %v: %d PRs' candidates re-run, %d of them merged", r.flakyPRs, r.reruns, r.flaky))
	}
	if r.candidateRuns > 0 || r.candidateEvents > 0 {
		v = append(v, fmt.Sprintf("%d of %d CI runs on candidates, %d PRMergeCandidate events", r.candidateRuns, r.ciRuns, r.candidateEvents))
	}
	return v
}

func okIf(b bool) string {
	if b {
		return "ok"
	}
	return "WRONG"
}

func brokenCount(rs []result) int {
	for _, r := range rs {
		return len(r.broken)
	}
	return 0
}

func flakyCount(rs []result) int {
	for _, r := range rs {
		return len(r.flakyPRs)
	}
	return 0
}
