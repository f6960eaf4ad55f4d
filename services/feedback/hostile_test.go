package feedback_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

// requireSandbox returns whether mode works here; when it does not, the
// test is skipped, or fails where PRLOOP_TEST_REQUIRE_SANDBOX=1 says both
// sandboxes must be tested (CI installs bubblewrap for that).
func requireSandbox(t *testing.T, mode sandbox.Mode) {
	t.Helper()
	if _, err := sandbox.New(sandbox.Options{Mode: mode}, slog.New(slog.DiscardHandler)); err != nil {
		if os.Getenv("PRLOOP_TEST_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("sandbox %s does not work here and PRLOOP_TEST_REQUIRE_SANDBOX=1: %v", mode, err)
		}
		t.Skipf("sandbox %s does not work here: %v", mode, err)
	}
}

// trap is the hostile agent's own listener: it records every request.
type trap struct {
	mu   sync.Mutex
	reqs []string
}

func (tr *trap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	_ = r.Header.Write(&b)
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	tr.mu.Lock()
	tr.reqs = append(tr.reqs, r.Method+" "+r.URL.String()+"\n"+b.String()+"\n"+string(body))
	tr.mu.Unlock()
	w.WriteHeader(http.StatusUnauthorized)
}

func (tr *trap) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.reqs...)
}

// TestFeedback_HostileAgentGetsNoCredential runs an agent that tries every
// channel to prloop's credentials (/proc of prloop's processes, prloop's
// HOME with git, gh and App credentials, the NATS key, the worktree's git
// config for the git prloop runs there afterwards, its own push, the bus)
// and leaves a setsid child behind. The token, and every other credential,
// must appear nowhere it can write or send, its publishes must be refused,
// and none of its processes may survive the attempt.
func TestFeedback_HostileAgentGetsNoCredential(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.Bwrap, sandbox.Namespaces} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			requireSandbox(t, mode)
			e := newEnv(t)
			home := t.TempDir()
			files := map[string]string{
				".git-credentials":     "http://x-access-token:" + tokPrloop + "@127.0.0.1\n",
				".gitconfig":           "[credential]\n\thelper = store\n",
				".config/gh/hosts.yml": "github.com:\n    oauth_token: " + tokPrloop + "\n",
				"app.pem":              "-----BEGIN RSA PRIVATE KEY-----\n" + tokPrloop + "\n-----END RSA PRIVATE KEY-----\n",
			}
			for name, body := range files {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(home, name)), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(home, name), []byte(body), 0o600))
			}
			e.environ = []string{"HOME=" + home, "PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH=" + filepath.Join(home, "app.pem"), "SSH_AUTH_SOCK=" + filepath.Join(home, "agent.sock")}
			seed, err := os.ReadFile(e.conn.CredsFile)
			require.NoError(t, err)

			tr := &trap{}
			trapSrv := httptest.NewServer(tr)
			t.Cleanup(trapSrv.Close)
			observer := natstest.Dial(t, e.conn.URL)
			forged := make(chan string, 16)
			_, err = observer.Subscribe("pr.>", func(m *nats.Msg) {
				if strings.Contains(string(m.Data), "forged") {
					forged <- m.Subject
				}
			})
			require.NoError(t, err)
			require.NoError(t, observer.Flush())

			marker := "hostile-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			e.comment(e.pr, "main does nothing; print a greeting")
			cfg := e.config("hostile.sh", func(c *feedback.Config) {
				c.AgentSandbox = string(mode)
				c.AgentCmd = strings.Join([]string{
					"FAKE_HOME=" + home, "NATS_ADDR=" + strings.TrimPrefix(e.conn.URL, "nats://"), "NATS_SEED=" + e.conn.CredsFile,
					"TRAP=" + trapSrv.URL, "MARKER=" + marker, c.AgentCmd,
				}, " ")
				c.AgentCmd = strings.Replace(c.AgentCmd, " sh ", " bash ", 1)
			})
			cfg = e.start("a", cfg).cfg
			e.request(e.pr, e.head, 0)
			// The namespaces backend re-executes the binary as each
			// sandbox's init: some 25 ms for prloop, but about a second for
			// this race-enabled test binary, and an attempt runs a dozen
			// sandboxed git commands.
			wait := waitFor
			if mode == sandbox.Namespaces {
				wait = 2 * time.Minute
			}
			ev := e.rec.Wait(t, e.pr, events.TypeFeedbackAddressed, wait).Data.(*events.FeedbackAddressed)

			// No process of the agent's survives, setsid or not.
			require.Eventually(t, func() bool { return len(proctest.WithMarker(marker)) == 0 }, 5*time.Second, 20*time.Millisecond,
				"processes of the agent outlived it: %v", proctest.WithMarker(marker))
			beat := filepath.Join(e.records, "beat")
			require.FileExists(t, beat, "the setsid child ran")
			proctest.RequireStopsGrowing(t, beat)

			// Nothing it could write holds a credential.
			out := filepath.Join(e.records, "hostile")
			for _, f := range []string{"proc", "files", "tools", "nats", "push"} {
				require.FileExists(t, filepath.Join(out, f), "the agent tried channel %s", f)
			}
			assertNoTokenInFiles(t, e.records)
			assertNoTokenInFiles(t, cfg.WorkspaceDir)
			secretsIn(t, e.records, string(bytes.TrimSpace(seed)), "whsec-do-not-leak", "BEGIN RSA PRIVATE KEY")
			secretsIn(t, cfg.WorkspaceDir, string(bytes.TrimSpace(seed)), "whsec-do-not-leak")
			assert.NotContains(t, readFile(t, filepath.Join(out, "home")), home, "the agent's HOME is its own")
			assert.NotContains(t, readFile(t, filepath.Join(out, "proc")), os.Args[0], "prloop's processes (here the test binary) are invisible")

			// Nothing it sent holds one: not its own push through its proxy
			// and URL rewrite, not anything git did with its config later.
			reqs := tr.requests()
			require.NotEmpty(t, reqs, "the agent's push reached its listener")
			for _, r := range reqs {
				assertNoToken(t, "a request to the agent's listener", r)
			}
			pushed, err := filepath.Glob(filepath.Join(e.records, "pushed.*"))
			require.NoError(t, err)
			assert.Empty(t, pushed, "the agent's own push went through")

			// What prloop pushed holds no credential either (the clean
			// filter and env dumps the agent arranged ran in the sandbox).
			all, err := exec.Command("git", "--git-dir="+e.sim.GitDir(e.repo), "log", "-p", "--all", "--binary").Output()
			require.NoError(t, err)
			assertNoToken(t, "the pushed commits", string(all))
			assert.Len(t, e.bareLog("feature/x", e.head), 1, "prloop pushed the fix")
			info, err := e.sim.PRInfo(e.pr)
			require.NoError(t, err)
			assert.Equal(t, ev.HeadSHA, info.HeadSHA)

			// Its publishes were refused, and none reached the bus.
			assert.Contains(t, readFile(t, filepath.Join(out, "nats")), "Permissions Violation", "the bus refused the agent")
			select {
			case subj := <-forged:
				t.Fatalf("the agent's forged message reached the bus on %s", subj)
			default:
			}
		})
	}
}

// secretsIn fails if any file under dir contains one of secrets.
func secretsIn(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			assert.NotContains(t, string(b), s, "a secret in %s", p)
		}
		return nil
	}))
}
