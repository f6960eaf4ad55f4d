package ghsim

import (
	"fmt"
	"slices"

	"github.com/prloop/prloop/pkg/ghref"
)

// branchRules is the one kind of branch rule the sim models: a repository
// ruleset whose required_status_checks rule names contexts.
type branchRules struct {
	rulesetID int64
	contexts  []string
}

// SetRequiredChecks makes branch of repo require contexts (commit status
// contexts or check run names), as a repository ruleset with a
// required_status_checks rule does; no contexts removes the rule. The sim
// lists the rule (GET /repos/{owner}/{repo}/rules/branches/{branch}) but
// does not enforce it on merges, as GitHub does not for a token allowed to
// bypass the ruleset.
func (s *Sim) SetRequiredChecks(repo ghref.Repo, branch string, contexts ...string) error {
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	if branch == "" {
		return fmt.Errorf("set required checks of %s: empty branch name", repo)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(contexts) == 0 {
		delete(rp.rules, branch)
		return nil
	}
	if rp.rules == nil {
		rp.rules = map[string]*branchRules{}
	}
	br := rp.rules[branch]
	if br == nil {
		br = &branchRules{rulesetID: s.newID()}
		rp.rules[branch] = br
	}
	br.contexts = slices.Clone(contexts)
	return nil
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

// branchRulesHandler lists the rules of a branch: [] for a branch without
// any (existing or not, as GitHub answers), 404 for an unknown repository.
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
		p := jRuleParams{RequiredStatusChecks: make([]jRuleCheck, 0, len(br.contexts))}
		for _, ctx := range br.contexts {
			p.RequiredStatusChecks = append(p.RequiredStatusChecks, jRuleCheck{Context: ctx})
		}
		all = append(all, jBranchRule{
			Type: "required_status_checks", Parameters: p, RulesetSourceType: "Repository",
			RulesetSource: rp.ref.String(), RulesetID: br.rulesetID,
		})
	}
	start, end, link := c.window(len(all))
	res = jsonResult(200, all[start:end])
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}
