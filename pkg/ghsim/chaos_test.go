package ghsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestFaultRate_EachKindWhereGitHubShowsIt sends requests to a simulator
// whose every answer is a random fault, and checks that each route only
// gets the kinds it can get on GitHub, that every fault is counted, and
// that a write whose answer was lost is still in the record of writes.
func TestFaultRate_EachKindWhereGitHubShowsIt(t *testing.T) {
	t.Parallel()
	common := []ghsim.FaultKind{ghsim.FaultStatus500, ghsim.FaultStatus502, ghsim.FaultStatus429, ghsim.FaultSecondaryLimit, ghsim.FaultTimeout}
	tests := []struct {
		name, method, path string
		body               any
		allowed            []ghsim.FaultKind
		want               []ghsim.FaultKind // each must be drawn at least once
	}{
		{name: "pull request", method: "GET", path: "/repos/octo/socket.io/pulls/1",
			allowed: append(slices.Clone(common), ghsim.FaultMalformedJSON, ghsim.FaultGarbledJSON, ghsim.FaultEmptyObject),
			want:    []ghsim.FaultKind{ghsim.FaultEmptyObject, ghsim.FaultGarbledJSON, ghsim.FaultMalformedJSON, ghsim.FaultStatus429}},
		{name: "list", method: "GET", path: "/repos/octo/socket.io/issues",
			allowed: append(slices.Clone(common), ghsim.FaultMalformedJSON, ghsim.FaultGarbledJSON),
			want:    []ghsim.FaultKind{ghsim.FaultGarbledJSON, ghsim.FaultStatus502}},
		{name: "permission", method: "GET", path: "/repos/octo/socket.io/collaborators/alice/permission",
			allowed: append(slices.Clone(common), ghsim.FaultForbidden),
			want:    []ghsim.FaultKind{ghsim.FaultForbidden}},
		{name: "comment", method: "POST", path: "/repos/octo/socket.io/issues/1/comments", body: map[string]string{"body": "hi"},
			allowed: append(slices.Clone(common), ghsim.FaultLostAnswer),
			want:    []ghsim.FaultKind{ghsim.FaultLostAnswer, ghsim.FaultSecondaryLimit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ghsim.Options{FaultRate: 1, FaultSeed: 7})
			const n = 60
			for i := 0; i < n; i++ {
				// A short deadline ends the faults that hold the answer.
				callShort(t, e, tt.method, tt.path, tt.body)
			}
			// Every request the simulator got had a fault (a client may give
			// up before a busy server reads its request; a slow write is
			// counted in Stats once it is done).
			var counts map[ghsim.FaultKind]int
			total := 0
			require.Eventually(t, func() bool {
				counts, total = e.sim.FaultCounts(), 0
				for _, c := range counts {
					total += c
				}
				return total == e.sim.Stats().Total
			}, 10*time.Second, 20*time.Millisecond, "faults %v, requests %d", counts, e.sim.Stats().Total)
			assert.Greater(t, total, n/2)
			for k := range counts {
				assert.Contains(t, tt.allowed, k, "%s served on %s %s", k, tt.method, tt.path)
			}
			for _, k := range tt.want {
				assert.Positive(t, counts[k], "%s never drawn in %d requests: %v", k, n, counts)
			}
			writes := e.sim.Writes()
			if tt.method == "GET" {
				assert.Empty(t, writes, "reads are not writes")
				return
			}
			lost, slow := 0, 0
			for _, w := range writes {
				assert.Equal(t, "alice", w.Login)
				assert.Equal(t, "POST /repos/{owner}/{repo}/issues/{number}/comments", w.Route)
				switch w.Fault {
				case ghsim.FaultLostAnswer:
					lost++
					assert.Equal(t, 201, w.Status, "the write happened")
					assert.True(t, w.Unseen, "a lost answer is unseen")
				case ghsim.FaultTimeout:
					// Slowed by a second or more, past the client's 100 ms:
					// done, but answered to nobody.
					slow++
					assert.Equal(t, 201, w.Status, "the slow write happened")
					assert.True(t, w.Unseen, "the client had given up before the slow write's answer")
				default:
					assert.False(t, w.Unseen, "%s: answered at once", w.Fault)
				}
			}
			assert.Equal(t, counts[ghsim.FaultLostAnswer], lost)
			assert.Positive(t, slow, "no slow write drawn")
		})
	}
}

// TestFaultRate_ZeroIsHealthy: without FaultRate nothing is injected.
func TestFaultRate_ZeroIsHealthy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	for i := 0; i < 20; i++ {
		require.Equal(t, 200, call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokAlice, nil).StatusCode)
	}
	assert.Empty(t, e.sim.FaultCounts())
}

func callShort(t *testing.T, e *env, method, path string, body any) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+tokAlice)
	resp, err := e.srv.Client().Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func TestFaultKind_String(t *testing.T) {
	t.Parallel()
	for k, want := range map[ghsim.FaultKind]string{0: "none", ghsim.FaultEmptyObject: "empty_object", ghsim.FaultSecondaryLimit: "secondary_403", 99: "fault(99)"} {
		assert.Equal(t, want, k.String())
	}
}
