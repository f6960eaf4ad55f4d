package main

// The tests in this file keep NATS's permissions honest: the users of
// deploy/nats/nats.conf (Compose) and deploy/k8s/nats.yaml (Kubernetes)
// against the event table (events.PublishedBy) and the KV buckets each
// service owns, and a real server started from that configuration against
// forged publishes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/state"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// natsConfPath is the Compose NATS configuration; deploy/k8s/nats.yaml
// carries the same users in its ConfigMap.
const natsConfPath = "deploy/nats/nats.conf"

// ownBuckets are the KV buckets each publisher reads and writes: its own
// records, which no other service may touch (the PR records are the
// poller's).
var ownBuckets = map[string][]string{
	poller.Name:    {poller.LeaseBucket, state.Bucket},
	feedback.Name:  {feedback.Bucket},
	merger.Name:    {merger.Bucket},
	escalator.Name: {escalator.ClaimBucket},
}

// sharedBuckets are the KV buckets every service reads and writes: the
// GitHub request budget of the installation (pkg/github's ShareBudget).
var sharedBuckets = []string{github.BudgetBucket}

// pageHosts are the services whose HTTP server also serves the web page
// (their cmd/<name>/main.go) in a split deployment.
var pageHosts = []string{merger.Name, poller.Name}

// followPermissions are what the page's prstatus.Follower needs: an
// ephemeral ordered consumer of pr.> with a name of the client's choosing
// (a nuid, so any name), its info and its messages. Not DELETE: the client
// deletes an ordered consumer only when it resets it, best effort, and the
// server removes it once inactive; a service must not delete another's
// durable consumer.
var followPermissions = []string{
	"$JS.API.CONSUMER.CREATE." + events.StreamName + ".*.pr.>",
	"$JS.API.CONSUMER.INFO." + events.StreamName + ".*",
	"$JS.API.CONSUMER.MSG.NEXT." + events.StreamName + ".*",
}

// natsUser is what one NATS user may publish and subscribe to.
type natsUser struct {
	publish, subscribe []string
}

// kvRead is what reading and listing a bucket takes: direct gets, and the
// ephemeral ordered consumer behind Keys and Watch with its flow control.
func kvRead(bucket string) []string {
	s := "KV_" + bucket
	return []string{
		"$JS.API.DIRECT.GET." + s + ".>", "$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.CONSUMER.CREATE." + s, "$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.DELETE." + s + ".>", "$JS.API.CONSUMER.MSG.NEXT." + s + ".>",
		"$JS.FC." + s + ".>",
	}
}

// wantNATSUsers derives every user's permissions from the code: the event
// types it publishes (events.PublishedBy), the buckets it owns, its durable
// consumer, its dead letters, and the streams and buckets it ensures at
// start.
func wantNATSUsers() map[string]natsUser {
	users := map[string]natsUser{}
	for _, name := range events.Publishers() {
		var pub []string
		for _, t := range events.PublishedBy(name) {
			pub = append(pub, events.FilterSubject(t))
		}
		pub = append(pub, "$JS.API.INFO", "$JS.API.STREAM.INFO.*")
		sub := []string{"_INBOX.>"}
		if name == events.PublisherCLI {
			// prloop status reads the state; prloop events follows the
			// stream with an ordered consumer. No KV writes, no durables
			// of its own.
			pub = append(pub, kvRead(state.Bucket)...)
			for _, op := range []string{"CREATE", "DELETE", "INFO", "MSG.NEXT"} {
				pub = append(pub, "$JS.API.CONSUMER."+op+"."+events.StreamName+".>")
			}
			// prloop dlq lists dead letters and removes replayed ones; a
			// replay publishes with the publisher's own event permissions.
			pub = append(pub, "$JS.API.STREAM.MSG.GET."+events.DLQStreamName, "$JS.API.STREAM.MSG.DELETE."+events.DLQStreamName)
			users[name] = natsUser{publish: pub, subscribe: sub}
			continue
		}
		buckets := ownBuckets[name]
		for _, s := range append([]string{events.StreamName, events.DLQStreamName}, kvStreams(buckets)...) {
			pub = append(pub, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s)
		}
		durable := events.StreamName + "." + name
		pub = append(pub,
			"$JS.API.CONSUMER.CREATE."+durable, "$JS.API.CONSUMER.CREATE."+durable+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+durable, "$JS.API.CONSUMER.INFO."+durable,
			"$JS.API.CONSUMER.MSG.NEXT."+durable, "$JS.ACK."+durable+".>",
			events.DLQPrefix+"."+name,
		)
		for _, b := range buckets {
			pub = append(pub, "$KV."+b+".>")
			pub = append(pub, kvRead(b)...)
		}
		for _, b := range ownBuckets[name] {
			// kvlease.Bucket removes the marker a delete leaves.
			pub = append(pub, "$JS.API.STREAM.PURGE.KV_"+b)
		}
		// The installation's GitHub budget (PRLOOP_GITHUB_SHARED_BUDGET):
		// one record every service's processes share, each writing its
		// own entry with compare-and-set.
		for _, b := range sharedBuckets {
			pub = append(pub, "$JS.API.STREAM.CREATE.KV_"+b, "$JS.API.STREAM.UPDATE.KV_"+b, "$KV."+b+".>")
			pub = append(pub, kvRead(b)...)
		}
		if name == poller.Name {
			// MergedByPrloop reads the stream's last PRMerged of a PR.
			pub = append(pub, "$JS.API.STREAM.MSG.GET."+events.StreamName)
			// The status writer follows the stream as the page does
			// (prstatus.Follower, followPermissions below).
			pub = append(pub, poller.KickSubject)
			sub = append(sub, poller.KickSubject)
		}
		if slices.Contains(pageHosts, name) {
			pub = append(pub, followPermissions...)
		}
		users[name] = natsUser{publish: pub, subscribe: sub}
	}
	return users
}

func kvStreams(buckets []string) []string {
	out := make([]string, len(buckets))
	for i, b := range buckets {
		out[i] = "KV_" + b
	}
	return out
}

// testNKeys are a user key per publisher for the tests, made once.
var testNKeys = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "prloop-nkeys-")
	if err != nil {
		return nil, err
	}
	keys := map[string]string{} // user → seed file
	for _, user := range events.Publishers() {
		path := filepath.Join(dir, user+".nk")
		if _, err := natsx.UserKey(path, 0o600); err != nil {
			return nil, err
		}
		keys[user] = path
	}
	return keys, nil
})

// testNKey returns the seed file and public key of user's test key.
func testNKey(t *testing.T, user string) (seedFile, pub string) {
	t.Helper()
	keys, err := testNKeys()
	require.NoError(t, err)
	seedFile = keys[user]
	require.NotEmpty(t, seedFile, "no test key for %s", user)
	pub, err = natsx.UserKey(seedFile, 0o600)
	require.NoError(t, err)
	return seedFile, pub
}

// fillNATSKeys replaces the $NKEY_<USER> references of a NATS configuration
// with the test keys, as the server would take them from its environment.
func fillNATSKeys(t *testing.T, text string) string {
	t.Helper()
	for _, user := range events.Publishers() {
		_, pub := testNKey(t, user)
		text = strings.ReplaceAll(text, "$"+nkeyVar(user), pub)
	}
	return text
}

// k8sNATSConf returns the nats.conf of the Kubernetes ConfigMap nats-config.
func k8sNATSConf(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "deploy/k8s/nats.yaml"))
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var obj struct {
			Kind     string                `yaml:"kind"`
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "deploy/k8s/nats.yaml")
		if obj.Kind == "ConfigMap" && obj.Metadata.Name == "nats-config" {
			return strings.ReplaceAll(obj.Data["nats.conf"], "$POD_NAME", "nats-0")
		}
	}
	require.Fail(t, "deploy/k8s/nats.yaml: no ConfigMap nats-config")
	return ""
}

// parseNATSConf parses a NATS configuration with nats-server's own parser,
// the users' keys filled in.
func parseNATSConf(t *testing.T, text string) *server.Options {
	t.Helper()
	f := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(f, []byte(fillNATSKeys(t, text)), 0o600))
	opts, err := server.ProcessConfigFile(f)
	require.NoError(t, err, "nats-server rejects the configuration")
	return opts
}

func TestNATSAuth_DeployUsersMatchTheEventTable(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	compose, err := os.ReadFile(filepath.Join(root, natsConfPath))
	require.NoError(t, err)
	confs := map[string]string{natsConfPath: string(compose), "deploy/k8s/nats.yaml": k8sNATSConf(t, root)}
	want := wantNATSUsers()
	for where, text := range confs {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			opts := parseNATSConf(t, text)

			// Without credentials: the read-only observer.
			require.Equal(t, natsx.ObserverUser, opts.NoAuthUser, "%s: no_auth_user", where)
			var observer *server.User
			for _, u := range opts.Users {
				if u.Username == natsx.ObserverUser {
					observer = u
				}
			}
			require.NotNil(t, observer, "%s: user %s", where, natsx.ObserverUser)
			require.NotNil(t, observer.Permissions, "%s: the observer needs permissions", where)
			assert.Equal(t, natsx.ObserverPermissions(), observer.Permissions, "%s: the observer's permissions are the embedded server's", where)
			assert.Len(t, opts.Users, 1, "%s: every other user authenticates with an nkey", where)

			got := map[string]natsUser{}
			for _, nk := range opts.Nkeys {
				var user string
				for _, name := range events.Publishers() {
					if _, pub := testNKey(t, name); pub == nk.Nkey {
						user = name
					}
				}
				require.NotEmpty(t, user, "%s: nkey %s is no $NKEY_<USER>", where, nk.Nkey)
				require.NotNil(t, nk.Permissions, "%s: %s has every permission", where, user)
				require.NotNil(t, nk.Permissions.Publish, "%s: %s may publish anything", where, user)
				require.NotNil(t, nk.Permissions.Subscribe, "%s: %s may subscribe to anything", where, user)
				assert.Empty(t, nk.Permissions.Publish.Deny, "%s: %s: allow lists only", where, user)
				got[user] = natsUser{publish: nk.Permissions.Publish.Allow, subscribe: nk.Permissions.Subscribe.Allow}
			}
			require.ElementsMatch(t, events.Publishers(), keys(got), "%s: one nkey user per publisher", where)
			for _, user := range events.Publishers() {
				assert.ElementsMatch(t, events.PublishedBy(user), typesOf(got[user].publish),
					"%s: %s may publish events of other types than the table in pkg/events/doc.go gives it", where, user)
				assert.ElementsMatch(t, want[user].publish, got[user].publish, "%s: %s's publish allow-list", where, user)
				assert.ElementsMatch(t, want[user].subscribe, got[user].subscribe, "%s: %s's subscribe allow-list", where, user)
			}
		})
	}
}

// typesOf returns the event types the subjects of allow select.
func typesOf(allow []string) []events.Type {
	var out []events.Type
	for _, s := range allow {
		if rest, ok := strings.CutPrefix(s, events.SubjectPrefix+"."); ok {
			parts := strings.Split(rest, ".")
			out = append(out, events.Type(parts[len(parts)-1]))
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// startDeployNATS starts a NATS server in-process from the Compose
// deploy/nats/nats.conf with the test keys, on a free port with its store in
// a temp dir, and returns its client URL.
func startDeployNATS(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(proctest.Root(t), natsConfPath))
	require.NoError(t, err)
	opts := parseNATSConf(t, string(text))
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir = t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second), "nats from %s did not start", natsConfPath)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// connectAs connects to url with user's test key ("" for none).
func connectAs(t *testing.T, url, user string) *natsx.Conn {
	t.Helper()
	var creds string
	if user != "" {
		creds, _ = testNKey(t, user)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := natsx.Connect(ctx, natsx.Options{URL: url, CredsFile: creds, Name: "natsauth-" + user})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestNATSAuth_DeployServerRefusesForgedApprovals starts NATS from the
// deployment's configuration and tries to approve a PR as everyone but the
// poller: only the poller's approval is stored, and an observer without
// credentials sees it.
func TestNATSAuth_DeployServerRefusesForgedApprovals(t *testing.T) {
	t.Parallel()
	url := startDeployNATS(t)
	pollerConn := connectAs(t, url, poller.Name)
	require.NoError(t, events.EnsureStreams(t.Context(), pollerConn.JS, events.StreamOptions{}), "the poller ensures the streams")
	store, err := state.Ensure(t.Context(), pollerConn.JS, 1)
	require.NoError(t, err, "the poller ensures its bucket")
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	_, err = store.Update(t.Context(), pr, func(p *state.PR) error { p.Status = events.StatusPending; return nil })
	require.NoError(t, err, "the poller writes its record")

	anon := natstest.Dial(t, url)
	sub, err := anon.SubscribeSync(events.SubjectPrefix + ".>")
	require.NoError(t, err, "nats sub 'pr.>' without credentials")
	require.NoError(t, anon.Flush())

	approve := func(js jetstream.JetStream, publisher string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		e, err := events.New(publisher, &events.ReviewApproved{Base: events.Base{PR: pr, HeadSHA: "abc"}, Status: events.StatusApproved}, time.Now(), publisher)
		require.NoError(t, err)
		_, err = events.Publish(ctx, js, e)
		return err
	}
	t.Run("refused", func(t *testing.T) {
		for _, user := range append([]string{""}, slices.DeleteFunc(events.Publishers(), func(u string) bool { return u == poller.Name })...) {
			name := user
			if name == "" {
				name = "no credentials"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := connectAs(t, url, user)
				require.Error(t, approve(c.JS, "forger"), "%q published PRReviewApproved", user)
				// Nor can it write, or read, the poller's records.
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, err := c.JS.Publish(ctx, "$KV."+state.Bucket+"."+state.Key(pr), []byte(`{"status":"approved"}`))
				require.Error(t, err, "%q wrote the poller's record", user)
				if user == events.PublisherCLI {
					return // prloop status and explain read them
				}
				kv, err := c.JS.KeyValue(ctx, state.Bucket)
				if err == nil {
					_, err = kv.Get(ctx, state.Key(pr))
				}
				require.Error(t, err, "%q read the poller's record", user)
			})
		}
	})
	require.NoError(t, approve(pollerConn.JS, poller.Name), "the poller approves")

	msg, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	e, d, err := events.Decode(msg.Data)
	require.NoError(t, err)
	assert.Equal(t, events.Source(poller.Name), e.Source())
	assert.Equal(t, events.TypeReviewApproved, d.EventType())
	_, err = sub.NextMsg(200 * time.Millisecond)
	assert.ErrorIs(t, err, nats.ErrTimeout, "only the poller's approval reached pr.>")
	info, err := pollerConn.JS.Stream(t.Context(), events.StreamName)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.CachedInfo().State.Msgs, "only the poller's approval was stored")
}

// TestNATSKeys_MakesAKeyPerUserOnce runs 'prloop nats-keys' twice: one
// seed per publisher, the public keys for the server, nothing replaced.
func TestNATSKeys_MakesAKeyPerUserOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	var out1, out2, errs strings.Builder
	require.NoError(t, runNATSKeys([]string{"-dir", dir}, &out1, &errs))
	require.NoError(t, runNATSKeys([]string{"-dir", dir}, &out2, &errs))
	assert.Equal(t, out1.String(), out2.String(), "a second run keeps the keys")
	env, err := os.ReadFile(filepath.Join(dir, PublicKeysFile))
	require.NoError(t, err)
	for _, user := range events.Publishers() {
		pub, err := natsx.UserKey(filepath.Join(dir, user+".nk"), 0o600)
		require.NoError(t, err)
		assert.Contains(t, string(env), fmt.Sprintf("%s=%s\n", nkeyVar(user), pub))
	}
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "other users of the host cannot reach the seeds")
}

// TestNATSAuth_PageHostsFollowTheStream follows the event stream as the web
// page does, as each service that serves it, against NATS started from the
// deployment's configuration, with one consumer all along (a consumer per
// event would need a DELETE they do not have, and leave one behind each).
func TestNATSAuth_PageHostsFollowTheStream(t *testing.T) {
	t.Parallel()
	url := startDeployNATS(t)
	pollerConn := connectAs(t, url, poller.Name)
	require.NoError(t, events.EnsureStreams(t.Context(), pollerConn.JS, events.StreamOptions{}), "the poller ensures the streams")
	store, err := state.Ensure(t.Context(), pollerConn.JS, 1)
	require.NoError(t, err, "the poller ensures its bucket")
	pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 1}
	_, err = store.Update(t.Context(), pr, func(p *state.PR) error { p.Status = events.StatusPending; return nil })
	require.NoError(t, err, "the poller writes its record")
	consumers := func() int {
		s, err := pollerConn.JS.Stream(t.Context(), events.StreamName)
		require.NoError(t, err)
		return s.CachedInfo().State.Consumers
	}
	emit := events.NewEmitter(connectAs(t, url, events.PublisherCLI).JS, events.PublisherCLI)
	watch := func(n int) {
		pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: n}
		_, _, err := emit.Emit(t.Context(), &events.WatchRequested{Base: events.Base{PR: pr}, Actor: "test"}, "1")
		require.NoError(t, err)
	}
	for n := 1; n <= 3; n++ {
		watch(n)
	}
	n := 3
	for _, user := range pageHosts {
		t.Run(user, func(t *testing.T) { // one at a time: each counts the consumers
			before := consumers()
			c := connectAs(t, url, user)
			f := prstatus.NewFollower(slog.New(slog.NewTextHandler(io.Discard, nil)))
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- f.Run(ctx, c.JS) }()
			select {
			case err := <-ran:
				require.Fail(t, "cannot follow", "%s: %v", user, err)
			case <-f.CaughtUp():
			}
			n++
			watch(n)
			pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: n}
			require.Eventually(t, func() bool {
				var text string
				f.View(func(b *prstatus.Board) { text = b.Line(pr, prstatus.Options{}).Text })
				return text == "waiting for review"
			}, 10*time.Second, 10*time.Millisecond, "%s follows new events", user)
			assert.Equal(t, before+1, consumers(), "%s made one consumer", user)
			cancel()
			require.NoError(t, <-ran)
		})
	}
}
