package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/poller"
)

// playDemo plays the demo's world in this process, as `prloop demo -keep`
// does, until both PRs reached their end (one merged, one escalated for
// review_timeout), and points the operator commands at its NATS and its
// simulator. Not parallel: the services read their settings from the
// environment.
func playDemo(t *testing.T) *demoWorld {
	t.Helper()
	w, err := newDemoWorld(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.close)
	for k, v := range demoEnv(w) {
		t.Setenv(k, v)
	}
	clock := &demoClock{}
	ctx, rt, services := startLoop(t, "explain-test", clock.Now)

	play := &demoPlay{w: w, clock: clock, out: io.Discard, start: time.Now()}
	for _, s := range services {
		if ps, ok := s.(*poller.Service); ok && ps.StatusWriter() != nil {
			ps.StatusWriter().SetOnWrite(play.onStatus) // the play ends with the final status lines
		}
	}
	cons, err := rt.JS.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	cc, err := cons.Consume(play.onMessage)
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	emit := events.NewEmitter(rt.JS, "demo-agent")
	for _, pr := range []ghref.PR{w.reviewed, w.neglected} {
		_, _, err := emit.Emit(ctx, &events.WatchRequested{Base: events.Base{PR: pr}, Actor: ghsim.DemoAgent}, "demo")
		require.NoError(t, err)
	}
	done := play.done()
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, 2*time.Minute, 50*time.Millisecond, "the demo did not reach its end")

	t.Setenv("PRLOOP_NATS_URL", rt.Conn.URL)
	t.Setenv("PRLOOP_NATS_CREDS_FILE", rt.Conn.CredsFile)
	return w
}

// TestExplainAndStatus_AfterTheDemo runs the demo's world and asks `prloop
// explain` and `prloop status` about its two PRs: the merged one and the
// one escalated because nobody reviewed it.
func TestExplainAndStatus_AfterTheDemo(t *testing.T) {
	w := playDemo(t)
	label := escalator.DefaultLabel
	q := regexp.QuoteMeta

	t.Run("explain", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pr   string
			want []string
		}{
			{name: "escalated for review_timeout", pr: w.neglected.String(), want: []string{
				"^" + q(w.neglected.String()+": needs a human: review timeout (label "+label+")") + "\n",
				`ReviewTimeout\s+[0-9a-f]{7}`, `PREscalated\s+[0-9a-f]{7}`,
				`label\s+` + q(label+": present"),
				`escalation\s+review_timeout \(no review in time\)`,
				`to clear it\s+` + q(escalator.ResumeStep(label)),
				"next: " + q(escalator.ReviewStep+" Or: "+escalator.ResumeStep(label)) + "\n$",
			}},
			{name: "by URL", pr: "https://github.com/demo/widgets/pull/2", want: []string{"needs a human: review timeout"}},
			{name: "merged", pr: w.reviewed.String(), want: []string{
				"^" + q(w.reviewed.String()+": merged as ") + "[0-9a-f]{7}\n",
				`PRFeedbackAddressed\s+[0-9a-f]{7}\s+feedback`, `PRReviewApproved\s+[0-9a-f]{7}\s+alice`, `PRMerged\s+[0-9a-f]{7}\s+merger`,
				`state\s+merged`,
				`fix cycles\s+1 used, 1 left \(PRLOOP_MAX_FIX_CYCLES=2\)`,
				`escalation\s+none`,
				"next: nothing: it is merged\n$",
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var out bytes.Buffer
				require.NoError(t, runExplain(t.Context(), []string{tc.pr}, &out, io.Discard))
				for _, want := range tc.want {
					assert.Regexp(t, want, out.String())
				}
			})
		}
	})

	t.Run("explain -json", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name  string
			pr    ghref.PR
			check func(t *testing.T, x explanation)
		}{
			{name: "escalated", pr: w.neglected, check: func(t *testing.T, x explanation) {
				assert.Equal(t, "error", string(x.Line.State))
				require.NotNil(t, x.GitHub, x.GitHubSkipped)
				assert.True(t, x.GitHub.LabelPresent)
				assert.Equal(t, "open", x.GitHub.State)
				assert.Empty(t, x.GitHub.ChecksFailed, "prloop's own status (error: needs a human) is not a check of the PR")
				assert.Empty(t, x.GitHub.ChecksPending)
				require.NotNil(t, x.Records)
				require.NotNil(t, x.Records.Escalation)
				assert.Equal(t, events.ReasonReviewTimeout, x.Records.Escalation.Reason)
				assert.Contains(t, x.Records.Escalated, events.ReasonReviewTimeout)
				assert.Equal(t, []string{ghsim.DemoReviewer}, x.Records.Reviewers)
				assert.Contains(t, x.Next, escalator.ResumeStep(escalator.DefaultLabel))
			}},
			{name: "merged", pr: w.reviewed, check: func(t *testing.T, x explanation) {
				assert.Equal(t, "success", string(x.Line.State))
				require.NotNil(t, x.GitHub, x.GitHubSkipped)
				assert.Equal(t, "merged", x.GitHub.State)
				require.NotNil(t, x.Records)
				assert.Equal(t, []string{ghsim.DemoReviewer}, x.Records.Approvers)
				assert.Nil(t, x.Records.Queue)
				require.NotEmpty(t, x.History)
				last := x.History[len(x.History)-1]
				assert.Equal(t, events.TypeMerged, last.Type)
				assert.Len(t, last.Head, 40)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var out bytes.Buffer
				require.NoError(t, runExplain(t.Context(), []string{"-json", tc.pr.String()}, &out, io.Discard))
				var x explanation
				require.NoError(t, json.Unmarshal(out.Bytes(), &x), out.String())
				var raw map[string]any
				require.NoError(t, json.Unmarshal(out.Bytes(), &raw))
				for _, key := range []string{"pr", "history", "line", "github", "records", "next"} {
					assert.Contains(t, raw, key)
				}
				assert.Equal(t, tc.pr.String(), x.PR.String())
				tc.check(t, x)
			})
		}
	})

	t.Run("status", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		require.NoError(t, runStatus(t.Context(), nil, &out, io.Discard))
		lines := strings.Split(out.String(), "\n")
		require.GreaterOrEqual(t, len(lines), 3, out.String())
		assert.Contains(t, lines[0], "REASON")
		row := func(pr ghref.PR) string {
			for _, l := range lines {
				if strings.HasPrefix(l, pr.String()+" ") {
					return l
				}
			}
			return ""
		}
		assert.Regexp(t, `success\s+[0-9a-f]{7}\s+1\s+PRMerged \(\d+s ago\)\s+merged as [0-9a-f]{7}$`, row(w.reviewed), out.String())
		assert.Regexp(t, `error\s+[0-9a-f]{7}\s+0\s+PREscalated \(\d+s ago\)\s+needs a human: review timeout \(label human-review-required\)$`, row(w.neglected), out.String())
	})

	t.Run("status -json", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		require.NoError(t, runStatus(t.Context(), []string{"-json"}, &out, io.Discard))
		var doc struct {
			Schema string `json:"schema"`
			PRs    []struct {
				PR         string        `json:"pr"`
				Head       string        `json:"head_sha"`
				LastEvent  events.Type   `json:"last_event"`
				State      string        `json:"state"`
				Line       string        `json:"line"`
				Merged     bool          `json:"merged"`
				Escalation events.Reason `json:"escalation"`
			} `json:"prs"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
		assert.Equal(t, StatusSchema, doc.Schema)
		rows := doc.PRs
		require.Len(t, rows, 2, out.String())
		assert.Equal(t, w.reviewed.String(), rows[0].PR)
		assert.Equal(t, events.TypeMerged, rows[0].LastEvent)
		assert.Equal(t, "success", rows[0].State)
		assert.True(t, rows[0].Merged)
		assert.Regexp(t, `^merged as [0-9a-f]{7}$`, rows[0].Line)
		assert.NotEmpty(t, rows[0].Head)
		assert.Equal(t, events.TypeEscalated, rows[1].LastEvent)
		assert.Equal(t, "error", rows[1].State)
		assert.Equal(t, events.ReasonReviewTimeout, rows[1].Escalation)
	})

	t.Run("status -watch", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := &proctest.Buffer{}
		done := make(chan error, 1)
		go func() { done <- runStatus(ctx, []string{"-watch"}, out, io.Discard) }()
		// Not a terminal: one table after another, redrawn every second.
		require.Eventually(t, func() bool { return strings.Count(out.String(), "REASON") >= 2 }, 30*time.Second, 50*time.Millisecond, out.String())
		assert.NotContains(t, out.String(), "\x1b[")
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("prloop status -watch did not stop when its context ended")
		}
	})
}

// TestExplain_DemoPRWithoutNATS checks the hint `prloop explain` gives
// about a demo PR once the demo's NATS is gone.
func TestExplain_DemoPRWithoutNATS(t *testing.T) {
	t.Setenv("PRLOOP_NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("PRLOOP_NATS_CREDS_FILE", "")
	t.Setenv("PRLOOP_DATA_DIR", t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err := runExplain(ctx, []string{"demo/widgets#2"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prloop demo -keep")
}
