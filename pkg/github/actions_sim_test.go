package github

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_ActionsAgainstSimulator: a failed job's annotations, steps
// and log tail, and the re-run, through the client. The log comes through
// GitHub's redirect to another host, which must see no token.
func TestClient_ActionsAgainstSimulator(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{MaxPerPage: 1}, Config{}, Options{})
	ctx := t.Context()
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	var log strings.Builder
	for i := range 300 {
		log.WriteString("line " + strings.Repeat("x", i%7) + "\n")
	}
	log.WriteString("FAIL last\n")
	runID, jobs, err := e.sim.RunWorkflow(e.repo, info.HeadSHA, "CI", ghsim.JobInput{
		Name: "test", Conclusion: "failure", Log: log.String(), Steps: []ghsim.Step{{Name: "go test", Conclusion: "failure"}},
		Annotations: []ghsim.Annotation{{Path: "a.go", StartLine: 1, Level: "failure", Message: "one"}, {Path: "b.go", StartLine: 2, Level: "failure", Message: "two"}},
		Reruns:      []string{"success"},
	})
	require.NoError(t, err)

	anns, err := e.client.ListCheckRunAnnotations(ctx, e.repo, jobs[0])
	require.NoError(t, err)
	require.Len(t, anns, 2, "both pages")
	assert.Equal(t, "two", anns[1].GetMessage())

	job, err := e.client.GetWorkflowJob(ctx, e.repo, jobs[0])
	require.NoError(t, err)
	assert.Equal(t, runID, job.GetRunID())
	require.Len(t, job.Steps, 1)
	assert.Equal(t, "failure", job.Steps[0].GetConclusion())

	tail, err := e.client.JobLogTail(ctx, e.repo, jobs[0], 200, 20<<10)
	require.NoError(t, err)
	lines := strings.Split(tail, "\n")
	assert.Len(t, lines, 200)
	assert.Equal(t, "FAIL last", lines[199])
	reqs := e.sim.LogRequests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		assert.Empty(t, r.Authorization, "the log store saw no credential")
	}

	require.NoError(t, e.client.RerunFailedJobs(ctx, e.repo, runID))
	assert.Equal(t, 1, e.sim.Reruns())
}

func TestTailLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		in           string
		lines, bytes int
		want         string
	}{
		{name: "short stays", in: "a\nb\n", lines: 5, bytes: 100, want: "a\nb"},
		{name: "last lines", in: "a\nb\nc\nd\n", lines: 2, bytes: 100, want: "c\nd"},
		{name: "bytes cut at a line", in: "aaaa\nbbbb\ncc\n", lines: 10, bytes: 7, want: "cc"},
		{name: "one long line cut from its start", in: "abcdefgh", lines: 10, bytes: 3, want: "fgh"},
		{name: "no rune split", in: "ééé", lines: 10, bytes: 3, want: "é"},
		{name: "unbounded", in: "a\nb", want: "a\nb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, TailLines(tc.in, tc.lines, tc.bytes))
		})
	}
}
