package merger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

// TestRetryFailed_OneMoreRunBeforeTheCulpritLeaves is the rule's table:
// a failed candidate's Actions jobs are re-run once, the re-run is waited
// for, and only its failure (or what no re-run can change) removes the PR.
func TestRetryFailed_OneMoreRunBeforeTheCulpritLeaves(t *testing.T) {
	t.Parallel()
	now := stepT0.Add(time.Hour)
	job := func(id int64) events.FailedCheck {
		return events.FailedCheck{Name: "test", Kind: events.CheckKindRun, Conclusion: "failure", ID: id, Actions: true}
	}
	status := events.FailedCheck{Name: "ci/legacy", Kind: events.CheckKindStatus, Conclusion: "failure", ID: 9}
	rerunAt := func(ago time.Duration, failed ...int64) Candidate {
		return Candidate{SHA: "c", Rerun: &Rerun{At: now.Add(-ago), Failed: failed}}
	}
	unsent := func(asks int, failed ...int64) Candidate {
		return Candidate{SHA: "c", Rerun: &Rerun{At: now, Failed: failed, Asks: asks, Unsent: true}}
	}
	tests := []struct {
		name    string
		c       Candidate
		failed  []events.FailedCheck
		enabled bool
		want    retryVerdict
	}{
		{name: "first failure of Actions jobs: re-run them", c: Candidate{SHA: "c"}, failed: []events.FailedCheck{job(1), job(2)}, enabled: true, want: retryNow},
		{name: "PRLOOP_QUEUE_RETRY_FAILED off: removed", c: Candidate{SHA: "c"}, failed: []events.FailedCheck{job(1)}, want: retryNone},
		{name: "a commit status failed too: no re-run repeats it", c: Candidate{SHA: "c"}, failed: []events.FailedCheck{job(1), status}, enabled: true, want: retryNone},
		{name: "a check run not made by Actions: removed", c: Candidate{SHA: "c"}, failed: []events.FailedCheck{{Name: "lint", Kind: events.CheckKindRun, ID: 5}}, enabled: true, want: retryNone},
		{name: "re-run asked, the new attempt not reported: wait", c: rerunAt(time.Minute, 1, 2), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryWait},
		{name: "the re-run failed (a new check run): removed, never a second re-run", c: rerunAt(time.Minute, 1), failed: []events.FailedCheck{job(3)}, enabled: true, want: retryNone},
		{name: "the re-run never reported within the checks timeout: removed", c: rerunAt(30*time.Minute, 1), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNone},
		{name: "GitHub refused the re-run: removed", c: Candidate{SHA: "c", Rerun: &Rerun{At: now, Failed: []int64{1}, Refused: true}}, failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNone},
		{name: "recorded before a restart: not re-run twice", c: rerunAt(0, 1), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryWait},
		{name: "GitHub failed to answer the request: asked again", c: unsent(1, 1), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNow},
		{name: "a record from before requests were counted failed to answer: asked again", c: unsent(0, 1), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNow},
		{name: "GitHub failed to answer the last request allowed: removed", c: unsent(rerunAsks, 1), failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNone},
		{name: "unanswered, but another job failed since: removed, never a re-run of a new failure", c: unsent(1, 1), failed: []events.FailedCheck{job(3)}, enabled: true, want: retryNone},
		{name: "unanswered, past the checks timeout: asked again, the wait starts anew", c: Candidate{SHA: "c", Rerun: &Rerun{At: now.Add(-time.Hour), Failed: []int64{1}, Asks: 1, Unsent: true}}, failed: []events.FailedCheck{job(1)}, enabled: true, want: retryNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, retryFailed(tt.c, tt.failed, tt.enabled, now, 30*time.Minute))
		})
	}
}

// TestAskAgain_EachRequestIsCounted: the record made before a request
// counts it, from 1, and a record from before requests were counted
// stands for one.
func TestAskAgain_EachRequestIsCounted(t *testing.T) {
	t.Parallel()
	now := stepT0.Add(time.Hour)
	failed := []events.FailedCheck{{Name: "test", ID: 4, Actions: true}}
	tests := []struct {
		name string
		prev *Rerun
		want int
	}{
		{name: "the first request", want: 1},
		{name: "after one unanswered", prev: &Rerun{Asks: 1, Unsent: true}, want: 2},
		{name: "after a record from before the count", prev: &Rerun{Unsent: true}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := askAgain(Candidate{SHA: "c", Rerun: tt.prev}, failed, now)
			assert.Equal(t, Rerun{At: now.UTC(), Failed: []int64{4}, Asks: tt.want}, got)
		})
	}
}

// TestFlakyPassed_ARerunCandidateGreenIsCountedOnce: a re-run candidate
// now green is flaky, once; one not re-run, refused, or new is not.
func TestFlakyPassed_ARerunCandidateGreenIsCountedOnce(t *testing.T) {
	t.Parallel()
	chain := []Candidate{
		{SHA: "plain"},
		{SHA: "flaky", Rerun: &Rerun{}},
		{SHA: "counted", Rerun: &Rerun{Passed: true}},
		{SHA: "refused", Rerun: &Rerun{Refused: true}},
		{SHA: "pending", Rerun: &Rerun{}},
		{SHA: "new", Rerun: &Rerun{}},
	}
	G, P := Checks{State: ChecksGreen}, Checks{State: ChecksPending}
	assert.Equal(t, []int{1}, flakyPassed(chain, []Checks{G, G, G, G, P, G}, 5))
}

// TestUnstoredFlaky_CountedAsItMergesWhenNoBatchHeldTheMark: a candidate
// marked flaky in this pass whose mark the stored batch lacks is counted
// as it merges; one whose mark is stored was counted then.
func TestUnstoredFlaky_CountedAsItMergesWhenNoBatchHeldTheMark(t *testing.T) {
	t.Parallel()
	passed := &Rerun{Failed: []int64{1}, Passed: true}
	asked := &Rerun{Failed: []int64{1}}
	tests := []struct {
		name          string
		stored, chain []Candidate
		want          []string
	}{
		{name: "marked in this pass, stored unmarked", stored: []Candidate{{SHA: "c1", Rerun: asked}}, chain: []Candidate{{SHA: "c1", Rerun: passed}}, want: []string{"c1"}},
		{name: "marked in this pass, never stored (a stacked chain was)", stored: []Candidate{{SHA: "c9"}}, chain: []Candidate{{SHA: "c1", Rerun: passed}}, want: []string{"c1"}},
		{name: "the mark is stored: counted then", stored: []Candidate{{SHA: "c1", Rerun: passed}}, chain: []Candidate{{SHA: "c1", Rerun: passed}}},
		{name: "re-run, not passed", stored: []Candidate{{SHA: "c1", Rerun: asked}}, chain: []Candidate{{SHA: "c1", Rerun: asked}}},
		{name: "never re-run", chain: []Candidate{{SHA: "c1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, unstoredFlaky(tt.stored, tt.chain))
		})
	}
}
