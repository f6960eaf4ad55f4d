package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// TestLoop_ConflictResolvedByTheAgent runs the four services as `prloop
// run` does with PRLOOP_RESOLVE_CONFLICTS=true, on two approved PRs that
// conflict with a later push to main, and a scripted agent (a real
// process, in its sandbox) that gets each conflict merged in with markers:
//
//   - on "resolve-me" it resolves the conflict and commits the merge:
//     prloop verifies and pushes it, the resolution needs review again
//     (the approval of the old head does not carry over), and once the
//     reviewer approves it, it is merged with both sides' lines; every
//     event about the resolution follows its PRFeedbackAddressed;
//   - on "leave-markers" it commits the markers: prloop refuses the
//     result, pushes nothing and escalates merge_conflict exactly once.
func TestLoop_ConflictResolvedByTheAgent(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	_, err := sim.PushCommit(demo.Repo, "main", ghsim.DemoAgent, map[string]string{"shared.txt": "base\n", "other.txt": "base\n"}, "Add shared files")
	require.NoError(t, err)
	open := func(branch, file string) (ghref.PR, string) {
		head, err := sim.PushCommit(demo.Repo, branch, ghsim.DemoAgent, map[string]string{file: branch + "\n", branch + ".txt": "new\n"}, "Change "+file+" on "+branch)
		require.NoError(t, err)
		pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Change " + branch, Head: branch, Author: ghsim.DemoAgent})
		require.NoError(t, err)
		return pr, head
	}
	good, goodHead := open("resolve-me", "shared.txt")
	bad, badHead := open("leave-markers", "other.txt")
	_, err = sim.PushCommit(demo.Repo, "main", ghsim.DemoAgent, map[string]string{"shared.txt": "main\n", "other.txt": "main\n"}, "Change both files on main")
	require.NoError(t, err)

	agent := writeAgent(t, dir, `#!/bin/sh
set -e
git rev-parse -q --verify MERGE_HEAD >/dev/null || { echo "no merge in progress" >&2; exit 1; }
if [ "$PRLOOP_BRANCH" = resolve-me ]; then printf 'main\nresolve-me\n' > shared.txt; fi
git add -A
git -c user.name=agent -c user.email=agent@example.com commit -q --no-edit
echo "resolved the conflict"
`)
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "reviews", "PRLOOP_RESOLVE_CONFLICTS": "true"})
	ctx, rt, _ := startLoop(t, "conflict")

	// The reviewer approves every head that waits for review, with a
	// native review of that commit: an approval of one head says nothing
	// of the next.
	log := followLoop(t, ctx, rt, func(d events.Data, _ string) error {
		if d, ok := d.(*events.ReviewPending); ok {
			_, err := sim.AddReview(d.PR, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "APPROVED", CommitID: d.HeadSHA})
			return err
		}
		return nil
	})

	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range []ghref.PR{good, bad} {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "conflict")
		require.NoError(t, err)
	}
	escalated := func(pr ghref.PR) int {
		n := 0
		for _, e := range log.of(pr) {
			if d, ok := e.data.(*events.EscalationRequested); ok && d.Reason == events.ReasonMergeConflict {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool {
		return len(ofType[*events.Merged](log, good)) == 1 && len(ofType[*events.Escalated](log, bad)) == 1
	}, 3*time.Minute, 100*time.Millisecond, "the resolved PR was not merged, or the other not escalated:\n%s", log)

	// resolve-me: the agent's merge was pushed, reviewed again and merged.
	addressed := ofType[*events.FeedbackAddressed](log, good)
	require.Len(t, addressed, 1, log.lines(good))
	fix := addressed[0]
	assert.Equal(t, goodHead, fix.PreviousHeadSHA)
	assert.Contains(t, fix.Detail, "resolved a conflict with main")
	assert.Equal(t, 1, fix.FixCycle, "a resolution is a fix cycle")
	require.Len(t, ofType[*events.ConflictResolveRequested](log, good), 1, log.lines(good))
	approvedHeads := map[string]bool{}
	for _, a := range ofType[*events.ReviewApproved](log, good) {
		approvedHeads[a.HeadSHA] = true
	}
	assert.Equal(t, map[string]bool{goodHead: true, fix.HeadSHA: true}, approvedHeads, "approved before and, anew, after the resolution:\n%s", log.lines(good))
	pending := false
	firstSeen := map[string]uint64{}
	for _, e := range log.of(good) {
		if _, ok := firstSeen[e.head]; !ok && e.head != "" {
			firstSeen[e.head] = e.seq
		}
		if d, ok := e.data.(*events.ReviewPending); ok && d.HeadSHA == fix.HeadSHA {
			pending = true
		}
		if d, ok := e.data.(*events.FeedbackAddressed); ok {
			assert.Equal(t, e.seq, firstSeen[d.HeadSHA], "an event about the resolution came before its PRFeedbackAddressed:\n%s", log.lines(good))
		}
	}
	assert.True(t, pending, "the resolution waited for review again:\n%s", log.lines(good))
	assert.Zero(t, escalated(good), log.lines(good))
	merged := ofType[*events.Merged](log, good)[0]
	assert.Equal(t, fix.HeadSHA, merged.HeadSHA)
	info, err := sim.PRInfo(good)
	require.NoError(t, err)
	assert.True(t, info.Merged)
	assert.Equal(t, "main\nresolve-me", gitIn(t, sim.GitDir(demo.Repo), "show", "main:shared.txt"), "both sides' lines")
	assert.Equal(t, "new", gitIn(t, sim.GitDir(demo.Repo), "show", "main:resolve-me.txt"))

	// leave-markers: nothing pushed, one escalation.
	info, err = sim.PRInfo(bad)
	require.NoError(t, err)
	assert.False(t, info.Merged)
	assert.Equal(t, badHead, info.HeadSHA, "a refused resolution is never pushed")
	assert.Equal(t, 1, escalated(bad), log.lines(bad))
	assert.Empty(t, ofType[*events.FeedbackAddressed](log, bad))
	esc := ofType[*events.EscalationRequested](log, bad)[0]
	assert.Equal(t, "feedback", esc.Actor)
	assert.Contains(t, esc.LastError, "conflict markers left in other.txt")
}

// ofType returns the events of type T about pr, in stream order.
func ofType[T events.Data](l *causalLog, pr ghref.PR) []T {
	var out []T
	for _, e := range l.of(pr) {
		if d, ok := e.data.(T); ok {
			out = append(out, d)
		}
	}
	return out
}
