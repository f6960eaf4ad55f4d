package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/events/eventstest"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/proctest"
)

// TestEndToEnd_SeparateProcesses runs NATS (the real nats-server), the
// GitHub simulator (prloop ghsim) and the four service binaries as separate
// processes, and drives a PR through the whole loop with a reviewer acting
// over the simulator's HTTP API: proof that the services share nothing but
// JetStream.
func TestEndToEnd_SeparateProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	// NATS as deployed (deploy/nats/nats.conf): every service its own user,
	// allowed only its own event types and buckets. The test is the
	// operator (cli): it asks to watch and reads the events.
	natsURL := startDeployNATS(t)
	conn := connectAs(t, natsURL, events.PublisherCLI)

	// The simulator, its own process.
	prloop := proctest.Build(t, "./cmd/prloop")
	sim := proctest.Start(t, prloop, nil, "ghsim", "-addr", "127.0.0.1:0", "-dir", filepath.Join(dir, "github"))
	urlRE := regexp.MustCompile(`listening on (http://\S+)`)
	var simURL string
	require.Eventually(t, func() bool {
		m := urlRE.FindStringSubmatch(sim.Stdout.String())
		if m != nil {
			simURL = m[1]
		}
		return m != nil && strings.Contains(sim.Stdout.String(), "prloop-demo-token")
	}, 30*time.Second, 20*time.Millisecond)

	agent := filepath.Join(dir, "agent", "agent.sh")
	require.NoError(t, os.Mkdir(filepath.Dir(agent), 0o755))
	require.NoError(t, os.WriteFile(agent, []byte(demoAgent), 0o755))
	env := []string{
		"PRLOOP_NATS_URL=" + natsURL, "PRLOOP_GITHUB_API_URL=" + simURL, "GITHUB_TOKEN=prloop-demo-token", "GH_TOKEN=",
		"PRLOOP_GITHUB_LOGIN=prloop-bot", "PRLOOP_REVIEWERS=alice", "PRLOOP_POLL_INTERVAL=1s", "PRLOOP_REPOS=",
		"PRLOOP_HTTP_ADDR=127.0.0.1:0", "PRLOOP_LOG_FORMAT=json", "PRLOOP_REVIEW_TIMEOUT=10m",
		"PRLOOP_AGENT_CMD=sh " + agent, "PRLOOP_AGENT_READONLY_PATHS=" + filepath.Dir(agent), "PRLOOP_WORKSPACE_DIR=" + filepath.Join(dir, "work"), "PRLOOP_AGENT_BACKOFF=1s",
		"PRLOOP_MERGE_POLL_INTERVAL=1s",
	}
	for _, name := range []string{"poller", "feedback", "merger", "escalator"} {
		bin := proctest.Build(t, "./services/"+name+"/cmd/"+name)
		creds, _ := testNKey(t, name)
		p := proctest.Start(t, bin, append(env, "PRLOOP_NATS_CREDS_FILE="+creds))
		require.Eventually(t, func() bool { return strings.Contains(p.Stderr.String(), `"msg":"ready"`) }, 30*time.Second, 20*time.Millisecond, "%s never got ready", name)
		t.Cleanup(func() {
			assert.NotContains(t, p.Stderr.String(), "ermissions", "%s was refused something it needs", name)
		})
	}
	rec := eventstest.Record(t, conn.JS)

	pr := ghref.PR{Owner: "demo", Repo: "widgets", Number: 1}
	alice := reviewer{t: t, base: simURL, token: "alice-demo-token"}
	_, _, err := events.NewEmitter(conn.JS, events.PublisherCLI).Emit(t.Context(), &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "1")
	require.NoError(t, err)

	const wait = 30 * time.Second
	rec.Wait(t, pr, events.TypeReviewPending, wait)
	eyes := alice.call(http.MethodPost, "/repos/demo/widgets/issues/1/reactions", map[string]any{"content": "eyes"})
	rec.Wait(t, pr, events.TypeReviewInProgress, wait)
	alice.call(http.MethodPost, "/repos/demo/widgets/issues/1/comments", map[string]any{"body": "An empty name gives \"hello \"; greet the world instead."})
	alice.call(http.MethodDelete, "/repos/demo/widgets/issues/1/reactions/"+strconv.FormatInt(int64(eyes["id"].(float64)), 10), nil)
	rec.Wait(t, pr, events.TypeFeedbackReceived, wait)
	fixed := rec.Wait(t, pr, events.TypeFeedbackAddressed, wait).Data.(*events.FeedbackAddressed)
	rec.WaitCount(t, pr, events.TypeReviewPending, 2, wait)
	alice.call(http.MethodPost, "/repos/demo/widgets/issues/1/reactions", map[string]any{"content": "+1"})
	approved := rec.Wait(t, pr, events.TypeReviewApproved, wait).Data.(*events.ReviewApproved)
	assert.Equal(t, fixed.HeadSHA, approved.HeadSHA, "the fixed head is what was approved")
	merged := rec.Wait(t, pr, events.TypeMerged, wait).Data.(*events.Merged)

	got := alice.call(http.MethodGet, "/repos/demo/widgets/pulls/1", nil)
	assert.Equal(t, true, got["merged"])
	assert.Equal(t, merged.MergeSHA, got["merge_commit_sha"])
	assert.Equal(t, []events.Type{
		events.TypeWatchRequested, events.TypeReviewPending, events.TypeReviewInProgress, events.TypeFeedbackReceived,
		events.TypeFeedbackAddressed, events.TypeReviewPending, events.TypeReviewApproved, events.TypeMergeQueued, events.TypeMerged,
	}, rec.Types(pr))
}

// reviewer acts on the simulator over HTTP with a user's token.
type reviewer struct {
	t           *testing.T
	base, token string
}

func (r reviewer) call(method, path string, body any) map[string]any {
	r.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(r.t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(r.t.Context(), method, strings.TrimSuffix(r.base, "/")+path, rd)
	require.NoError(r.t, err)
	req.Header.Set("Authorization", "token "+r.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	require.Less(r.t, resp.StatusCode, 300, "%s %s", method, path)
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
