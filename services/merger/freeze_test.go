package merger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/metrics"
)

func TestFrozen_WhichFreezeHoldsABase(t *testing.T) {
	t.Parallel()
	repo := ghref.Repo{Owner: "o", Name: "r"}
	now := stepT0
	main := Freeze{Repo: repo, Base: "main", Reason: "release"}
	all := Freeze{Repo: repo, Base: events.AllBases, Reason: "incident"}
	for _, tc := range []struct {
		name   string
		fs     []Freeze
		base   string
		want   string // the reason of the freeze that holds, "" for none
		frozen bool
	}{
		{name: "no freeze", base: "main"},
		{name: "a freeze of the base", fs: []Freeze{main}, base: "main", want: "release", frozen: true},
		{name: "bases are case-folded, as queues are", fs: []Freeze{main}, base: "Main", want: "release", frozen: true},
		{name: "a freeze of another base", fs: []Freeze{main}, base: "release/2.0"},
		{name: "a freeze of every base", fs: []Freeze{all}, base: "release/2.0", want: "incident", frozen: true},
		{name: "until not reached", fs: []Freeze{{Base: "main", Reason: "r", Until: now.Add(time.Second)}}, base: "main", want: "r", frozen: true},
		{name: "until reached: no longer holds, before thaw removes it", fs: []Freeze{{Base: "main", Reason: "r", Until: now}}, base: "main"},
		{name: "an expired freeze does not hide a standing one", fs: []Freeze{{Base: "main", Reason: "old", Until: now.Add(-time.Hour)}, all}, base: "main", want: "incident", frozen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, ok := frozen(tc.fs, tc.base, now)
			assert.Equal(t, tc.frozen, ok)
			assert.Equal(t, tc.want, f.Reason)
		})
	}
}

func TestExpired_FreezesWhoseTimePassed(t *testing.T) {
	t.Parallel()
	now := stepT0
	fs := []Freeze{
		{Base: "a", Until: now.Add(-time.Second)},
		{Base: "b"},
		{Base: "c", Until: now},
		{Base: "d", Until: now.Add(time.Second)},
	}
	var bases []string
	for _, f := range expired(fs, now) {
		bases = append(bases, f.Base)
	}
	assert.Equal(t, []string{"a", "c"}, bases)
}

// TestStep_AFreezeHoldsEveryMergeAndNothingElse: under a freeze the serial
// queue does everything but merge: an approval withdrawn still leaves, a
// branch behind is still updated, checks are still waited for; a merge
// the rule allows waits without counting a refusal, and a freeze the
// executor meets right before the call does the same.
func TestStep_AFreezeHoldsEveryMergeAndNothingElse(t *testing.T) {
	t.Parallel()
	freeze := []Freeze{{Base: "main", Reason: "release 2.0"}}
	tests := []struct {
		name    string
		edit    func(f *stepFixture)
		merge   bool
		command bool
		leave   string
		wait    bool
		why     string
	}{
		{name: "not frozen: merges", edit: func(f *stepFixture) { f.o.Freezes = nil }, merge: true, command: true},
		{name: "frozen: waits, no merge, no refusal", wait: true, why: "queue frozen: release 2.0"},
		{name: "frozen for another base: merges", edit: func(f *stepFixture) { f.o.Freezes = []Freeze{{Base: "dev", Reason: "x"}} }, merge: true, command: true},
		{name: "frozen until a time passed: merges", edit: func(f *stepFixture) { f.o.Freezes[0].Until = f.o.Now }, merge: true, command: true},
		{name: "frozen, behind: the branch is still updated", edit: func(f *stepFixture) { f.o.Compare.behind = true }, command: true},
		{name: "frozen, checks pending: still waited for", edit: func(f *stepFixture) { f.o.Checks.Combined.Statuses[0].State = new("pending") }, wait: true},
		{name: "frozen, approval withdrawn: still leaves", edit: func(f *stepFixture) {
			f.o.Approval = ApprovalCheck{Reason: events.ReasonApprovalWithdrawn}
		}, leave: metrics.MergeDropped},
		{name: "frozen, dry run: publishes nothing merged", edit: func(f *stepFixture) { f.pol.DryRun = true }, wait: true, why: "queue frozen: release 2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStepFixture()
			f.o.Freezes = append([]Freeze(nil), freeze...)
			f.e.Failures = 2
			if tt.edit != nil {
				tt.edit(&f)
			}
			got := Step(f.e, f.o, f.pol)
			_, merges := firstCommand[cmdMerge](got)
			assert.Equal(t, tt.merge, merges, got.Why)
			assert.Equal(t, tt.command, len(got.Commands) > 0, got.Why)
			assert.Equal(t, tt.leave, got.Leave)
			assert.Equal(t, tt.wait, got.Wait, got.Why)
			assert.Zero(t, got.Next.Refusals)
			assert.NotContains(t, eventsOf(got), string(events.TypeMerged))
			if tt.why != "" {
				assert.Equal(t, tt.why, got.Why)
				assert.Nil(t, got.Next.Intent, "no merge intent while frozen")
				assert.Zero(t, got.Next.Failures, "the pass went through")
			}
		})
	}

	t.Run("the executor met a freeze right before the call", func(t *testing.T) {
		t.Parallel()
		f := newStepFixture()
		f.e.Intent = &Intent{Kind: intentMerge, Head: stepHead, Tree: stepTree}
		got := Step(f.e, Observation{Now: f.o.Now, Outcome: &Outcome{Kind: held, Freeze: freeze[0]}}, f.pol)
		assert.Empty(t, got.Commands)
		assert.True(t, got.Wait)
		assert.Nil(t, got.Next.Intent, "nothing of ours to recognise later")
		assert.Zero(t, got.Next.Refusals)
		assert.Equal(t, "queue frozen: release 2.0", got.Why)
	})
}

// TestLand_AFreezeHoldsTheSpeculativeMerge: the speculative queue's merge
// on a green candidate waits while frozen; what would make the PR leave
// still does.
func TestLand_AFreezeHoldsTheSpeculativeMerge(t *testing.T) {
	t.Parallel()
	const cand = "7777777777777777777777777777777777777777"
	c := Candidate{PR: ghref.PR{Owner: "o", Repo: "r", Number: 7}, Head: stepHead, SHA: cand, Tree: stepTree}
	green := statuses("ci")
	green.Required, green.Seen = []string{"ci"}, []string{"ci"}
	f := newStepFixture()
	f.o.Tip = stepTip
	f.o.Freezes = []Freeze{{Base: events.AllBases, Reason: "incident 42"}}
	got := land(f.e, f.o, c, green, stepTip, f.pol)
	assert.Empty(t, got.Commands)
	assert.True(t, got.Wait, "looks again after the poll interval")
	assert.Nil(t, got.Next.Intent)
	assert.Equal(t, "queue frozen: incident 42", got.Why)

	f.o.Approval = ApprovalCheck{Reason: events.ReasonApprovalWithdrawn}
	assert.Equal(t, metrics.MergeDropped, land(f.e, f.o, c, green, stepTip, f.pol).Leave, "a withdrawn approval still leaves")
}

// firstCommand returns the transition's first command of type C.
func firstCommand[C Command](t Transition) (C, bool) {
	for _, c := range t.Commands {
		if c, ok := c.(C); ok {
			return c, true
		}
	}
	var zero C
	return zero, false
}
