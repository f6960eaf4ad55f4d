package ghsim_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghsim"
)

// TestContract_MergeableStateFollowsTheBaseRules: mergeable_state depends
// on the base branch's settings, as GitHub documents them.
//
//   - "Get a pull request" (docs.github.com/rest/pulls/pulls#get-a-pull-request)
//     and GraphQL's MergeStateStatus (docs.github.com/graphql/reference/enums#mergestatestatus):
//     behind "the head ref is out of date", blocked "the merge is blocked",
//     unstable "mergeable with non-passing commit status", dirty "the merge
//     commit cannot be cleanly created", unknown "the state cannot currently
//     be determined", clean.
//   - "About protected branches", "Require status checks before merging"
//     (docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches):
//     strict ("Require branches to be up to date before merging") means
//     the branch must be up to date with the base; loose means it does not
//     have to be, so a PR behind a loose base is not "behind".
//   - "Available rules for rulesets", "Require status checks to pass"
//     (docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/available-rules-for-rulesets):
//     the same strict policy in a ruleset (strict_required_status_checks_policy).
//   - "Troubleshooting required status checks": a check and a status of
//     the same name are then both required.
//
// Which state wins when several hold (a strict base behind and a required
// check pending) GitHub does not document; the sim says blocked.
func TestContract_MergeableStateFollowsTheBaseRules(t *testing.T) {
	t.Parallel()
	strict := func(contexts ...string) ghsim.RequiredChecks {
		return ghsim.RequiredChecks{Contexts: contexts, Strict: true}
	}
	loose := func(contexts ...string) ghsim.RequiredChecks { return ghsim.RequiredChecks{Contexts: contexts} }
	tests := []struct {
		name       string
		ruleset    *ghsim.RequiredChecks
		protection *ghsim.RequiredChecks
		behind     bool
		// checks are set on the PR's head: name -> "success", "pending",
		// "failure" as a commit status, or "run:<conclusion>" as a check run.
		checks    map[string]string
		want      string
		mergeable bool
	}{
		{name: "no rules, up to date", want: "clean", mergeable: true},
		{name: "no rules, behind: clean, not behind", behind: true, want: "clean", mergeable: true},
		{name: "loose ruleset, behind, required check passed: clean", ruleset: ptr(loose("ci")), behind: true,
			checks: map[string]string{"ci": "success"}, want: "clean", mergeable: true},
		{name: "strict ruleset, behind, required check passed: behind", ruleset: ptr(strict("ci")), behind: true,
			checks: map[string]string{"ci": "success"}, want: "behind", mergeable: true},
		{name: "strict classic protection, behind: behind", protection: ptr(strict("ci")), behind: true,
			checks: map[string]string{"ci": "success"}, want: "behind", mergeable: true},
		{name: "loose classic protection, behind: clean", protection: ptr(loose("ci")), behind: true,
			checks: map[string]string{"ci": "success"}, want: "clean", mergeable: true},
		{name: "strict ruleset, up to date: clean", ruleset: ptr(strict("ci")),
			checks: map[string]string{"ci": "success"}, want: "clean", mergeable: true},
		{name: "required check missing: blocked", ruleset: ptr(loose("ci")), want: "blocked", mergeable: true},
		{name: "required check pending: blocked", ruleset: ptr(loose("ci")),
			checks: map[string]string{"ci": "pending"}, want: "blocked", mergeable: true},
		{name: "required check failed: blocked", ruleset: ptr(loose("ci")),
			checks: map[string]string{"ci": "failure"}, want: "blocked", mergeable: true},
		{name: "required check run in progress: blocked", protection: ptr(loose("test")),
			checks: map[string]string{"test": "run:"}, want: "blocked", mergeable: true},
		{name: "status and check run of one name: both required", ruleset: ptr(loose("ci")),
			checks: map[string]string{"ci": "success", "run ci": "run:failure"}, want: "blocked", mergeable: true},
		{name: "strict, behind and a required check pending: blocked", ruleset: ptr(strict("ci")), behind: true,
			checks: map[string]string{"ci": "pending"}, want: "blocked", mergeable: true},
		{name: "required passed, another check failed: unstable", ruleset: ptr(loose("ci")),
			checks: map[string]string{"ci": "success", "lint": "run:failure"}, want: "unstable", mergeable: true},
		{name: "no rules, a check failed: unstable", checks: map[string]string{"lint": "failure"}, want: "unstable", mergeable: true},
		{name: "ruleset and protection add up", ruleset: ptr(loose("ci")), protection: ptr(strict("test")), behind: true,
			checks: map[string]string{"ci": "success"}, want: "blocked", mergeable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ghsim.Options{})
			if tt.ruleset != nil {
				require.NoError(t, e.sim.SetRuleset(e.repo, "main", *tt.ruleset))
			}
			if tt.protection != nil {
				require.NoError(t, e.sim.SetBranchProtection(e.repo, "main", *tt.protection))
			}
			if tt.behind {
				_, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"other.txt": "x\n"}, "Other work")
				require.NoError(t, err)
			}
			for name, state := range tt.checks {
				if conclusion, ok := strings.CutPrefix(state, "run:"); ok {
					name, _ = strings.CutPrefix(name, "run ")
					status := "completed"
					if conclusion == "" {
						status = "in_progress"
					}
					require.NoError(t, e.sim.SetCheckRun(e.repo, "feature", name, status, conclusion))
					continue
				}
				require.NoError(t, e.sim.SetStatus(e.repo, "feature", name, state))
			}
			r := call(t, e.srv, "GET", "/repos/octo/socket.io/pulls/1", tokBot, nil)
			require.Equal(t, 200, r.StatusCode)
			checkContract(t, "GET", "/repos/{owner}/{repo}/pulls/{pull_number}", 200, r.body)
			m := r.obj(t)
			assert.Equal(t, tt.want, m["mergeable_state"])
			assert.Equal(t, tt.mergeable, m["mergeable"])
		})
	}

	t.Run("unknown for a while after a push", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, ghsim.Options{})
		e.sim.SetMergeabilityDelay(5 * time.Second)
		_, err := e.sim.PushCommit(e.repo, "feature", "alice", map[string]string{"more.txt": "m\n"}, "More")
		require.NoError(t, err)
		m := getPull(t, e, 1)
		assert.Nil(t, m.Mergeable, "mergeable is null while GitHub computes it")
		assert.Equal(t, "unknown", m.MergeableState)
		e.sim.Advance(5 * time.Second)
		m = getPull(t, e, 1)
		require.NotNil(t, m.Mergeable)
		assert.Equal(t, "clean", m.MergeableState)

		_, err = e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"other.txt": "x\n"}, "Other work")
		require.NoError(t, err)
		assert.Equal(t, "unknown", getPull(t, e, 1).MergeableState, "a moved base is computed again too")
	})
}

// TestContract_BranchRulesAndProtection: the two places a base's required
// checks and strict policy are read. "Get rules for a branch"
// (docs.github.com/rest/repos/rules#get-rules-for-a-branch) lists the
// active rules to anyone who can read the repository, a
// required_status_checks rule with required_status_checks and
// strict_required_status_checks_policy; "Get branch protection"
// (docs.github.com/rest/branches/branch-protection#get-branch-protection)
// answers with required_status_checks {strict, contexts, checks} to an
// admin, 404 to anyone else, and 404 "Branch not protected" for a branch
// without protection.
func TestContract_BranchRulesAndProtection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	require.NoError(t, e.sim.SetRuleset(e.repo, "main", ghsim.RequiredChecks{Contexts: []string{"ci"}, Strict: true}))
	require.NoError(t, e.sim.SetBranchProtection(e.repo, "main", ghsim.RequiredChecks{Contexts: []string{"test"}, Strict: true}))
	require.NoError(t, e.sim.SetRequiredChecks(e.repo, "feature", "lint"))

	rulesTmpl := "/repos/{owner}/{repo}/rules/branches/{branch}"
	protTmpl := "/repos/{owner}/{repo}/branches/{branch}/protection"
	tests := []struct {
		name, path, tmpl, token string
		status                  int
		check                   func(t *testing.T, r resp)
	}{
		{name: "strict ruleset", path: "/repos/octo/socket.io/rules/branches/main", tmpl: rulesTmpl, token: tokReader, status: 200,
			check: func(t *testing.T, r resp) {
				p := requiredChecksRule(t, r)
				assert.True(t, p.StrictRequiredStatusChecksPolicy)
				require.Len(t, p.RequiredStatusChecks, 1)
				assert.Equal(t, "ci", p.RequiredStatusChecks[0].Context)
			}},
		{name: "loose ruleset", path: "/repos/octo/socket.io/rules/branches/feature", tmpl: rulesTmpl, token: tokReader, status: 200,
			check: func(t *testing.T, r resp) { assert.False(t, requiredChecksRule(t, r).StrictRequiredStatusChecksPolicy) }},
		{name: "protection for the admin", path: "/repos/octo/socket.io/branches/main/protection", tmpl: protTmpl, token: tokOwner, status: 200,
			check: func(t *testing.T, r resp) {
				var p gh.Protection
				r.json(t, &p)
				require.NotNil(t, p.RequiredStatusChecks)
				assert.True(t, p.RequiredStatusChecks.Strict)
				require.NotNil(t, p.RequiredStatusChecks.Contexts)
				assert.Equal(t, []string{"test"}, *p.RequiredStatusChecks.Contexts)
			}},
		{name: "protection hidden from a writer", path: "/repos/octo/socket.io/branches/main/protection", tmpl: protTmpl, token: tokBot, status: 404},
		{name: "protection hidden from a reader", path: "/repos/octo/socket.io/branches/main/protection", tmpl: protTmpl, token: tokReader, status: 404},
		{name: "protection hidden from anonymous", path: "/repos/octo/socket.io/branches/main/protection", tmpl: protTmpl, status: 404},
		{name: "unprotected branch", path: "/repos/octo/socket.io/branches/feature/protection", tmpl: protTmpl, token: tokOwner, status: 404,
			check: func(t *testing.T, r resp) { assert.Equal(t, "Branch not protected", r.obj(t)["message"]) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, e.srv, "GET", tt.path, tt.token, nil)
			require.Equal(t, tt.status, r.StatusCode, "body: %.300s", r.body)
			checkContract(t, "GET", tt.tmpl, r.StatusCode, r.body)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// TestContract_Compare: "Compare two commits"
// (docs.github.com/rest/commits/commits#compare-two-commits), computed by
// git: ahead_by and behind_by count the commits of head not in base and of
// base not in head, status is ahead, behind, diverged or identical,
// base_commit is base and merge_base_commit their merge base. Whether the
// base tip is an ancestor of a PR's head is behind_by == 0.
func TestContract_Compare(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ghsim.Options{})
	info, err := e.sim.PRInfo(e.pr)
	require.NoError(t, err)
	oldMain := git(t, e.sim.GitDir(e.repo), "rev-parse", "main")
	newMain, err := e.sim.PushCommit(e.repo, "main", "octo", map[string]string{"other.txt": "x\n"}, "Other work")
	require.NoError(t, err)

	tests := []struct {
		name, basehead    string
		status            int
		want              string
		ahead, behind     int
		baseSHA, mergeSHA string
	}{
		{name: "head behind the base tip: diverged", basehead: "main...feature", status: 200, want: "diverged", ahead: 1, behind: 1, baseSHA: newMain, mergeSHA: oldMain},
		{name: "a page of the commits, counts of all", basehead: "main...feature?per_page=1", status: 200, want: "diverged", ahead: 1, behind: 1, baseSHA: newMain, mergeSHA: oldMain},
		{name: "by sha", basehead: oldMain + "..." + info.HeadSHA, status: 200, want: "ahead", ahead: 1, baseSHA: oldMain, mergeSHA: oldMain},
		{name: "the other way", basehead: info.HeadSHA + "..." + oldMain, status: 200, want: "behind", behind: 1, baseSHA: info.HeadSHA, mergeSHA: oldMain},
		{name: "identical", basehead: "main...main", status: 200, want: "identical", baseSHA: newMain, mergeSHA: newMain},
		{name: "unknown branch", basehead: "main...nope", status: 404},
		{name: "no dots", basehead: "main", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, e.srv, "GET", "/repos/octo/socket.io/compare/"+tt.basehead, tokReader, nil)
			require.Equal(t, tt.status, r.StatusCode, "body: %.300s", r.body)
			checkContract(t, "GET", "/repos/{owner}/{repo}/compare/{basehead}", r.StatusCode, r.body)
			if tt.status != 200 {
				return
			}
			var c gh.CommitsComparison
			r.json(t, &c)
			assert.Equal(t, tt.want, c.GetStatus())
			assert.Equal(t, tt.ahead, c.GetAheadBy())
			assert.Equal(t, tt.behind, c.GetBehindBy())
			assert.Equal(t, tt.ahead, c.GetTotalCommits())
			assert.Len(t, c.Commits, tt.ahead)
			assert.Equal(t, tt.baseSHA, c.GetBaseCommit().GetSHA())
			assert.Equal(t, tt.mergeSHA, c.GetMergeBaseCommit().GetSHA())
		})
	}
}

// requiredChecksRule decodes the one rule a branch's rules list holds, a
// required_status_checks rule, as go-github does.
func requiredChecksRule(t *testing.T, r resp) gh.RequiredStatusChecksRuleParameters {
	t.Helper()
	var rules []*gh.RepositoryRule
	r.json(t, &rules)
	require.Len(t, rules, 1)
	require.Equal(t, "required_status_checks", rules[0].Type)
	var p gh.RequiredStatusChecksRuleParameters
	require.NoError(t, json.Unmarshal(*rules[0].Parameters, &p))
	return p
}

func ptr[T any](v T) *T { return &v }
