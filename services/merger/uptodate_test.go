package merger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
)

// TestMerger_BehindPRIsTestedOnItsUpdatedHeadWhateverTheBaseRules: an
// approved PR whose head lacks the base tip, with ci green on that head,
// is brought up to date, waits for ci on the updated head, and only then
// merges; main's tree after the merge is the tree ci passed. On GitHub,
// mergeable_state says "behind" only when the base requires branches to be
// up to date (a strict rule); on a default-configured base the PR is
// "clean" (or "blocked", "unstable"), so the merger computes
// up-to-dateness itself rather than reading it.
func TestMerger_BehindPRIsTestedOnItsUpdatedHeadWhateverTheBaseRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		ruleset    *ghsim.RequiredChecks
		protection *ghsim.RequiredChecks
	}{
		{name: "no rules"},
		{name: "ruleset requires ci, not strict", ruleset: &ghsim.RequiredChecks{Contexts: []string{"ci"}}},
		{name: "ruleset requires ci, strict", ruleset: &ghsim.RequiredChecks{Contexts: []string{"ci"}, Strict: true}},
		{name: "classic protection requires ci, strict", protection: &ghsim.RequiredChecks{Contexts: []string{"ci"}, Strict: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tt.ruleset != nil {
				require.NoError(t, e.sim.SetRuleset(e.repo, "main", *tt.ruleset))
			}
			if tt.protection != nil {
				require.NoError(t, e.sim.SetBranchProtection(e.repo, "main", *tt.protection))
			}
			pr, old := e.behindPR("feat")
			require.NoError(t, e.sim.SetStatus(e.repo, old, "ci", "success"))
			tip := e.git("rev-parse", "main")
			e.start(config(), "replica-1")
			e.approve(pr, old, "1")

			info := e.updatedOrMerged(pr, old)
			require.False(t, info.Merged, "merged the head that lacks the base tip: main moved to %s, a tree no ci run saw", e.git("rev-parse", "main^{tree}"))
			head := info.HeadSHA
			w := e.rec.Wait(t, pr, events.TypeMergeWaiting, waitFor).Data.(*events.MergeWaiting)
			assert.Equal(t, head, w.HeadSHA, "waits on the updated head")
			assert.Equal(t, []string{"ci"}, w.Checks)
			e.waitPolls(3)
			assert.Zero(t, e.routeCount(routeMerge), "ci has not run on the updated head: not merged")
			assert.Equal(t, tip, e.git("rev-parse", "main"))

			require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
			m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
			assert.Equal(t, head, m.HeadSHA)
			assert.Equal(t, e.git("rev-parse", head+"^{tree}"), e.git("rev-parse", "main^{tree}"),
				"main holds exactly the tree ci passed")
			assert.Equal(t, tip, e.git("rev-parse", "main^"), "on the base tip the updated head contains")
			assert.Equal(t, 1, e.routeCount(routeUpdateBranch))
			e.waitQueueEmpty()
		})
	}
}

// pushBeforeMerge is GitHub with someone pushing to the base branch right
// before each merge call: the race between the merger's decision and its
// merge, which no rule of a loose base stops.
type pushBeforeMerge struct {
	*github.Client
	push func()
}

func (p *pushBeforeMerge) Merge(ctx context.Context, pr ghref.PR, opts github.MergeOptions) (*gh.PullRequestMergeResult, error) {
	p.push()
	return p.Client.Merge(ctx, pr, opts)
}

// TestMerger_BaseMovedBeforeTheMergeIsNeverSilent: when the base moves
// between the decision and the merge call, a loose base lets GitHub merge
// the head onto the new tip; main's tree is then not the head's, the one
// CI passed, and the merger says so (untested_merge) rather than announce
// a clean merge.
func TestMerger_BaseMovedBeforeTheMergeIsNeverSilent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.greenPR()
	client := &pushBeforeMerge{Client: e.Client(t), push: e.latePush()}
	e.start(config(), "replica-1", client)
	e.approve(pr, head, "1")

	esc := e.rec.Wait(t, pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonUntestedMerge, esc.Reason)
	assert.Contains(t, esc.Detail, "moved before the merge")
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	assert.NotEqual(t, e.git("rev-parse", head+"^{tree}"), e.git("rev-parse", "main^{tree}"))
	e.waitQueueEmpty()
}

// pushAfterCompare is GitHub with someone pushing to the base branch right
// after the merger compared the head with it: the comparison said "up to
// date", and the base moved before the merge call.
type pushAfterCompare struct {
	*github.Client
	push func()
}

func (p *pushAfterCompare) Compare(ctx context.Context, repo ghref.Repo, base, head string) (github.Comparison, error) {
	c, err := p.Client.Compare(ctx, repo, base, head)
	if err == nil {
		p.push()
	}
	return c, err
}

// TestMerge_TipMovedAfterTheComparisonIsRefusedByTheRule: the base moves
// between the comparison that found the head up to date and the merge
// call. mayLand reads the tip last, sees that the head was not built on
// it, and refuses; the next pass brings the head up to date, waits for ci
// on it and merges the tree ci passed, where before the merge went
// through onto the new tip (a tree nobody tested) and was only reported
// afterwards (untested_merge).
func TestMerge_TipMovedAfterTheComparisonIsRefusedByTheRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pr, head := e.greenPR()
	client := &pushAfterCompare{Client: e.Client(t), push: e.latePush()}
	e.start(config(), "replica-1", client)
	e.approve(pr, head, "1")

	info := e.updatedOrMerged(pr, head)
	require.False(t, info.Merged, "merged onto a tip the head was not built on: main moved to %s, a tree no ci run saw", e.git("rev-parse", "main^{tree}"))
	updated := info.HeadSHA
	require.NoError(t, e.sim.SetStatus(e.repo, updated, "ci", "success"))
	m := e.rec.Wait(t, pr, events.TypeMerged, waitFor).Data.(*events.Merged)
	assert.Equal(t, updated, m.HeadSHA)
	assert.Equal(t, e.git("rev-parse", updated+"^{tree}"), e.git("rev-parse", "main^{tree}"), "main holds exactly the tree ci passed")
	assert.Zero(t, e.rec.Count(pr, events.TypeEscalationRequested), "nothing untested landed")
	assert.Equal(t, 1, e.routeCount(routeMerge))
	e.waitQueueEmpty()
}

// latePush returns bob's push of a commit to main, made the first time it
// is called and never again: the base moving at one chosen moment.
func (e *env) latePush() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			_, err := e.sim.PushCommit(e.repo, "main", "bob", map[string]string{"late.txt": "l\n"}, "Late push")
			assert.NoError(e.t, err)
		})
	}
}

// updatedOrMerged waits until pr's head is no longer head, or pr merged,
// and returns what the simulator then shows of it.
func (e *env) updatedOrMerged(pr ghref.PR, head string) ghsim.PRSnapshot {
	e.t.Helper()
	var info ghsim.PRSnapshot
	require.Eventually(e.t, func() bool {
		var err error
		info, err = e.sim.PRInfo(pr)
		require.NoError(e.t, err)
		return info.HeadSHA != head || info.Merged
	}, waitFor, 5*time.Millisecond, "neither updated nor merged")
	return info
}

// greenPR opens a PR off main whose head ci passed.
func (e *env) greenPR() (ghref.PR, string) {
	e.t.Helper()
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(e.t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	return pr, head
}
