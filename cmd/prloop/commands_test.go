package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/escalator"
)

// TestLoop_CommandsOnThePR runs the four services on five PRs and gives
// each "/prloop" command as a comment (docs/commands.md), under the
// reviews protocol alone, so that conversation comments are no change
// request unless "/prloop fix" makes them one:
//
//   - fix: alice's remark reaches the agent, who pushes a fix;
//   - dequeue, then queue: an approved PR waiting for ci leaves its queue
//     and does not merge when ci passes; queue puts it back, and it merges;
//   - priority: the priority label goes on;
//   - stop: the PR is no longer watched, and alice's approval queues nothing;
//   - retry: an escalated PR's label comes off and the loop resumes
//     (PREscalationResolved);
//   - from carol (a collaborator who may not approve) a command is refused
//     with 😕 and one reply; from mallory (a stranger) it is ignored.
//
// Each taken command is one PRCommandReceived and one 👀.
func TestLoop_CommandsOnThePR(t *testing.T) {
	// Not parallel: the services read their settings from the environment.
	dir := t.TempDir()
	sim, srv, demo := startLoopSim(t, dir)
	require.NoError(t, sim.SetPermission(demo.Repo, "carol", "read"))
	sim.AddUser("mallory", false)
	open := func(name string) (ghref.PR, string) {
		head, err := sim.PushCommit(demo.Repo, name, ghsim.DemoAgent, map[string]string{name + ".go": "package main\n"}, "Add "+name)
		require.NoError(t, err)
		pr, err := sim.OpenPR(demo.Repo, ghsim.PRInput{Title: "Add " + name, Head: name, Author: ghsim.DemoAgent})
		require.NoError(t, err)
		return pr, head
	}
	fixPR, _ := open("fixme")
	queuePR, queueHead := open("queueme")
	stopPR, _ := open("stopme")
	retryPR, _ := open("retryme")
	require.NoError(t, sim.SetStatus(demo.Repo, queueHead, "ci", "pending"))

	agent := writeAgent(t, dir, `#!/bin/sh
set -e
echo "// fixed" >> fixme.go
git -c user.name=agent -c user.email=agent@example.com commit -qam "Address the remark"
`)
	setLoopEnv(t, dir, srv.URL, demo, agent, map[string]string{"PRLOOP_REVIEW_PROTOCOLS": "reviews", "PRLOOP_REQUIRE_CHECKS": "true"})
	ctx, rt, _ := startLoop(t, "commands")
	log := followLoop(t, ctx, rt, func(events.Data, string) error { return nil })
	emit := events.NewEmitter(rt.JS, "test")
	for _, pr := range []ghref.PR{fixPR, queuePR, stopPR, retryPR} {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "commands")
		require.NoError(t, err)
	}
	for _, pr := range []ghref.PR{fixPR, queuePR, stopPR, retryPR} {
		require.Eventually(t, func() bool { return len(ofType[*events.ReviewPending](log, pr)) > 0 }, time.Minute, 20*time.Millisecond, "never watched:\n%s", log)
	}
	comment := func(pr ghref.PR, login, body string) int64 {
		t.Helper()
		id, err := sim.AddIssueComment(pr, login, body)
		require.NoError(t, err)
		return id
	}
	reactions := func(pr ghref.PR, id int64) []string {
		cs, err := sim.IssueComments(pr)
		if err != nil {
			return nil
		}
		for _, c := range cs {
			if c.ID == id {
				return c.Reactions
			}
		}
		return nil
	}
	taken := func(pr ghref.PR, id int64) bool {
		return slices.ContainsFunc(ofType[*events.CommandReceived](log, pr), func(d *events.CommandReceived) bool { return d.CommentID == id })
	}
	waitTaken := func(pr ghref.PR, id int64, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return taken(pr, id) && len(reactions(pr, id)) > 0 }, time.Minute, 20*time.Millisecond,
			"%s was not taken:\n%s", what, log.lines(pr))
		assert.Equal(t, []string{ghsim.DemoPrloop + ":eyes"}, reactions(pr, id), what)
	}

	t.Run("fix", func(t *testing.T) {
		comment(fixPR, ghsim.DemoReviewer, "Please say what this file is for.")
		id := comment(fixPR, ghsim.DemoReviewer, "/prloop fix")
		waitTaken(fixPR, id, "/prloop fix")
		require.Eventually(t, func() bool { return len(ofType[*events.FeedbackAddressed](log, fixPR)) == 1 }, time.Minute, 20*time.Millisecond,
			"the agent never fixed:\n%s", log.lines(fixPR))
		fb := ofType[*events.FeedbackReceived](log, fixPR)
		require.Len(t, fb, 1, log.lines(fixPR))
		assert.Equal(t, []string{ghsim.DemoReviewer}, fb[0].Reviewers)
		assert.Len(t, fb[0].CommentIDs, 1, "the remark, not the command")
		assert.NotContains(t, fb[0].CommentIDs, id)
	})

	t.Run("refused for a collaborator, ignored for a stranger", func(t *testing.T) {
		refused := comment(fixPR, "carol", "/prloop priority")
		ignored := comment(fixPR, "mallory", "/prloop priority")
		unknown := comment(fixPR, ghsim.DemoReviewer, "/prloop deploy")
		replies := func() []string {
			cs, err := sim.IssueComments(fixPR)
			require.NoError(t, err)
			var out []string
			for _, c := range cs {
				if strings.HasPrefix(c.Body, review.OwnMarker+"command") {
					out = append(out, c.Body)
				}
			}
			return out
		}
		require.Eventually(t, func() bool {
			return len(reactions(fixPR, refused)) > 0 && len(reactions(fixPR, unknown)) > 0 && len(replies()) >= 2
		}, time.Minute, 20*time.Millisecond, "never refused:\n%s", log.lines(fixPR))
		// Time for anything more to be posted, were it to be.
		probes := sim.Stats().ByRoute["GET /repos/{owner}/{repo}/pulls"]
		require.Eventually(t, func() bool { return sim.Stats().ByRoute["GET /repos/{owner}/{repo}/pulls"] >= probes+3 }, time.Minute, 20*time.Millisecond)
		assert.Equal(t, []string{ghsim.DemoPrloop + ":confused"}, reactions(fixPR, refused))
		assert.Equal(t, []string{ghsim.DemoPrloop + ":confused"}, reactions(fixPR, unknown))
		got := replies()
		require.Len(t, got, 2, "one reply per refusal, none to the stranger: %q", got)
		assert.Contains(t, got[0], "@carol")
		assert.Contains(t, got[1], `unknown command "deploy"`)
		assert.Empty(t, reactions(fixPR, ignored), "a stranger is not answered")
		assert.False(t, taken(fixPR, refused) || taken(fixPR, ignored) || taken(fixPR, unknown))
		info, err := sim.PRInfo(fixPR)
		require.NoError(t, err)
		assert.Empty(t, info.Labels)
	})

	t.Run("dequeue, queue and priority", func(t *testing.T) {
		_, err := sim.AddReview(queuePR, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "APPROVED"})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(ofType[*events.MergeWaiting](log, queuePR)) > 0 }, time.Minute, 20*time.Millisecond,
			"never queued to wait for ci:\n%s", log.lines(queuePR))
		id := comment(queuePR, ghsim.DemoReviewer, "/prloop dequeue")
		waitTaken(queuePR, id, "/prloop dequeue")
		require.Eventually(t, func() bool {
			return slices.ContainsFunc(ofType[*events.MergeFailed](log, queuePR), func(d *events.MergeFailed) bool { return d.Reason == events.ReasonDequeued })
		}, time.Minute, 20*time.Millisecond, "never left the queue:\n%s", log.lines(queuePR))
		require.NoError(t, sim.SetStatus(demo.Repo, queueHead, "ci", "success"))
		require.Never(t, func() bool {
			info, err := sim.PRInfo(queuePR)
			return err != nil || info.Merged
		}, 4*time.Second, 100*time.Millisecond, "merged though dequeued:\n%s", log.lines(queuePR))

		pri := comment(queuePR, ghsim.DemoReviewer, "/prloop priority")
		waitTaken(queuePR, pri, "/prloop priority")
		require.Eventually(t, func() bool {
			info, err := sim.PRInfo(queuePR)
			return err == nil && slices.Contains(info.Labels, "prloop:priority")
		}, time.Minute, 20*time.Millisecond, "the priority label never went on")

		back := comment(queuePR, ghsim.DemoReviewer, "/prloop queue")
		waitTaken(queuePR, back, "/prloop queue")
		require.Eventually(t, func() bool { return len(ofType[*events.Merged](log, queuePR)) == 1 }, time.Minute, 20*time.Millisecond,
			"never merged after /prloop queue:\n%s", log.lines(queuePR))
	})

	t.Run("stop", func(t *testing.T) {
		id := comment(stopPR, ghsim.DemoReviewer, "/prloop stop")
		waitTaken(stopPR, id, "/prloop stop")
		_, err := sim.AddReview(stopPR, ghsim.ReviewInput{Login: ghsim.DemoReviewer, State: "APPROVED"})
		require.NoError(t, err)
		require.Never(t, func() bool { return len(ofType[*events.ReviewApproved](log, stopPR)) > 0 }, 4*time.Second, 100*time.Millisecond,
			"a stopped PR was still watched:\n%s", log.lines(stopPR))
	})

	t.Run("retry", func(t *testing.T) {
		_, _, err := emit.Emit(ctx, &events.EscalationRequested{
			Base: events.Base{PR: retryPR}, Reason: events.ReasonReviewTimeout, Severity: events.SeverityBlocking, Detail: "test", Actor: "test",
		}, "commands-retry")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := sim.PRInfo(retryPR)
			return err == nil && slices.Contains(info.Labels, escalator.DefaultLabel) && len(ofType[*events.Escalated](log, retryPR)) == 1
		}, time.Minute, 20*time.Millisecond, "never escalated:\n%s", log.lines(retryPR))
		id := comment(retryPR, ghsim.DemoReviewer, "/prloop retry")
		waitTaken(retryPR, id, "/prloop retry")
		require.Eventually(t, func() bool { return len(ofType[*events.EscalationResolved](log, retryPR)) == 1 }, time.Minute, 20*time.Millisecond,
			"the loop never resumed:\n%s", log.lines(retryPR))
		info, err := sim.PRInfo(retryPR)
		require.NoError(t, err)
		assert.NotContains(t, info.Labels, escalator.DefaultLabel)
		assert.Equal(t, 1, ofType[*events.EscalationResolved](log, retryPR)[0].Epoch)
	})

	// Each taken command once: one event per comment.
	for _, pr := range []ghref.PR{fixPR, queuePR, stopPR, retryPR} {
		seen := map[int64]int{}
		for _, d := range ofType[*events.CommandReceived](log, pr) {
			seen[d.CommentID]++
		}
		for id, n := range seen {
			assert.Equal(t, 1, n, fmt.Sprintf("%s comment %d", pr, id))
		}
	}
}
