package feedback_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/review"
	"github.com/prloop/prloop/services/feedback"
)

// TestFeedback_TellsTheReviewers: after a fix, the reviewer whose review
// asked for it is asked again, the one who asked by comment is mentioned,
// each inline thread gets "addressed in <sha>", and one comment carries the
// agent's summary, fenced. A reviewer GitHub will not ask (not a
// collaborator) is mentioned instead. A redelivery after the outcome was
// recorded, and a resume of an attempt that crashed after telling them but
// before recording it, post nothing more; with PRLOOP_DRY_RUN, or
// PRLOOP_NOTIFY_REVIEWERS=false, nothing is posted at all.
func TestFeedback_TellsTheReviewers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mut    func(*feedback.Config)
		posted bool
	}{
		{name: "notify", mut: func(c *feedback.Config) { c.NotifyReviewers = true }, posted: true},
		{name: "dry run logs instead", mut: func(c *feedback.Config) { c.NotifyReviewers, c.DryRun = true, true }},
		{name: "off", mut: func(c *feedback.Config) { c.NotifyReviewers = false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 100)
			require.NoError(t, e.sim.SetPermission(e.repo, "carol", "write"))
			e.sim.Advance(time.Second)
			_, err := e.sim.AddReview(e.pr, ghsim.ReviewInput{Login: "alice", State: "CHANGES_REQUESTED", Body: "a few things",
				Comments: []ghsim.ReviewCommentInput{{Path: "main.go", Line: 3, Body: "main does nothing; print a greeting"}}})
			require.NoError(t, err)
			_, err = e.sim.AddIssueComment(e.pr, "carol", "and please say hello")
			require.NoError(t, err)
			// dave counts by PRLOOP_REVIEWERS but is no collaborator: GitHub
			// refuses to ask him for a review.
			daveThread, err := e.sim.AddReviewComment(e.pr, ghsim.ReviewCommentInput{Login: "dave", Path: "main.go", Line: 1, Body: "package doc missing"})
			require.NoError(t, err)
			cfg := e.config("summary.sh", func(c *feedback.Config) { c.Reviewers = []string{"alice", "carol", "dave"} }, tt.mut)
			inst := e.start("a", cfg)
			e.request(e.pr, e.head, 0)

			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, waitFor).Data.(*events.FeedbackAddressed)
			e.consumerSettled()
			short := ghref.ShortSHA(ev.HeadSHA)
			if !tt.posted {
				assert.Empty(t, e.notes(), "no note")
				assert.Empty(t, e.replies(ev.HeadSHA), "no reply")
				assert.Empty(t, e.requested(), "nobody asked")
				if tt.name == "dry run logs instead" {
					assert.Contains(t, e.logs.String(), "dry run: would tell the reviewers of the fix")
				}
				return
			}
			assertTold := func(when string) {
				t.Helper()
				notes := e.notes()
				require.Len(t, notes, 1, "%s: one note", when)
				note := notes[0]
				assert.True(t, strings.HasPrefix(note, review.OwnMarker+"notify head="+ev.HeadSHA+" -->\n"), "%s: marker first:\n%s", when, note)
				assert.Contains(t, note, short+" (fix cycle 1)")
				assert.Contains(t, note, "@carol @dave ", "who asked by comment, and whom GitHub would not ask, are mentioned")
				assert.Contains(t, note, "Review requested again from alice.")
				assert.Contains(t, note, "````text\nAdded the greeting main was missing.\n```\n@everyone", "the agent's summary, fenced so it cannot break out")
				assert.Equal(t, 1, strings.Count(note, review.OwnMarker), "the agent's hidden marker is gone:\n%s", note)
				assert.Equal(t, []string{"alice"}, e.requested(), "%s: alice asked again; dave refused by GitHub", when)
				replies := e.replies(ev.HeadSHA)
				require.Len(t, replies, 2, "%s: one reply per thread", when)
				threads := map[int64]string{}
				for _, r := range replies {
					threads[r.GetInReplyTo()] = r.GetBody()
				}
				assert.Contains(t, threads, daveThread)
				for _, body := range threads {
					assert.True(t, strings.HasSuffix(body, "\naddressed in "+short), body)
				}
			}
			assertTold("after the fix")
			assert.Contains(t, e.logs.String(), "GitHub refused to request a review")

			// Redelivered after the outcome was recorded: nothing more.
			e.request(e.pr, e.head, 0, "again")
			e.consumerSettled()
			assertTold("after a redelivery")

			// A crash after telling them but before the outcome was
			// recorded: the resume publishes again and tells nobody twice.
			inst.stop()
			e.forgetOutcome()
			e.start("b", cfg)
			e.request(e.pr, e.head, 0, "resumed")
			e.consumerSettled()
			require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), "reviewers already told of the fix") },
				waitFor, 20*time.Millisecond, "the resume found the note")
			assertTold("after a resume")
			runs, _ := e.runs()
			assert.Len(t, runs, 1, "the resume ran no agent")
		})
	}
}

// notes are prloop's notes about fixes on the PR.
func (e *env) notes() []string {
	e.t.Helper()
	cs, err := e.client.ListIssueComments(e.t.Context(), e.pr, time.Time{})
	require.NoError(e.t, err)
	var out []string
	for _, c := range cs {
		if strings.HasPrefix(c.GetBody(), review.OwnMarker+"notify ") {
			out = append(out, c.GetBody())
		}
	}
	return out
}

// replies are prloop's replies in review threads about head.
func (e *env) replies(head string) []*gh.PullRequestComment {
	e.t.Helper()
	cs, err := e.client.ListReviewComments(e.t.Context(), e.pr)
	require.NoError(e.t, err)
	var out []*gh.PullRequestComment
	for _, c := range cs {
		if strings.HasPrefix(c.GetBody(), review.OwnMarker+"notify-reply head="+head) {
			out = append(out, c)
		}
	}
	return out
}

// requested are the PR's requested reviewers.
func (e *env) requested() []string {
	e.t.Helper()
	p, err := e.client.GetPull(e.t.Context(), e.pr)
	require.NoError(e.t, err)
	var out []string
	for _, u := range p.RequestedReviewers {
		out = append(out, u.GetLogin())
	}
	return out
}

// forgetOutcome turns the PR's record back into that of an attempt that
// pushed and published its fix but crashed before recording the outcome.
func (e *env) forgetOutcome() {
	e.t.Helper()
	kv, err := e.conn.JS.KeyValue(e.t.Context(), feedback.Bucket)
	require.NoError(e.t, err)
	key := "attempt." + events.PRKey(e.pr)
	entry, err := kv.Get(e.t.Context(), key)
	require.NoError(e.t, err)
	var rec feedback.Record
	require.NoError(e.t, json.Unmarshal(entry.Value(), &rec))
	require.Equal(e.t, feedback.OutcomeAddressed, rec.Outcome)
	rec.Outcome, rec.NewHead, rec.Phase = "", "", feedback.PhasePushed
	b, err := json.Marshal(rec)
	require.NoError(e.t, err)
	_, err = kv.Update(e.t.Context(), key, b, entry.Revision())
	require.NoError(e.t, err)
}
