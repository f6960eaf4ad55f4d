package github

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestClient_CheckRuns: a run is created, found by name on its head,
// updated in place, and found again as GitHub now shows it.
func TestClient_CheckRuns(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{AsApp: true})
	ctx := t.Context()
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	require.NoError(t, e.sim.SetCheckRun(e.repo, info.HeadSHA, "ci", "completed", "failure"))

	none, err := e.client.FindCheckRun(ctx, e.repo, info.HeadSHA, "prloop")
	require.NoError(t, err)
	assert.Nil(t, none, "no run of that name yet")

	cr, err := e.client.CreateCheckRun(ctx, e.repo, CheckRunInput{Name: "prloop", HeadSHA: info.HeadSHA, Status: CheckInProgress,
		Output: &CheckRunOutput{Title: "waiting for review", Summary: "open"}})
	require.NoError(t, err)
	assert.Equal(t, CheckInProgress, cr.GetStatus())

	found, err := e.client.FindCheckRun(ctx, e.repo, info.HeadSHA, "prloop")
	require.NoError(t, err)
	require.NotNil(t, found)
	assert.Equal(t, cr.GetID(), found.GetID())
	assert.Equal(t, "waiting for review", found.GetOutput().GetTitle())

	up, err := e.client.UpdateCheckRun(ctx, e.repo, cr.GetID(), CheckRunInput{Status: CheckCompleted, Conclusion: CheckSuccess,
		Output: &CheckRunOutput{Title: "merged as a1b2c3d", Summary: "merged"}})
	require.NoError(t, err)
	assert.Equal(t, cr.GetID(), up.GetID())
	found, err = e.client.FindCheckRun(ctx, e.repo, info.HeadSHA, "prloop")
	require.NoError(t, err)
	require.NotNil(t, found)
	assert.Equal(t, CheckSuccess, found.GetConclusion())
	assert.Equal(t, "merged as a1b2c3d", found.GetOutput().GetTitle())

	all, err := e.client.ListCheckRuns(ctx, e.repo, info.HeadSHA)
	require.NoError(t, err)
	assert.Len(t, all, 2, "ci and prloop")
	st := e.stats(t)
	assert.Equal(t, 1, st.ByRoute["POST /repos/{owner}/{repo}/check-runs"])
	assert.Equal(t, 1, st.ByRoute["PATCH /repos/{owner}/{repo}/check-runs/{id}"])
}

// TestClient_CheckRunRefusals: what the client refuses before a request,
// and GitHub's refusals wrapped with the run they concern.
func TestClient_CheckRunRefusals(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	long := &CheckRunOutput{Title: "t", Summary: strings.Repeat("é", MaxCheckSummary+1)}
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{name: "no name", want: "name and head sha are required", run: func() error {
			_, err := e.client.CreateCheckRun(t.Context(), e.repo, CheckRunInput{HeadSHA: info.HeadSHA})
			return err
		}},
		{name: "summary too long", want: "GitHub keeps 65535", run: func() error {
			_, err := e.client.CreateCheckRun(t.Context(), e.repo, CheckRunInput{Name: "prloop", HeadSHA: info.HeadSHA, Output: long})
			return err
		}},
		{name: "unknown run", want: "update check run 4242 on acme/widgets", run: func() error {
			_, err := e.client.UpdateCheckRun(t.Context(), e.repo, 4242, CheckRunInput{Status: CheckInProgress})
			if err != nil {
				assert.ErrorIs(t, err, ErrNotFound)
			}
			return err
		}},
		{name: "find without a name", want: "empty name", run: func() error {
			_, err := e.client.FindCheckRun(t.Context(), e.repo, info.HeadSHA, "")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tt.run(), tt.want)
		})
	}
}

// TestClient_IsApp: a token client is not an App unless told to pretend.
func TestClient_IsApp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want bool
	}{
		{name: "token", want: false},
		{name: "token, AsApp", opts: Options{AsApp: true}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(t.Context(), Config{APIURL: "http://127.0.0.1:1/", Token: "t"}, tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.IsApp())
		})
	}
}

// TestClient_CreateCheckRunNotRetried: a create that failed with a 5xx may
// have made the run, so it is not sent again; an update is.
func TestClient_CreateCheckRunNotRetried(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{AsApp: true})
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)
	e.reset()
	e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/check-runs$`, Kind: ghsim.FaultStatus500})
	in := CheckRunInput{Name: "prloop", HeadSHA: info.HeadSHA, Status: CheckInProgress}
	_, err = e.client.CreateCheckRun(t.Context(), e.repo, in)
	require.ErrorIs(t, err, ErrServer)
	assert.Equal(t, 1, e.stats(t).Total, "not retried")

	cr, err := e.client.CreateCheckRun(t.Context(), e.repo, in)
	require.NoError(t, err)
	e.sim.InjectFault(ghsim.Fault{Method: "PATCH", Path: `/check-runs/`, Kind: ghsim.FaultStatus500})
	_, err = e.client.UpdateCheckRun(t.Context(), e.repo, cr.GetID(), CheckRunInput{Conclusion: CheckSuccess})
	require.NoError(t, err, "the update is retried")
}
