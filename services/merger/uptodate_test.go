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

			var info ghsim.PRSnapshot
			require.Eventually(t, func() bool {
				var err error
				info, err = e.sim.PRInfo(pr)
				require.NoError(t, err)
				return info.HeadSHA != old || info.Merged
			}, waitFor, 5*time.Millisecond, "neither updated nor merged")
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
	pr, head := e.openPR("feat", "Add f", map[string]string{"f.txt": "f\n"})
	require.NoError(t, e.sim.SetStatus(e.repo, head, "ci", "success"))
	var once sync.Once
	client := &pushBeforeMerge{Client: e.Client(t), push: func() {
		once.Do(func() {
			_, err := e.sim.PushCommit(e.repo, "main", "bob", map[string]string{"late.txt": "l\n"}, "Late push")
			assert.NoError(t, err)
		})
	}}
	e.start(config(), "replica-1", client)
	e.approve(pr, head, "1")

	esc := e.rec.Wait(t, pr, events.TypeEscalationRequested, waitFor).Data.(*events.EscalationRequested)
	assert.Equal(t, events.ReasonUntestedMerge, esc.Reason)
	assert.Contains(t, esc.Detail, "moved before the merge")
	e.rec.Wait(t, pr, events.TypeMerged, waitFor)
	assert.NotEqual(t, e.git("rev-parse", head+"^{tree}"), e.git("rev-parse", "main^{tree}"))
	e.waitQueueEmpty()
}
