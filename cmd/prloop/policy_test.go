package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/policy"
	"github.com/prloop/prloop/pkg/prstatus"
)

// TestLoop_RepositoryPolicies runs the four services in one process over
// three repositories, each with its own .github/prloop.yml on main, and
// checks that each file is honoured:
//
//   - demo/widgets: reviewers [bob], merge by rebase, no fixes
//     (max_fix_cycles 0), and release/* overridden to merge commits
//     approved by the team @demo/release: alice's 👍 (the operator's
//     reviewer) does not approve there, bob's does and the PR is
//     rebased; a change request is escalated without an agent run; a team
//     member's 👍 approves a PR on release/1 and it merges with a merge
//     commit.
//   - demo/gadgets: method squash, which the operator does not allow
//     (PRLOOP_MERGE_METHODS=merge,rebase): the ceiling makes it a merge
//     commit; one fix allowed, so a change request reaches the agent.
//   - demo/gizmos: approval by the quorum bot alone; a PR that changes
//     the policy file is held for a person ("waiting for a human
//     approval") until alice approves it, while a PR that does not change
//     it merges on the bot's review.
//   - demo/broken: an invalid file fails closed: alice's 👍 approves
//     nothing, the status line names file, line and key; fixing the file on
//     main recovers the PR without anyone touching it, and it merges.
func TestLoop_RepositoryPolicies(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	const bot = "review-bot[bot]"
	sim.AddUser("bob", false)
	sim.AddUser(bot, true)
	require.NoError(t, sim.SetTeamMember("demo", "release", "carol", "active"))

	files := map[string]string{
		"widgets": "version: 1\nreview:\n  reviewers: [bob]\nfeedback:\n  max_fix_cycles: 0\nmerge:\n  method: rebase\n" +
			"escalation:\n  label: widgets-needs-a-human\n  mentions: [\"@demo/release\"]\n" +
			"branches:\n  \"release/*\": { merge: { method: merge }, review: { reviewers: [\"@demo/release\"] } }\n",
		"gadgets": "version: 1\nfeedback:\n  max_fix_cycles: 1\nmerge:\n  method: squash\n",
		"gizmos":  "version: 1\nreview:\n  protocols: [emoji, quorum]\n  quorum: [\"" + bot + "\"]\n",
		"broken":  "version: 1\nreview:\n  protocols: [emoji]\n  reviwers: [alice]\n",
	}
	repos := map[string]ghref.Repo{"widgets": demo.Repo}
	for name, file := range files {
		repo := ghref.Repo{Owner: ghsim.DemoOwner, Name: name}
		if name != "widgets" {
			var err error
			repo, err = sim.CreateRepo(ghsim.DemoOwner, name, map[string]string{"README.md": "# " + name + "\n"})
			require.NoError(t, err)
			for _, login := range []string{ghsim.DemoReviewer, ghsim.DemoAgent, ghsim.DemoPrloop} {
				require.NoError(t, sim.SetPermission(repo, login, "write"))
			}
		}
		require.NoError(t, sim.SetPermission(repo, "bob", "write"))
		_, err := sim.PushCommit(repo, "main", ghsim.DemoReviewer, map[string]string{policy.Path: file}, "policy")
		require.NoError(t, err)
		repos[name] = repo
	}
	gitIn(t, sim.GitDir(repos["widgets"]), "branch", "release/1", "main")

	open := func(repo ghref.Repo, branch, base string, change map[string]string) (ghref.PR, string) {
		t.Helper()
		head, err := sim.PushCommit(repo, branch, ghsim.DemoAgent, change, "Change "+branch)
		require.NoError(t, err)
		pr, err := sim.OpenPR(repo, ghsim.PRInput{Title: "Change " + branch, Head: branch, Base: base, Author: ghsim.DemoAgent})
		require.NoError(t, err)
		return pr, head
	}
	widgetsMain, _ := open(repos["widgets"], "w-main", "main", map[string]string{"a.txt": "a\n"})
	widgetsFix, widgetsFixHead := open(repos["widgets"], "w-fix", "main", map[string]string{"b.txt": "b\n"})
	widgetsRelease, releaseHead := open(repos["widgets"], "w-release", "release/1", map[string]string{"c.txt": "c\n"})
	gadgetsMain, gadgetsHead := open(repos["gadgets"], "g-main", "main", map[string]string{"a.txt": "a\n"})
	gadgetsFix, gadgetsFixHead := open(repos["gadgets"], "g-fix", "main", map[string]string{"b.txt": "b\n"})
	gizmosPlain, _ := open(repos["gizmos"], "z-plain", "main", map[string]string{"a.txt": "a\n"})
	gizmosLoosen, _ := open(repos["gizmos"], "z-loosen", "main", map[string]string{policy.Path: "version: 1\nreview:\n  protocols: [quorum]\n  quorum: [\"" + bot + "\"]\n"})
	brokenPR, brokenHead := open(repos["broken"], "b-main", "main", map[string]string{"a.txt": "a\n"})
	prs := []ghref.PR{widgetsMain, widgetsFix, widgetsRelease, gadgetsMain, gadgetsFix, gizmosPlain, gizmosLoosen, brokenPR}

	agent := writeAgent(t, dir, "#!/bin/sh\necho 'nothing to change'\n")
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{
		"PRLOOP_REVIEW_PROTOCOLS": "emoji,reviews", "PRLOOP_REVIEWERS": ghsim.DemoReviewer,
		"PRLOOP_MERGE_METHOD": "squash", "PRLOOP_MERGE_METHODS": "merge,rebase", "PRLOOP_MAX_FIX_CYCLES": "2",
		"PRLOOP_STATUS_COALESCE": "0s",
	})
	ctx, rt, _ := startLoop(t, "policy")
	log := followLoop(t, ctx, rt, func(events.Data, string) error { return nil })
	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range prs {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "policy")
		require.NoError(t, err)
	}
	for _, pr := range prs {
		require.Eventually(t, func() bool { return len(ofType[*events.ReviewPending](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "never watched %s:\n%s", pr, log)
	}
	react := func(pr ghref.PR, login string) {
		t.Helper()
		_, err := sim.AddReaction(pr, login, "+1")
		require.NoError(t, err)
	}
	merged := func(pr ghref.PR) *events.Merged {
		t.Helper()
		require.Eventually(t, func() bool { return len(ofType[*events.Merged](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "%s never merged:\n%s", pr, log.lines(pr))
		return ofType[*events.Merged](log, pr)[0]
	}

	// widgets: the operator's reviewer is not this repository's.
	react(widgetsMain, ghsim.DemoReviewer)
	react(widgetsRelease, ghsim.DemoReviewer)
	react(widgetsRelease, "bob")
	require.Never(t, func() bool {
		return len(ofType[*events.ReviewApproved](log, widgetsMain)) > 0 || len(ofType[*events.ReviewApproved](log, widgetsRelease)) > 0
	}, 3*time.Second, 100*time.Millisecond, "approved by a reviewer the file does not name:\n%s%s", log.lines(widgetsMain), log.lines(widgetsRelease))
	react(widgetsMain, "bob")
	react(widgetsRelease, "carol") // of @demo/release
	assert.Equal(t, "rebase", merged(widgetsMain).MergeMethod)
	assert.Equal(t, "merge", merged(widgetsRelease).MergeMethod, "release/* overrides the method")
	assert.Equal(t, []string{"carol"}, ofType[*events.ReviewApproved](log, widgetsRelease)[0].Approvers, "a team member approves")

	// gadgets: the file's method is beyond the operator's ceiling.
	react(gadgetsMain, ghsim.DemoReviewer)
	assert.Equal(t, "merge", merged(gadgetsMain).MergeMethod, "PRLOOP_MERGE_METHODS cuts the file's squash to the first allowed method")
	// The warning rides on the approval, and the status line says it. The
	// line is drawn from the event rather than read from GitHub's statuses:
	// the status writer coalesces, and with the merge right behind the
	// approval (a loaded machine) the approved line may never be written.
	approved := ofType[*events.ReviewApproved](log, gadgetsMain)
	require.NotEmpty(t, approved)
	assert.Equal(t, "ceiling: merge.method=merge", approved[0].PolicyWarning)
	b := prstatus.NewBoard()
	b.Apply(approved[0], time.Now())
	assert.Equal(t, "approved by alice (ceiling: merge.method=merge)", b.Line(gadgetsMain, prstatus.Options{}).Text, "the status line does not warn of the ceiling")

	// Fix limits: widgets allows none, gadgets one.
	_, err := sim.AddReview(widgetsFix, ghsim.ReviewInput{Login: "bob", State: "CHANGES_REQUESTED", Body: "Please rename b.txt.", CommitID: widgetsFixHead})
	require.NoError(t, err)
	_, err = sim.AddReview(gadgetsFix, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "CHANGES_REQUESTED", Body: "Please rename b.txt.", CommitID: gadgetsFixHead})
	require.NoError(t, err)
	escalated := func(pr ghref.PR) []events.Reason {
		var out []events.Reason
		for _, e := range ofType[*events.EscalationRequested](log, pr) {
			out = append(out, e.Reason)
		}
		return out
	}
	require.Eventually(t, func() bool { return len(escalated(widgetsFix)) > 0 }, time.Minute, 20*time.Millisecond, "no escalation:\n%s", log.lines(widgetsFix))
	assert.Equal(t, []events.Reason{events.ReasonMaxFixCycles}, escalated(widgetsFix), log.lines(widgetsFix))
	require.Eventually(t, func() bool {
		info, err := sim.PRInfo(widgetsFix)
		require.NoError(t, err)
		return slices.Contains(info.Labels, "widgets-needs-a-human")
	}, time.Minute, 20*time.Millisecond, "the escalator did not use the file's label:\n%s", log.lines(widgetsFix))
	require.Eventually(t, func() bool {
		cs, err := sim.IssueComments(widgetsFix)
		require.NoError(t, err)
		return slices.ContainsFunc(cs, func(c ghsim.CommentSnapshot) bool { return strings.Contains(c.Body, "@demo/release") })
	}, time.Minute, 20*time.Millisecond, "the escalation does not mention the file's team")
	require.Eventually(t, func() bool {
		return len(ofType[*events.FeedbackSkipped](log, gadgetsFix))+len(ofType[*events.FeedbackAddressed](log, gadgetsFix))+len(escalated(gadgetsFix)) > 0
	}, time.Minute, 20*time.Millisecond, "the agent never answered:\n%s", log.lines(gadgetsFix))
	assert.NotContains(t, escalated(gadgetsFix), events.ReasonMaxFixCycles, "gadgets allows a fix:\n%s", log.lines(gadgetsFix))

	// gizmos: the bot's review merges a PR, not one that changes the file.
	for _, pr := range []ghref.PR{gizmosPlain, gizmosLoosen} {
		_, err := sim.AddIssueComment(pr, bot, "Reviewed: no findings.")
		require.NoError(t, err)
	}
	merged(gizmosPlain)
	require.Eventually(t, func() bool {
		for _, e := range ofType[*events.ReviewPending](log, gizmosLoosen) {
			if e.Detail == policy.NeedsHuman {
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "not held for a person:\n%s", log.lines(gizmosLoosen))
	require.Never(t, func() bool {
		info, err := sim.PRInfo(gizmosLoosen)
		return err != nil || info.Merged
	}, 3*time.Second, 100*time.Millisecond, "a change of the policy merged on a bot's review:\n%s", log.lines(gizmosLoosen))
	assert.Empty(t, ofType[*events.ReviewApproved](log, gizmosLoosen), log.lines(gizmosLoosen))
	react(gizmosLoosen, ghsim.DemoReviewer)
	merged(gizmosLoosen)

	// broken: fails closed with the problem on the status line.
	react(brokenPR, ghsim.DemoReviewer)
	const problem = `.github/prloop.yml:4: unknown key "reviwers" (did you mean "reviewers"?)`
	require.Eventually(t, func() bool {
		st, err := sim.Statuses(repos["broken"], "prloop")
		require.NoError(t, err)
		return len(st) > 0 && st[len(st)-1].SHA == brokenHead && st[len(st)-1].Description == problem && st[len(st)-1].State == "error"
	}, time.Minute, 50*time.Millisecond, "the status line does not say what is wrong:\n%s", log.lines(brokenPR))
	require.Never(t, func() bool { return len(ofType[*events.ReviewApproved](log, brokenPR)) > 0 }, 2*time.Second, 100*time.Millisecond,
		"approved under an invalid policy:\n%s", log.lines(brokenPR))
	_, err = sim.PushCommit(repos["broken"], "main", ghsim.DemoReviewer, map[string]string{policy.Path: strings.Replace(files["broken"], "reviwers", "reviewers", 1)}, "fix the policy")
	require.NoError(t, err)
	merged(brokenPR)

	// prloop explain: the effective policy of a PR and where each value
	// came from.
	p, skipped := explainPolicy(ctx, widgetsRelease, &liveState{Base: "release/1", Head: releaseHead})
	require.NotNil(t, p, skipped)
	assert.Equal(t, "release/*", p.Branch)
	assert.Contains(t, p.Settings, policy.Line{Key: "merge.method", Value: "merge", From: `branches."release/*"`})
	assert.Contains(t, p.Settings, policy.Line{Key: "feedback.max_fix_cycles", Value: "0", From: policy.FromFile})
	assert.Contains(t, p.Settings, policy.Line{Key: "review.protocols", Value: "[emoji, reviews]", From: policy.FromOperator})
	p, skipped = explainPolicy(ctx, gadgetsMain, &liveState{Base: "main", Head: gadgetsHead})
	require.NotNil(t, p, skipped)
	assert.Contains(t, p.Settings, policy.Line{Key: "merge.method", Value: "merge", From: policy.FromCeiling})
	assert.Equal(t, []string{"merge.method squash is not allowed by the operator (PRLOOP_MERGE_METHODS=merge,rebase); using merge"}, p.Warnings)
}
