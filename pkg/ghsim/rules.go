package ghsim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
)

// RequiredChecks is a branch's required-status-checks setting, in either
// of GitHub's two forms: a repository ruleset's required_status_checks
// rule, or classic branch protection's required_status_checks.
type RequiredChecks struct {
	// Contexts are the required checks: commit status contexts or check
	// run names.
	Contexts []string
	// Strict is "Require branches to be up to date before merging": the
	// ruleset's strict_required_status_checks_policy, classic protection's
	// strict. Only then does GitHub call a PR whose head lacks the base tip
	// "behind"; without it such a PR is clean, and merging it lands a tree
	// nobody tested.
	Strict bool
}

// branchRules is a repository ruleset's required_status_checks rule on
// one branch.
type branchRules struct {
	rulesetID int64
	RequiredChecks
}

// SetRequiredChecks makes branch of repo require contexts, as a repository
// ruleset with a required_status_checks rule whose strict policy is off
// (GitHub's default) does; no contexts removes the rule.
func (s *Sim) SetRequiredChecks(repo ghref.Repo, branch string, contexts ...string) error {
	return s.SetRuleset(repo, branch, RequiredChecks{Contexts: contexts})
}

// SetRuleset gives branch of repo a repository ruleset with a
// required_status_checks rule as rc says; an empty rc removes it. The sim
// lists the rule (GET /repos/{owner}/{repo}/rules/branches/{branch}) and
// reports mergeable_state by it, but does not enforce it on merges, as
// GitHub does not for a token allowed to bypass the ruleset.
func (s *Sim) SetRuleset(ref ghref.Repo, branch string, rc RequiredChecks) error {
	return s.setRequired(ref, branch, "ruleset", rc, func(rp *repo) map[string]*branchRules {
		if rp.rules == nil {
			rp.rules = map[string]*branchRules{}
		}
		return rp.rules
	})
}

// SetBranchProtection gives branch of repo classic branch protection with
// required status checks as rc says; an empty rc removes the protection.
// Only an admin may read it (GET /repos/{owner}/{repo}/branches/{branch}/protection);
// mergeable_state follows it as it follows rulesets; merges are not
// refused by it (an admin's token may bypass it).
func (s *Sim) SetBranchProtection(ref ghref.Repo, branch string, rc RequiredChecks) error {
	return s.setRequired(ref, branch, "branch protection", rc, func(rp *repo) map[string]*branchRules {
		if rp.protection == nil {
			rp.protection = map[string]*branchRules{}
		}
		return rp.protection
	})
}

func (s *Sim) setRequired(ref ghref.Repo, branch, what string, rc RequiredChecks, of func(*repo) map[string]*branchRules) error {
	rp, err := s.repoFor(ref)
	if err != nil {
		return err
	}
	if branch == "" {
		return fmt.Errorf("set %s of %s: empty branch name", what, ref)
	}
	for _, c := range rc.Contexts {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("set %s of %s on %s: empty check name", what, ref, branch)
		}
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	m := of(rp)
	rp.ver++ // mergeable_state of the branch's PRs changes
	if len(rc.Contexts) == 0 && !rc.Strict {
		delete(m, branch)
		return nil
	}
	br := m[branch]
	if br == nil {
		br = &branchRules{rulesetID: s.newID()}
		m[branch] = br
	}
	br.Contexts, br.Strict = slices.Clone(rc.Contexts), rc.Strict
	return nil
}

// requiredOn is what the ruleset and the classic protection of branch
// require together, as GitHub layers them: every context either names,
// strict when either is. rp.mu must be held.
func (rp *repo) requiredOn(branch string) RequiredChecks {
	var out RequiredChecks
	for _, br := range []*branchRules{rp.rules[branch], rp.protection[branch]} {
		if br == nil {
			continue
		}
		out.Contexts = append(out.Contexts, br.Contexts...)
		out.Strict = out.Strict || br.Strict
	}
	slices.Sort(out.Contexts)
	out.Contexts = slices.Compact(out.Contexts)
	return out
}

type jRuleCheck struct {
	Context string `json:"context"`
}

type jRuleParams struct {
	RequiredStatusChecks             []jRuleCheck `json:"required_status_checks"`
	StrictRequiredStatusChecksPolicy bool         `json:"strict_required_status_checks_policy"`
}

type jBranchRule struct {
	Type              string      `json:"type"`
	Parameters        jRuleParams `json:"parameters"`
	RulesetSourceType string      `json:"ruleset_source_type"`
	RulesetSource     string      `json:"ruleset_source"`
	RulesetID         int64       `json:"ruleset_id"`
}

func ruleChecks(contexts []string) []jRuleCheck {
	out := make([]jRuleCheck, 0, len(contexts))
	for _, ctx := range contexts {
		out = append(out, jRuleCheck{Context: ctx})
	}
	return out
}

// branchRulesHandler lists the rules of a branch: [] for a branch without
// any (existing or not, as GitHub answers), 404 for an unknown repository.
// Classic branch protection is not a rule and is not listed.
func (s *Sim) branchRulesHandler(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	branch := c.r.PathValue("branch")
	rp.mu.Lock()
	defer rp.mu.Unlock()
	all := []jBranchRule{}
	if br := rp.rules[branch]; br != nil {
		all = append(all, jBranchRule{
			Type: "required_status_checks",
			Parameters: jRuleParams{
				RequiredStatusChecks: ruleChecks(br.Contexts), StrictRequiredStatusChecksPolicy: br.Strict,
			},
			RulesetSourceType: "Repository", RulesetSource: rp.ref.String(), RulesetID: br.rulesetID,
		})
	}
	start, end, link := c.window(len(all))
	res = jsonResult(200, all[start:end])
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}

type jStatusChecksProtection struct {
	URL         string       `json:"url"`
	Strict      bool         `json:"strict"`
	Contexts    []string     `json:"contexts"`
	Checks      []jCheckSpec `json:"checks"`
	ContextsURL string       `json:"contexts_url"`
}

type jCheckSpec struct {
	Context string `json:"context"`
	AppID   *int64 `json:"app_id"`
}

type jBranchProtection struct {
	URL                  string                  `json:"url"`
	RequiredStatusChecks jStatusChecksProtection `json:"required_status_checks"`
}

// branchProtectionHandler serves classic branch protection. GitHub shows
// it to admins only: anyone else gets 404, as if the branch did not exist;
// an admin gets 404 "Branch not protected" for a branch without it.
func (s *Sim) branchProtectionHandler(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	branch := c.r.PathValue("branch")
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if c.user == nil || rp.permOf(c.user) != "admin" {
		return notFound()
	}
	if _, ok := rp.readRef(branch); !ok {
		return errResult(404, "Branch not found")
	}
	br := rp.protection[branch]
	if br == nil {
		return errResult(404, "Branch not protected")
	}
	u := rp.apiURL(c.base) + "/branches/" + branch + "/protection"
	checks := make([]jCheckSpec, 0, len(br.Contexts))
	for _, ctx := range br.Contexts {
		checks = append(checks, jCheckSpec{Context: ctx})
	}
	return jsonResult(200, jBranchProtection{URL: u, RequiredStatusChecks: jStatusChecksProtection{
		URL: u + "/required_status_checks", Strict: br.Strict, Contexts: append([]string{}, br.Contexts...),
		Checks: checks, ContextsURL: u + "/required_status_checks/contexts",
	}})
}
