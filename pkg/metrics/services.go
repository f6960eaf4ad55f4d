package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prloop/prloop/pkg/events"
)

// Results of a poller probe (one conditional list of a repository's open
// PRs and issues).
const (
	ProbeUnchanged = "unchanged" // both lists answered 304: nothing to look at
	ProbeChanged   = "changed"
	ProbeError     = "error"
)

// What made the poller evaluate a PR.
const (
	TriggerProbe = "probe" // the probe saw the PR's summary change
	TriggerKick  = "kick"  // a webhook or another service's event
)

// Poller is the poller service's metrics.
type Poller struct {
	// Consumer counts the poller consumer's deliveries.
	Consumer    *Consumer
	probes      *prometheus.CounterVec
	evaluations *prometheus.CounterVec
	transitions *prometheus.CounterVec
	flaky       *prometheus.CounterVec
}

// NewPoller creates (or finds) the poller's metrics on reg.
func NewPoller(reg prometheus.Registerer) *Poller {
	p := &Poller{
		Consumer: NewConsumer(reg),
		probes: counterVec(reg, "poller_probes_total",
			"Repository probes (the two conditional list requests per repository and interval), by result: "+
				"unchanged (both 304), changed, error.", "result"),
		evaluations: counterVec(reg, "poller_evaluations_total",
			"PR evaluations (review signals read and decided on), by trigger (probe, kick) and result (ok, error).",
			"trigger", "result"),
		transitions: counterVec(reg, "transitions_total",
			"Review-state transitions the poller published, by event type.", "type"),
		flaky: counterVec(reg, "poller_flaky_check_passes_total",
			"Heads whose failing checks (PRChecksFailed) passed later on the same head, after a re-run: flaky failures the agent never saw."),
	}
	for _, r := range []string{ProbeUnchanged, ProbeChanged, ProbeError} {
		p.probes.WithLabelValues(r)
	}
	return p
}

// Probe counts one probe by result (ProbeUnchanged, ProbeChanged, ProbeError).
func (p *Poller) Probe(result string) { p.probes.WithLabelValues(result).Inc() }

// Evaluation counts one evaluation of a PR.
func (p *Poller) Evaluation(trigger string, err error) {
	p.evaluations.WithLabelValues(trigger, resultOf(err)).Inc()
}

// Transition counts one published transition (not a republished duplicate).
func (p *Poller) Transition(t events.Type) { p.transitions.WithLabelValues(typeLabel(t)).Inc() }

// FlakyPass counts a head whose published failing checks passed later.
func (p *Poller) FlakyPass() { p.flaky.WithLabelValues().Inc() }

// Outcomes of a feedback attempt, as prloop_feedback_attempts_total labels
// them. The first four are the feedback service's own outcomes.
const (
	FeedbackAddressed = "addressed" // a fix was pushed
	FeedbackEscalated = "escalated" // a human was asked for instead
	FeedbackSkipped   = "skipped"   // nothing to do (closed, stale, no feedback left)
	FeedbackDuplicate = "duplicate" // a redelivery of a handled change request
	FeedbackBusy      = "busy"      // another attempt holds the PR; retried later
	FeedbackError     = "error"     // GitHub, NATS or an interruption; retried later
)

// Results of one agent run, as prloop_feedback_agent_runs_total labels them.
const (
	AgentFixed     = "fixed"     // the branch moved to a descendant
	AgentFailed    = "failed"    // the agent exited non-zero or timed out
	AgentNoChange  = "no_change" // it changed nothing
	AgentGitError  = "git_error" // committing or pushing its work failed
	AgentRewritten = "rewritten" // it rewrote history; prloop does not force-push
	AgentRefused   = "refused"   // its work changes workflows or is over a size bound
	AgentError     = "error"     // GitHub or NATS failed while checking its work
)

// attemptBuckets span a skipped change request (a second) to agent runs
// with retries (an hour and more).
var attemptBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// Feedback is the feedback service's metrics.
type Feedback struct {
	// Consumer counts the feedback consumer's deliveries.
	Consumer  *Consumer
	attempts  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	agentRuns *prometheus.CounterVec
	reruns    *prometheus.CounterVec
	// Agent is what the agent presets' streams report.
	Agent *Agent
}

// NewFeedback creates (or finds) the feedback service's metrics on reg.
func NewFeedback(reg prometheus.Registerer) *Feedback {
	f := &Feedback{
		Consumer: NewConsumer(reg),
		attempts: counterVec(reg, "feedback_attempts_total",
			"Change requests worked on, by outcome: addressed, escalated, skipped, duplicate, busy (another attempt holds the PR), "+
				"error (retried later).", "outcome"),
		duration: histogramVec(reg, "feedback_attempt_duration_seconds",
			"How long working on one change request took, agent runs included, by outcome.", attemptBuckets, "outcome"),
		agentRuns: counterVec(reg, "feedback_agent_runs_total",
			"Coding agent runs, by result: fixed, failed, no_change, git_error, rewritten, error.", "result"),
		reruns: counterVec(reg, "feedback_check_reruns_total",
			"GitHub Actions runs whose failed jobs prloop re-ran before asking the agent (PRLOOP_RERUN_FAILED_CHECKS)."),
		Agent: NewAgent(reg),
	}
	for _, o := range []string{FeedbackAddressed, FeedbackEscalated, FeedbackSkipped, FeedbackDuplicate, FeedbackBusy, FeedbackError} {
		f.attempts.WithLabelValues(o)
	}
	for _, r := range []string{AgentFixed, AgentFailed, AgentNoChange, AgentGitError, AgentRewritten, AgentError} {
		f.agentRuns.WithLabelValues(r)
	}
	return f
}

// Attempt counts one change request worked on and how long it took.
func (f *Feedback) Attempt(outcome string, d time.Duration) {
	f.attempts.WithLabelValues(outcome).Inc()
	f.duration.WithLabelValues(outcome).Observe(d.Seconds())
}

// AgentRun counts one agent run by result.
func (f *Feedback) AgentRun(result string) { f.agentRuns.WithLabelValues(result).Inc() }

// CheckRerun counts one workflow run whose failed jobs were re-run.
func (f *Feedback) CheckRerun() { f.reruns.WithLabelValues().Inc() }

// How a PR left the merge queue, as prloop_merge_results_total labels it.
const (
	MergeMerged          = "merged"
	MergeDryRun          = "dry_run"          // PRLOOP_DRY_RUN: would have merged
	MergeFailed          = "failed"           // gave up; a human was asked for
	MergeDropped         = "dropped"          // closed, head moved, or gone
	MergeMergedElsewhere = "merged_elsewhere" // someone else merged it
)

// Queue names one merge queue: a repository ("owner/name") and base branch.
type Queue struct {
	Repo, Base string
}

// Merger is the merger service's metrics.
type Merger struct {
	// Consumer counts the merger consumer's deliveries.
	Consumer *Consumer
	depth    *prometheus.GaugeVec
	results  *prometheus.CounterVec
	reruns   *prometheus.CounterVec

	mu   sync.Mutex
	seen map[Queue]bool
}

// NewMerger creates (or finds) the merger's metrics on reg.
func NewMerger(reg prometheus.Registerer) *Merger {
	m := &Merger{
		Consumer: NewConsumer(reg),
		depth: gaugeVec(reg, "merge_queue_depth",
			"PRs in a merge queue (the one being merged included), by repository and base branch, as this replica last read them.",
			"repo", "base"),
		results: counterVec(reg, "merge_results_total",
			"PRs that left the merge queue, by result: merged, dry_run, failed, dropped, merged_elsewhere.", "result"),
		reruns: counterVec(reg, "merge_candidate_reruns_total",
			"Failed speculative candidates whose failed GitHub Actions jobs were re-run once (PRLOOP_QUEUE_RETRY_FAILED), by result: "+
				"rerun (asked of GitHub), flaky (the candidate passed on the re-run).", "result"),
		seen: map[Queue]bool{},
	}
	for _, r := range []string{MergeMerged, MergeDryRun, MergeFailed, MergeDropped, MergeMergedElsewhere} {
		m.results.WithLabelValues(r)
	}
	for _, r := range []string{RerunAsked, RerunFlaky} {
		m.reruns.WithLabelValues(r)
	}
	return m
}

// QueueDepths records the depth of every non-empty queue; queues seen
// before and missing now are empty, and drop to 0.
func (m *Merger) QueueDepths(depths map[Queue]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.seen {
		if _, ok := depths[q]; !ok {
			m.depth.WithLabelValues(q.Repo, q.Base).Set(0)
		}
	}
	for q, n := range depths {
		m.seen[q] = true
		m.depth.WithLabelValues(q.Repo, q.Base).Set(float64(n))
	}
}

// Result counts one PR leaving the queue.
func (m *Merger) Result(result string) { m.results.WithLabelValues(result).Inc() }

// Results of a failed candidate's re-run, as
// prloop_merge_candidate_reruns_total labels them.
const (
	RerunAsked = "rerun" // its failed jobs were re-run
	RerunFlaky = "flaky" // it passed on the re-run
)

// CandidateRerun counts a failed candidate's re-run by result.
func (m *Merger) CandidateRerun(result string) { m.reruns.WithLabelValues(result).Inc() }

// Escalator is the escalator service's metrics.
type Escalator struct {
	// Consumer counts the escalator consumer's deliveries.
	Consumer    *Consumer
	escalations *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
}

// NewEscalator creates (or finds) the escalator's metrics on reg.
func NewEscalator(reg prometheus.Registerer) *Escalator {
	e := &Escalator{
		Consumer: NewConsumer(reg),
		escalations: counterVec(reg, "escalations_total",
			"Escalations done (PR labelled, comment posted, PREscalated published), by reason code and severity.",
			"reason", "severity"),
		webhooks: counterVec(reg, "escalation_webhook_deliveries_total",
			"Escalation webhook deliveries, by result (ok, failed after its retries).", "result"),
	}
	for _, r := range []string{"ok", "failed"} {
		e.webhooks.WithLabelValues(r)
	}
	return e
}

var (
	reasons    = []events.Reason{events.ReasonReviewTimeout, events.ReasonMaxFixCycles, events.ReasonFeedbackFailed, events.ReasonAgentBudgetExhausted, events.ReasonReviewWorkflowFailed, events.ReasonChecksFailed, events.ReasonMergeConflict, events.ReasonNotMergeable}
	severities = []events.Severity{events.SeverityInfo, events.SeverityWarning, events.SeverityBlocking}
)

// Escalated counts one escalation. Reason codes prloop does not define
// are counted as "other".
func (e *Escalator) Escalated(reason events.Reason, severity events.Severity) {
	e.escalations.WithLabelValues(oneOf(reason, reasons...), oneOf(severity, severities...)).Inc()
}

// Webhook counts one webhook delivery by whether it succeeded.
func (e *Escalator) Webhook(err error) {
	if err != nil {
		e.webhooks.WithLabelValues("failed").Inc()
		return
	}
	e.webhooks.WithLabelValues("ok").Inc()
}

func resultOf(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
