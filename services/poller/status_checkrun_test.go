package poller

import (
	"testing"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/prstatus"
)

// TestCheckRunOf: each state of the line maps to a check run status and
// conclusion, and reading the run back gives the line again.
func TestCheckRunOf(t *testing.T) {
	t.Parallel()
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 2}
	tests := []struct {
		name             string
		line             prstatus.Line
		status, conclude string
		summary          string
	}{
		{name: "pending", line: prstatus.Line{State: prstatus.Pending, Text: "waiting for review"},
			status: github.CheckInProgress, summary: "prloop is working on acme/widgets#2 or waiting for it."},
		{name: "success", line: prstatus.Line{State: prstatus.Success, Text: "merged as a1b2c3d"},
			status: github.CheckCompleted, conclude: github.CheckSuccess, summary: "prloop has nothing left to wait for on acme/widgets#2."},
		{name: "a human is needed", line: prstatus.Line{State: prstatus.Error, Text: "needs a human: merge conflict"},
			status: github.CheckCompleted, conclude: github.CheckActionRequired, summary: "prloop has stopped on acme/widgets#2: a human is needed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := checkRunOf(pr, tt.line)
			assert.Equal(t, tt.status, in.Status)
			assert.Equal(t, tt.conclude, in.Conclusion)
			assert.Equal(t, tt.line.Text, in.Output.Title)
			assert.Equal(t, tt.summary, in.Output.Summary)
			assert.Empty(t, in.Name, "the sink names the run when it creates one")

			run := &gh.CheckRun{Status: &in.Status, Output: &gh.CheckRunOutput{Title: &in.Output.Title}}
			if in.Conclusion != "" {
				run.Conclusion = &in.Conclusion
			}
			assert.Equal(t, tt.line, lineOfCheckRun(run), "read back")
		})
	}
}

// TestLineOfCheckRun_NotPrloops: no run is the zero line, and a conclusion
// prloop never writes reads as a state prloop never renders, so it is
// rewritten.
func TestLineOfCheckRun_NotPrloops(t *testing.T) {
	t.Parallel()
	assert.Equal(t, prstatus.Line{}, lineOfCheckRun(nil))
	failed := lineOfCheckRun(&gh.CheckRun{Status: gh.String("completed"), Conclusion: gh.String("failure"), Output: &gh.CheckRunOutput{Title: gh.String("x")}})
	assert.NotContains(t, []prstatus.State{prstatus.Pending, prstatus.Success, prstatus.Error}, failed.State)
}
