package github

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

func TestClient_MethodsAgainstSimulator(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	ctx := t.Context()
	pr := e.openPR(t, "feature")
	info, err := e.sim.PRInfo(pr)
	require.NoError(t, err)

	t.Run("repo and pulls", func(t *testing.T) {
		r, err := e.client.GetRepo(ctx, e.repo)
		require.NoError(t, err)
		assert.Equal(t, "acme/widgets", r.GetFullName())
		p, err := e.client.GetPull(ctx, pr)
		require.NoError(t, err)
		assert.Equal(t, info.HeadSHA, p.GetHead().GetSHA())
		prs, err := e.client.ListPulls(ctx, e.repo, "all")
		require.NoError(t, err)
		require.Len(t, prs, 1)
	})

	t.Run("reactions", func(t *testing.T) {
		id, err := e.sim.AddReaction(pr, "bob", "rocket")
		require.NoError(t, err)
		mine, err := e.client.CreateReaction(ctx, pr, "eyes")
		require.NoError(t, err)
		assert.Equal(t, "eyes", mine.Content)
		assert.Equal(t, "alice", mine.User)
		again, err := e.client.CreateReaction(ctx, pr, "eyes")
		require.NoError(t, err)
		assert.Equal(t, mine.ID, again.ID, "creating the same reaction twice returns the first")

		rs, err := e.client.ListReactions(ctx, pr)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		byUser := map[string]Reaction{}
		for _, r := range rs {
			byUser[r.User] = r
		}
		assert.Equal(t, id, byUser["bob"].ID)
		assert.Equal(t, "rocket", byUser["bob"].Content)
		assert.Equal(t, "User", byUser["bob"].UserType)
		assert.False(t, byUser["bob"].CreatedAt.IsZero(), "created_at decoded")
		assert.True(t, byUser["bob"].CreatedAt.Equal(e.sim.Now()), "sim clock %v vs %v", e.sim.Now(), byUser["bob"].CreatedAt)

		issues, err := e.client.ListIssues(ctx, e.repo, IssueListOptions{State: "open"})
		require.NoError(t, err)
		require.Len(t, issues, 1)
		assert.True(t, issues[0].IsPull())
		rc := issues[0].ReactionCounts()
		assert.Equal(t, 2, rc.GetTotalCount())
		assert.Equal(t, 1, rc.GetRocket())
		assert.Equal(t, 1, rc.GetEyes())

		require.NoError(t, e.client.DeleteReaction(ctx, pr, mine.ID))
		err = e.client.DeleteReaction(ctx, pr, mine.ID)
		require.ErrorIs(t, err, ErrNotFound, "a reaction that is not there is ErrNotFound")
		rs, err = e.client.ListReactions(ctx, pr)
		require.NoError(t, err)
		assert.Len(t, rs, 1)
	})

	t.Run("comments and reviews", func(t *testing.T) {
		_, err := e.sim.AddIssueComment(pr, "bob", "old")
		require.NoError(t, err)
		cut := e.sim.Now().Add(time.Minute)
		e.sim.Advance(2 * time.Minute)
		c, err := e.client.CreateIssueComment(ctx, pr, "new")
		require.NoError(t, err)
		assert.Equal(t, "new", c.GetBody())
		all, err := e.client.ListIssueComments(ctx, pr, time.Time{})
		require.NoError(t, err)
		assert.Len(t, all, 2)
		recent, err := e.client.ListIssueComments(ctx, pr, cut)
		require.NoError(t, err)
		require.Len(t, recent, 1)
		assert.Equal(t, "new", recent[0].GetBody())

		_, err = e.sim.AddReview(pr, ghsim.ReviewInput{Login: "bob", State: "APPROVED", Body: "lgtm"})
		require.NoError(t, err)
		_, err = e.sim.AddReviewComment(pr, ghsim.ReviewCommentInput{Login: "bob", Path: "README.md", Line: 1, Body: "nit"})
		require.NoError(t, err)
		reviews, err := e.client.ListReviews(ctx, pr)
		require.NoError(t, err)
		require.Len(t, reviews, 2)
		assert.Equal(t, "APPROVED", reviews[0].GetState())
		rcs, err := e.client.ListReviewComments(ctx, pr)
		require.NoError(t, err)
		require.Len(t, rcs, 1)
		assert.Equal(t, "nit", rcs[0].GetBody())
	})

	t.Run("replies and review requests", func(t *testing.T) {
		root, err := e.sim.AddReviewComment(pr, ghsim.ReviewCommentInput{Login: "bob", Path: "README.md", Line: 1, Body: "typo here"})
		require.NoError(t, err)
		reply, err := e.client.ReplyToReviewComment(ctx, pr, root, "addressed in a1b2c3d")
		require.NoError(t, err)
		assert.Equal(t, "addressed in a1b2c3d", reply.GetBody())
		assert.Equal(t, root, reply.GetInReplyTo(), "the reply is in the comment's thread")
		assert.Equal(t, "README.md", reply.GetPath())
		_, err = e.client.ReplyToReviewComment(ctx, pr, root+1000, "nowhere")
		require.ErrorIs(t, err, ErrNotFound, "a comment that is not there")

		require.NoError(t, e.sim.SetPermission(e.repo, "carol", "write"))
		require.NoError(t, e.client.RequestReviewers(ctx, pr, "carol"))
		require.NoError(t, e.client.RequestReviewers(ctx, pr, "carol"), "a repeat is harmless")
		p, err := e.client.GetPull(ctx, pr)
		require.NoError(t, err)
		require.Len(t, p.RequestedReviewers, 1)
		assert.Equal(t, "carol", p.RequestedReviewers[0].GetLogin())
		_, err = e.sim.AddIssueComment(pr, "dave", "drive-by")
		require.NoError(t, err)
		err = e.client.RequestReviewers(ctx, pr, "dave")
		require.ErrorIs(t, err, ErrValidation, "GitHub refuses a reviewer who is not a collaborator")
	})

	t.Run("labels", func(t *testing.T) {
		ls, err := e.client.AddLabels(ctx, pr, "needs review", "prloop/queued")
		require.NoError(t, err)
		assert.Len(t, ls, 2)
		got, err := e.client.ListLabels(ctx, pr)
		require.NoError(t, err)
		names := []string{}
		for _, l := range got {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		assert.Equal(t, []string{"needs review", "prloop/queued"}, names)
		require.NoError(t, e.client.RemoveLabel(ctx, pr, "prloop/queued"))
		err = e.client.RemoveLabel(ctx, pr, "prloop/queued")
		require.ErrorIs(t, err, ErrNotFound)
		assert.Contains(t, err.Error(), `remove label "prloop/queued" from acme/widgets#1`)
		info, err := e.sim.PRInfo(pr)
		require.NoError(t, err)
		assert.Equal(t, []string{"needs review"}, info.Labels)
	})

	t.Run("statuses and checks", func(t *testing.T) {
		require.NoError(t, e.sim.SetStatus(e.repo, info.HeadSHA, "ci/build", "success"))
		require.NoError(t, e.sim.SetStatus(e.repo, info.HeadSHA, "ci/lint", "pending"))
		require.NoError(t, e.sim.SetCheckRun(e.repo, info.HeadSHA, "test", "completed", "success"))
		cs, err := e.client.GetCombinedStatus(ctx, e.repo, info.HeadSHA)
		require.NoError(t, err)
		assert.Equal(t, "pending", cs.GetState())
		assert.Len(t, cs.Statuses, 2)
		runs, err := e.client.ListCheckRuns(ctx, e.repo, info.HeadSHA)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		assert.Equal(t, "success", runs[0].GetConclusion())
	})

	t.Run("create status", func(t *testing.T) {
		in := StatusInput{State: "pending", Description: "👀 bob is reviewing", Context: "prloop", TargetURL: "https://prloop.example/"}
		st, err := e.client.CreateStatus(ctx, e.repo, info.HeadSHA, in)
		require.NoError(t, err)
		assert.Equal(t, "prloop", st.GetContext())
		in.State, in.Description, in.TargetURL = "success", "merged as a1b2c3d", ""
		_, err = e.client.CreateStatus(ctx, e.repo, info.HeadSHA, in)
		require.NoError(t, err)
		cs, err := e.client.GetCombinedStatus(ctx, e.repo, info.HeadSHA)
		require.NoError(t, err)
		var own []string
		for _, s := range cs.Statuses {
			if s.GetContext() == "prloop" {
				own = append(own, s.GetState()+" "+s.GetDescription())
			}
		}
		assert.Equal(t, []string{"success merged as a1b2c3d"}, own, "the latest status per context, with its description")
		hist, err := e.sim.StatusHistory(e.repo, info.HeadSHA, "prloop")
		require.NoError(t, err)
		require.Len(t, hist, 2)
		assert.NotZero(t, hist[0].Created)
		hist[0].Created = time.Time{}
		assert.Equal(t, ghsim.StatusRecord{SHA: info.HeadSHA, Context: "prloop", State: "pending", Description: "👀 bob is reviewing", TargetURL: "https://prloop.example/", Creator: "alice"}, hist[0])

		_, err = e.client.CreateStatus(ctx, e.repo, "main", in)
		require.ErrorIs(t, err, ErrValidation, "a branch name is not a SHA")
		in.Description = strings.Repeat("x", 141)
		_, err = e.client.CreateStatus(ctx, e.repo, info.HeadSHA, in)
		require.ErrorIs(t, err, ErrValidation, "GitHub keeps 140 characters")
	})

	t.Run("permissions", func(t *testing.T) {
		for _, perm := range []string{"admin", "maintain", "write", "triage", "read"} {
			require.NoError(t, e.sim.SetPermission(e.repo, "carol", perm))
			got, err := e.client.GetPermission(ctx, e.repo, "carol")
			require.NoError(t, err)
			assert.Equal(t, perm, got, "role_name is used, so maintain and triage survive")
		}
	})

	t.Run("update, merge, delete branch", func(t *testing.T) {
		_, err := e.sim.PushCommit(e.repo, "main", "bob", map[string]string{"other.txt": "x\n"}, "move main")
		require.NoError(t, err)
		require.NoError(t, e.client.UpdateBranch(ctx, pr, info.HeadSHA))
		err = e.client.UpdateBranch(ctx, pr, info.HeadSHA)
		require.Error(t, err, "the head moved: the expected SHA no longer matches")

		merged, err := e.client.IsMerged(ctx, pr)
		require.NoError(t, err)
		assert.False(t, merged)
		now, err := e.sim.PRInfo(pr)
		require.NoError(t, err)
		res, err := e.client.Merge(ctx, pr, MergeOptions{Method: MergeMethodSquash, SHA: now.HeadSHA, Title: "feature (#1)"})
		require.NoError(t, err)
		assert.True(t, res.GetMerged())
		merged, err = e.client.IsMerged(ctx, pr)
		require.NoError(t, err)
		assert.True(t, merged)

		require.NoError(t, e.client.DeleteBranch(ctx, e.repo, now.HeadRef))
		err = e.client.DeleteBranch(ctx, e.repo, now.HeadRef)
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("rate limit", func(t *testing.T) {
		before := e.client.Stats().Requests
		rl, err := e.client.RateLimit(ctx)
		require.NoError(t, err)
		assert.Equal(t, 5000, rl.GetCore().Limit)
		assert.Equal(t, before+1, e.client.Stats().Requests)
		assert.Equal(t, "core", e.client.RateLimits()["core"].Resource)
		assert.Equal(t, rl.GetCore().Remaining, e.client.RateLimits()["core"].Remaining)
	})
}

func TestClient_WritesRetriedOnlyWhenSafe(t *testing.T) {
	t.Parallel()
	t.Run("comment not retried on 500", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "w")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/comments$`, Kind: ghsim.FaultStatus500})
		_, err := e.client.CreateIssueComment(t.Context(), pr, "hello")
		require.ErrorIs(t, err, ErrServer)
		assert.Equal(t, 1, e.stats(t).Total)
		assert.Zero(t, e.client.Stats().Retries)
	})
	t.Run("comment not retried on timeout", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{RequestTimeout: 200 * time.Millisecond}, Options{})
		pr := e.openPR(t, "w")
		e.reset()
		// The sim answers after 1 s, long after the client gave up: the
		// comment exists although the client saw a timeout, which is
		// exactly why the client must not post it again.
		e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/comments$`, Kind: ghsim.FaultTimeout, Delay: time.Second})
		_, err := e.client.CreateIssueComment(t.Context(), pr, "hello")
		require.ErrorContains(t, err, "timed out")
		assert.Equal(t, 1, e.stats(t).Total)
		assert.Zero(t, e.client.Stats().Retries)
		info, err := e.sim.PRInfo(pr)
		require.NoError(t, err)
		assert.Equal(t, 1, info.Comments)
	})
	t.Run("comment retried after a rate limit, posted once", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "w")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/comments$`, Kind: ghsim.FaultSecondaryLimit, RetryAfter: 3 * time.Second})
		_, err := e.client.CreateIssueComment(t.Context(), pr, "hello")
		require.NoError(t, err)
		assert.Equal(t, 2, e.stats(t).Total)
		assert.Equal(t, []time.Duration{3 * time.Second}, e.sleeps.got())
		info, err := e.sim.PRInfo(pr)
		require.NoError(t, err)
		assert.Equal(t, 1, info.Comments)
	})
	t.Run("merge retried on 502", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "w")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Method: "PUT", Path: `/merge$`, Kind: ghsim.FaultStatus502})
		res, err := e.client.Merge(t.Context(), pr, MergeOptions{Method: MergeMethodRebase})
		require.NoError(t, err)
		assert.True(t, res.GetMerged())
		assert.Equal(t, 2, e.stats(t).Total)
		requireBackoff(t, e.sleeps.got(), 1)
	})
	t.Run("labels retried on 500", func(t *testing.T) {
		t.Parallel()
		e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
		pr := e.openPR(t, "w")
		e.reset()
		e.sim.InjectFault(ghsim.Fault{Method: "POST", Path: `/labels$`, Kind: ghsim.FaultStatus500})
		_, err := e.client.AddLabels(t.Context(), pr, "x")
		require.NoError(t, err)
		assert.Equal(t, 2, e.stats(t).Total)
	})
}

func TestClient_MergeAlwaysSendsMethod(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
		fmt.Fprint(w, `{"merged":true,"sha":"abc","message":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok", Config{}, Options{})
	pr := ghref.PR{Owner: "o", Repo: "r", Number: 3}
	_, err := c.Merge(t.Context(), pr, MergeOptions{})
	require.NoError(t, err)
	_, err = c.Merge(t.Context(), pr, MergeOptions{Method: "squash", SHA: "deadbeef", Title: "t", Message: "m"})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]any{"merge_method": "merge"}, bodies[0])
	assert.Equal(t, map[string]any{"merge_method": "squash", "sha": "deadbeef", "commit_title": "t", "commit_message": "m"}, bodies[1])
}

func TestClient_CurrentUser(t *testing.T) {
	t.Parallel()
	// The simulator has no GET /user yet; a stub stands in.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/user" || r.Header.Get("Authorization") != "Bearer tok_bob" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
			return
		}
		fmt.Fprint(w, `{"login":"bob","id":2,"type":"User"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := newTestClient(t, srv.URL, "tok_bob", Config{}, Options{})
	login, err := c.CurrentUser(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "bob", login)
	bad, _ := newTestClient(t, srv.URL, "tok_wrong", Config{}, Options{})
	_, err = bad.CurrentUser(t.Context())
	require.ErrorIs(t, err, ErrUnauthorized)
}

type recordingObserver struct {
	mu  sync.Mutex
	got []string
}

func (o *recordingObserver) OnRequest(route string, status int, outcome Outcome) {
	o.mu.Lock()
	o.got = append(o.got, fmt.Sprintf("%s %d %s", route, status, outcome))
	o.mu.Unlock()
}

var _ Observer = (*recordingObserver)(nil)

func TestClient_ObserverSeesEveryAttempt(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{}
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{Observer: obs})
	pr := e.openPR(t, "observed")
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultStatus500})
	for range 2 {
		_, err := e.client.GetPull(t.Context(), pr)
		require.NoError(t, err)
	}
	_, err := e.client.GetPull(t.Context(), e.repo.PR(42))
	require.ErrorIs(t, err, ErrNotFound)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, []string{
		ourRoutePull + " 500 server_error",
		ourRoutePull + " 200 ok",
		ourRoutePull + " 304 not_modified",
		ourRoutePull + " 404 client_error",
	}, obs.got)
}

// TestClient_TokenNeverLeaks drives failing requests of every kind and checks
// that neither errors nor log lines carry the token.
func TestClient_TokenNeverLeaks(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{RequestTimeout: 200 * time.Millisecond, MaxRetries: 2}, Options{})
	pr := e.openPR(t, "secret")
	ctx := t.Context()
	var errs []error
	collect := func(err error) {
		require.Error(t, err)
		errs = append(errs, err)
	}
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultStatus500, Times: 10})
	_, err := e.client.GetPull(ctx, pr)
	collect(err)
	e.sim.ClearFaults()
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultTimeout, Times: 10})
	_, err = e.client.GetPull(ctx, pr)
	collect(err)
	e.sim.ClearFaults()
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls/\d+$`, Kind: ghsim.FaultPrimaryLimit})
	_, err = e.client.GetPull(ctx, pr)
	collect(err)
	e.sim.InjectFault(ghsim.Fault{Path: `/merge$`, Kind: ghsim.FaultForbidden})
	_, err = e.client.Merge(ctx, pr, MergeOptions{})
	collect(err)
	e.sim.InjectFault(ghsim.Fault{Path: `/pulls$`, Kind: ghsim.FaultMalformedJSON, Times: 2})
	_, err = e.client.ListPulls(ctx, e.repo, "open")
	collect(err)
	_, err = e.client.ListPulls(ctx, e.repo, "bogus")
	collect(err)

	// A second client with a token the sim does not know: 401.
	bad, err := New(ctx, Config{APIURL: e.srv.URL, Token: "ghp_unknown_token_9876"}, Options{Logger: bufferLogger(e.logs), Sleep: e.sleeps.sleep})
	require.NoError(t, err)
	_, err = bad.GetRepo(ctx, e.repo)
	require.ErrorIs(t, err, ErrUnauthorized)
	collect(err)

	// A server that is gone: network errors, retried, then returned.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	dead, err := New(ctx, Config{APIURL: gone.URL, Token: simToken, MaxRetries: 1}, Options{Logger: bufferLogger(e.logs), Sleep: e.sleeps.sleep})
	require.NoError(t, err)
	_, err = dead.GetRepo(ctx, e.repo)
	collect(err)

	logs := e.logs.String()
	require.Contains(t, logs, "retrying", "the failures were logged")
	for _, secret := range []string{simToken, "ghp_unknown_token_9876", "simtoken"} {
		assert.NotContains(t, logs, secret)
		for _, err := range errs {
			assert.NotContains(t, err.Error(), secret)
			assert.NotContains(t, fmt.Sprintf("%+v %#v", err, err), secret)
		}
	}
	for _, err := range errs {
		assert.False(t, strings.Contains(err.Error(), "Authorization"), err.Error())
	}
}

func TestClient_ListBranchRules(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "main", "test", "ci/build", "test"))
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "release/1.x", "ci/build"))
	tests := []struct {
		name, branch string
		want         []string
	}{
		{name: "required checks, sorted, once each", branch: "main", want: []string{"ci/build", "test"}},
		{name: "slash in the branch", branch: "release/1.x", want: []string{"ci/build"}},
		{name: "no rules", branch: "feature", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules, err := e.client.ListBranchRules(t.Context(), e.repo, tt.branch)
			require.NoError(t, err)
			got, err := RequiredChecks(rules)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("unknown repository", func(t *testing.T) {
		t.Parallel()
		rules, err := e.client.ListBranchRules(t.Context(), ghref.Repo{Owner: "acme", Name: "nope"}, "main")
		require.NoError(t, err, "a 404 means no rules")
		assert.Empty(t, rules)
	})
}

// TestClient_Compare: whether a base tip is an ancestor of a head is
// behind_by == 0 of GitHub's "Compare two commits"
// (docs.github.com/rest/commits/commits#compare-two-commits), which the
// sim computes with git. The client asks for one commit of the list; the
// counts cover all of them.
func TestClient_Compare(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	oldMain, err := e.sim.PushCommit(e.repo, "main", "alice", map[string]string{"a.txt": "a\n"}, "A")
	require.NoError(t, err)
	for i := range 3 {
		_, err = e.sim.PushCommit(e.repo, "feature/x", "alice", map[string]string{"f.txt": fmt.Sprint(i)}, "F")
		require.NoError(t, err)
	}
	head, err := e.sim.PushCommit(e.repo, "feature/x", "alice", map[string]string{"g.txt": "g\n"}, "G")
	require.NoError(t, err)
	newMain, err := e.sim.PushCommit(e.repo, "main", "alice", map[string]string{"b.txt": "b\n"}, "B")
	require.NoError(t, err)
	tree := func(sha string) string {
		tree, _, err := e.sim.Tree(e.repo, sha)
		require.NoError(t, err)
		return tree
	}
	tests := []struct {
		name, base, head string
		want             Comparison
	}{
		{name: "behind its base", base: "main", head: "feature/x",
			want: Comparison{Status: "diverged", AheadBy: 4, BehindBy: 1, BaseSHA: newMain, BaseTree: tree(newMain), MergeBaseSHA: oldMain}},
		{name: "up to date with the old tip", base: oldMain, head: head,
			want: Comparison{Status: "ahead", AheadBy: 4, BaseSHA: oldMain, BaseTree: tree(oldMain), MergeBaseSHA: oldMain}},
		{name: "the other way: the head's tree, and the base commits it lacks", base: head, head: "main",
			want: Comparison{Status: "diverged", AheadBy: 1, BehindBy: 4, BaseSHA: head, BaseTree: tree(head), MergeBaseSHA: oldMain}},
		{name: "identical", base: "main", head: newMain,
			want: Comparison{Status: "identical", BaseSHA: newMain, BaseTree: tree(newMain), MergeBaseSHA: newMain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := e.client.Compare(t.Context(), e.repo, tt.base, tt.head)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("unknown ref", func(t *testing.T) {
		t.Parallel()
		_, err := e.client.Compare(t.Context(), e.repo, "main", "nope")
		require.ErrorIs(t, err, ErrNotFound)
		assert.Contains(t, err.Error(), "compare nope with main in acme/widgets")
	})
}

func TestRequiredChecks_UndecodableRuleIsAnError(t *testing.T) {
	t.Parallel()
	_, err := RequiredChecks([]BranchRule{{Type: RuleRequiredStatusChecks, Parameters: json.RawMessage(`{"required_status_checks":"ci"}`), RulesetID: 7}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ruleset 7")
}

// TestClient_CreatePullAndFindItByHead: opening a PR for a branch, finding
// it by its head, and the 422 a second PR for the same head gets.
func TestClient_CreatePullAndFindItByHead(t *testing.T) {
	t.Parallel()
	e := newSimEnv(t, ghsim.Options{}, Config{}, Options{})
	ctx := t.Context()
	_, err := e.sim.PushCommit(e.repo, "feature/open", "alice", map[string]string{"x.go": "package x\n"}, "Add x")
	require.NoError(t, err)
	_, err = e.sim.PushCommit(e.repo, "other", "alice", map[string]string{"y.go": "package y\n"}, "Add y")
	require.NoError(t, err)

	none, err := e.client.FindOpenPull(ctx, e.repo, "feature/open", "main")
	require.NoError(t, err)
	assert.Nil(t, none)

	p, err := e.client.CreatePull(ctx, e.repo, PullInput{Title: "Add x", Head: "feature/open", Base: "main", Body: "Why.", Draft: true})
	require.NoError(t, err)
	assert.Equal(t, "feature/open", p.GetHead().GetRef())
	assert.True(t, p.GetDraft())
	_, err = e.client.CreatePull(ctx, e.repo, PullInput{Title: "Other", Head: "other", Base: "main"})
	require.NoError(t, err)

	found, err := e.client.FindOpenPull(ctx, e.repo, "feature/open", "main")
	require.NoError(t, err)
	require.NotNil(t, found)
	assert.Equal(t, p.GetNumber(), found.GetNumber())
	other, err := e.client.FindOpenPull(ctx, e.repo, "feature/open", "develop")
	require.NoError(t, err)
	assert.Nil(t, other, "another base is another PR")

	_, err = e.client.CreatePull(ctx, e.repo, PullInput{Title: "Add x again", Head: "feature/open", Base: "main"})
	require.ErrorIs(t, err, ErrValidation)
	assert.True(t, PullExists(err), "%v", err)
	assert.Contains(t, err.Error(), "A pull request already exists for acme:feature/open.")
	assert.False(t, PullExists(fmt.Errorf("wrapped: %w", ErrNotFound)))
}
