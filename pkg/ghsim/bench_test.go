package ghsim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// BenchmarkList_10kPRs serves the issue and pull lists of 100 repositories
// holding 100 PRs each, the shape of prloop's benchmark.
func BenchmarkList_10kPRs(b *testing.B) {
	s, err := ghsim.New(ghsim.Options{Dir: b.TempDir()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	s.AddToken("tok", "poller")
	for i := 0; i < 100; i++ {
		repo, err := s.CreateRepo("org", fmt.Sprintf("repo-%d", i), nil)
		require.NoError(b, err)
		_, err = s.OpenPRs(repo, 100, "dev")
		require.NoError(b, err)
	}
	for _, kind := range []string{"issues", "pulls"} {
		b.Run(kind, func(b *testing.B) {
			i := 0
			for b.Loop() {
				req := httptest.NewRequest("GET", fmt.Sprintf("/repos/org/repo-%d/%s?per_page=100&state=all", i%100, kind), nil)
				req.Header.Set("Authorization", "token tok")
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
				_, _ = io.Copy(io.Discard, w.Body)
				i++
			}
		})
	}
}

// BenchmarkOpenPRs opens 2,000 PRs at once, each a real branch one commit
// ahead of main: how fast the simulator seeds a large repository.
func BenchmarkOpenPRs(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		s, err := ghsim.New(ghsim.Options{Dir: b.TempDir()})
		require.NoError(b, err)
		repo, err := s.CreateRepo("org", "bulk", nil)
		require.NoError(b, err)
		b.StartTimer()
		_, err = s.OpenPRs(repo, 2000, "dev")
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, s.Close())
		b.StartTimer()
	}
}
