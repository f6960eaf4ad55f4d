package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"github.com/prloop/prloop/pkg/ghref"
)

// RuleRequiredStatusChecks is the type of the branch rule that names the
// checks a branch requires.
const RuleRequiredStatusChecks = "required_status_checks"

// BranchRule is one active rule of a branch, from any ruleset that applies
// to it (GET /repos/{owner}/{repo}/rules/branches/{branch}). Parameters
// stay raw: their shape depends on Type, and prloop reads only one type.
type BranchRule struct {
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// RulesetID is the ruleset the rule comes from, for logs.
	RulesetID int64 `json:"ruleset_id,omitempty"`
}

type requiredChecksParams struct {
	RequiredStatusChecks []struct {
		Context string `json:"context"`
	} `json:"required_status_checks"`
}

// RequiredChecks returns the contexts (commit status contexts or check run
// names) that the required_status_checks rules among rules require, sorted
// and without repeats. A rule whose parameters do not decode is an error:
// reading it as "nothing required" would fail open.
func RequiredChecks(rules []BranchRule) ([]string, error) {
	var out []string
	for _, r := range rules {
		if r.Type != RuleRequiredStatusChecks {
			continue
		}
		var p requiredChecksParams
		if err := json.Unmarshal(r.Parameters, &p); err != nil {
			return nil, fmt.Errorf("decode required_status_checks rule of ruleset %d: %w", r.RulesetID, err)
		}
		for _, c := range p.RequiredStatusChecks {
			if c.Context != "" {
				out = append(out, c.Context)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ListBranchRules lists the rules that apply to branch, across pages
// (readable with read access, unlike classic branch protection). A branch
// or repository without rules, which GitHub may answer with 404, has none.
func (c *Client) ListBranchRules(ctx context.Context, repo ghref.Repo, branch string) ([]BranchRule, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("list branch rules: %w", err)
	}
	if branch == "" {
		return nil, fmt.Errorf("list branch rules of %s: empty branch name", repo)
	}
	// The branch is one path segment: a slash in it is escaped, so routes
	// and the simulator's pattern see one parameter.
	rules, err := listAll[BranchRule](ctx, c, withQuery(repoPath(repo)+"/rules/branches/"+url.PathEscape(branch), nil))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list rules of branch %s of %s: %w", branch, repo, err)
	}
	return rules, nil
}
