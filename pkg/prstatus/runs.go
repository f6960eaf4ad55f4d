package prstatus

import (
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
)

// MaxRuns bounds the agent runs a board keeps per PR: the latest ones.
const MaxRuns = 20

// Run is one of the agent's runs on a PR as the feedback service's answers
// tell it: a fix pushed (PRFeedbackAddressed) or an escalation after a
// preset's run (PREscalationRequested with its summary), for the page's
// list of a PR's runs.
type Run struct {
	At time.Time `json:"at"`
	// Head is the head the run worked on, FixCycle the cycle it answered.
	Head     string `json:"head_sha,omitempty"`
	FixCycle int    `json:"fix_cycle"`
	// Outcome says how it ended, for people: "fix pushed as 0123456",
	// "escalated: agent budget exhausted".
	Outcome string `json:"outcome"`
	// Escalated says the run ended in an escalation.
	Escalated bool `json:"escalated,omitempty"`
	// Agent is the preset's summary of the run; nil for
	// PRLOOP_AGENT=command, whose output prloop does not read. Its texts
	// (tools, the final message) are the agent's: show them escaped.
	Agent *events.AgentRunSummary `json:"agent,omitempty"`
}

// addRun notes the agent run d reports, if it reports one.
func (p *PR) addRun(d events.Data, at time.Time) {
	var r Run
	switch e := d.(type) {
	case *events.FeedbackAddressed:
		r = Run{At: at, Head: e.PreviousHeadSHA, FixCycle: e.FixCycle, Outcome: "fix pushed as " + ghref.ShortSHA(e.HeadSHA), Agent: e.Agent}
	case *events.EscalationRequested:
		if e.Agent == nil {
			return // not about an agent's run, or not one prloop read
		}
		r = Run{At: at, Head: e.HeadSHA, FixCycle: e.FixCycle, Escalated: true, Agent: e.Agent,
			Outcome: "escalated: " + strings.ReplaceAll(events.CleanTitle(string(e.Reason)), "_", " ")}
	default:
		return
	}
	p.Runs = append(p.Runs, r)
	if over := len(p.Runs) - MaxRuns; over > 0 {
		p.Runs = append(p.Runs[:0:0], p.Runs[over:]...)
	}
}
