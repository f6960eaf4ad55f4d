package poller_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/poller"
)

const pullRoute = "GET /repos/{owner}/{repo}/pulls/{number}" // a kicked PR's fresh read

// deliver posts a webhook signed with secret, as GitHub does.
func deliver(t *testing.T, url string, secret []byte, event, body string) {
	t.Helper()
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(body))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "the signature is valid")
}

// TestPoller_WebhookDoesNotBypassWatchFilters: with PRLOOP_WATCH_LABEL set,
// a correctly signed webhook about an unlabelled PR of a watched
// repository does not enrol it (no event about it, no state record),
// whether it names the PR or its head; one about a labelled PR does.
func TestPoller_WebhookDoesNotBypassWatchFilters(t *testing.T) {
	t.Parallel()
	const repoPayload = `"repository":{"name":"socket.io","owner":{"login":"acme"}}`
	tests := []struct {
		name string
		// interval is the poll interval: long enough that no probe runs
		// (so only the webhook can enrol), or short so that the probe
		// learns the heads a status webhook names.
		interval     time.Duration
		event        func(pr ghref.PR, head string) (string, string)
		labelledToo  bool
		probesBefore int
	}{
		{name: "pull_request event", interval: time.Hour, labelledToo: true,
			event: func(pr ghref.PR, _ string) (string, string) {
				return "pull_request", fmt.Sprintf(`{"action":"synchronize","number":%d,"pull_request":{"number":%d},%s}`, pr.Number, pr.Number, repoPayload)
			}},
		{name: "status event naming the head", interval: 50 * time.Millisecond, probesBefore: 2,
			event: func(_ ghref.PR, head string) (string, string) {
				return "status", fmt.Sprintf(`{"sha":%q,"state":"success","context":"ci",%s}`, head, repoPayload)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t) // e.pr is unlabelled
			_, err := e.sim.PushCommit(e.repo, "labelled", "agent", map[string]string{"l.go": "package main\n"}, "Labelled")
			require.NoError(t, err)
			labelled, err := e.sim.OpenPR(e.repo, ghsim.PRInput{Title: "Labelled", Head: "labelled", Author: "agent"})
			require.NoError(t, err)
			_, err = e.client.AddLabels(t.Context(), labelled, "prloop")
			require.NoError(t, err)

			secret := []byte("webhook secret")
			s := e.start(e.config(func(c *poller.Config) {
				c.Repos, c.WatchLabel, c.PollInterval = []string{"acme/socket.io"}, "prloop", tt.interval
			}))
			hook := httptest.NewServer(poller.WebhookHandler(secret, s, quiet()))
			t.Cleanup(hook.Close)
			if tt.probesBefore > 0 {
				e.waitProbes(tt.probesBefore)
			}

			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			reads := e.sim.Stats().ByRoute[pullRoute]
			event, body := tt.event(e.pr, info.HeadSHA)
			deliver(t, hook.URL, secret, event, body)
			require.Eventually(t, func() bool { return e.sim.Stats().ByRoute[pullRoute] > reads }, waitFor, 5*time.Millisecond,
				"the webhook made the poller read the PR")
			if tt.labelledToo {
				// The repository's loop handles kicks one after another: once
				// the labelled PR is enrolled, the unlabelled one's kick is done.
				event, body := tt.event(labelled, "")
				deliver(t, hook.URL, secret, event, body)
				e.rec.Wait(t, labelled, events.TypeReviewPending, waitFor)
				_, _, err := e.store.Get(t.Context(), labelled)
				require.NoError(t, err, "the labelled PR has a state record")
			} else {
				e.waitProbes(2)
			}

			assert.Empty(t, e.rec.For(e.pr), "no event about the unlabelled PR")
			_, _, err = e.store.Get(t.Context(), e.pr)
			assert.ErrorIs(t, err, state.ErrNotFound, "no state record for the unlabelled PR")
		})
	}
}

// TestPoller_WatchRequestIsAnExplicitOptIn: an operator's watch request
// (prloop watch) enrols a PR the filters leave out, and later kicks about it
// are honoured.
func TestPoller_WatchRequestIsAnExplicitOptIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // e.pr is unlabelled
	s := e.start(e.config(func(c *poller.Config) {
		c.Repos, c.WatchLabel, c.PollInterval = []string{"acme/socket.io"}, "prloop", time.Hour
	}))
	e.watchPending()
	e.tick()
	_, err := e.sim.AddReaction(e.pr, "alice", "+1")
	require.NoError(t, err)
	s.Kick(e.pr)
	e.rec.Wait(t, e.pr, events.TypeReviewApproved, waitFor)
}
