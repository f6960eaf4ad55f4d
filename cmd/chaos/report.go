package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// report is what a run did and found.
type report struct {
	o options

	mu          sync.Mutex
	kills       map[string]int // by service
	windows     map[string]int // kills by window
	stops       map[string]int
	nodeLosses  int
	stepDowns   map[string]int
	githubFault map[string]int
	outcomes    map[string]map[string]int // scenario -> terminal -> count
	violations  []string
	notes       []string
	wall        time.Duration
	lifecycles  int
	probeAcked  int
	events      int
}

func newReport(o options) *report {
	return &report{o: o, kills: map[string]int{}, windows: map[string]int{}, stops: map[string]int{}, stepDowns: map[string]int{},
		githubFault: map[string]int{}, outcomes: map[string]map[string]int{}}
}

func (r *report) faultList() string {
	var fs []string
	for _, f := range faultKinds {
		if r.o.faults[f] {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return "none"
	}
	return strings.Join(fs, ",")
}

func (r *report) countKill(service, window string) {
	r.mu.Lock()
	r.kills[service]++
	r.windows[window]++
	r.mu.Unlock()
}

func (r *report) countStop(service string) {
	r.mu.Lock()
	r.stops[service]++
	r.mu.Unlock()
}

func (r *report) countNodeLoss() {
	r.mu.Lock()
	r.nodeLosses++
	r.mu.Unlock()
}

func (r *report) countStepDown(stream string) {
	r.mu.Lock()
	r.stepDowns[stream]++
	r.mu.Unlock()
}

// violate records a broken invariant about a PR ("" for the whole run).
func (r *report) violate(invariant, pr, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pr != "" {
		detail = pr + ": " + detail
	}
	r.violations = append(r.violations, invariant+": "+detail)
}

// violationCount is the number of broken invariants recorded so far.
func (r *report) violationCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.violations)
}

func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (r *report) print(out io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(out, "\n== chaos report (seed %d)\n", r.o.seed)
	fmt.Fprintf(out, "command:        go run ./cmd/chaos -seed %d -prs %d -repos %d -faults %s -duration-limit %s%s\n",
		r.o.seed, r.o.prs, r.o.repos, r.faultList(), r.o.durationLimit, map[bool]string{true: " -short"}[r.o.short])
	fmt.Fprintf(out, "lifecycles:     %d (wall time %s, %d events)\n", r.lifecycles, r.wall.Round(time.Second), r.events)
	for _, s := range slices.Sorted(maps.Keys(r.outcomes)) {
		fmt.Fprintf(out, "  %-20s %s\n", s, counts(r.outcomes[s]))
	}
	fmt.Fprintf(out, "kills:          %d by service (%s); by window (%s)\n", sum(r.kills), counts(r.kills), counts(r.windows))
	fmt.Fprintf(out, "pauses:         %d past the lease TTL (%s)\n", sum(r.stops), counts(r.stops))
	fmt.Fprintf(out, "node losses:    %d; leader step-downs %d (%s)\n", r.nodeLosses, sum(r.stepDowns), counts(r.stepDowns))
	fmt.Fprintf(out, "github faults:  %d (%s)\n", sum(r.githubFault), counts(r.githubFault))
	fmt.Fprintf(out, "probe:          %d acknowledged publishes checked after node loss\n", r.probeAcked)
	for _, n := range r.notes {
		fmt.Fprintln(out, "note:", n)
	}
	fmt.Fprintf(out, "violations:     %d\n", len(r.violations))
	for _, v := range r.violations {
		fmt.Fprintln(out, "  VIOLATION", v)
	}
}
