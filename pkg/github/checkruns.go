package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// Check run statuses and conclusions prloop writes.
const (
	CheckInProgress     = "in_progress"
	CheckCompleted      = "completed"
	CheckSuccess        = "success"
	CheckActionRequired = "action_required"
)

// MaxCheckSummary is GitHub's limit on a check run's output.summary, in
// characters.
const MaxCheckSummary = 65535

// CheckRunOutput is a check run's output: what the checks tab shows.
type CheckRunOutput struct {
	Title   string `json:"title"`
	Summary string `json:"summary"`
}

// CheckRunInput is a check run to create (POST /repos/{o}/{r}/check-runs,
// which needs Name and HeadSHA) or the fields to change on one (PATCH
// /repos/{o}/{r}/check-runs/{id}); empty fields are not sent.
type CheckRunInput struct {
	Name    string `json:"name,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	// Status is queued, in_progress or completed; a Conclusion completes
	// the run whatever Status says.
	Status     string          `json:"status,omitempty"`
	Conclusion string          `json:"conclusion,omitempty"`
	Output     *CheckRunOutput `json:"output,omitempty"`
}

// validate refuses what GitHub would, before spending a request on it.
func (in CheckRunInput) validate() error {
	if in.Output != nil && len([]rune(in.Output.Summary)) > MaxCheckSummary {
		return fmt.Errorf("output summary of %d characters, GitHub keeps %d", len([]rune(in.Output.Summary)), MaxCheckSummary)
	}
	return nil
}

// CreateCheckRun creates a check run; only a GitHub App may (see IsApp).
// Each create is a new run, so, like a comment, a 5xx or timeout is
// returned rather than retried: the run may exist, and the caller finds it
// with FindCheckRun before writing again.
func (c *Client) CreateCheckRun(ctx context.Context, repo ghref.Repo, in CheckRunInput) (*gh.CheckRun, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("create check run: %w", err)
	}
	if in.Name == "" || in.HeadSHA == "" {
		return nil, fmt.Errorf("create check run on %s: %w", repo, errors.New("name and head sha are required"))
	}
	if err := in.validate(); err != nil {
		return nil, fmt.Errorf("create check run %s on %s@%s: %w", in.Name, repo, in.HeadSHA, err)
	}
	cr, _, err := doJSON[*gh.CheckRun](ctx, c, http.MethodPost, repoPath(repo)+"/check-runs", in, false)
	if err != nil {
		return nil, fmt.Errorf("create check run %s on %s@%s: %w", in.Name, repo, in.HeadSHA, err)
	}
	return cr, nil
}

// UpdateCheckRun changes check run id. Setting the same fields twice is
// harmless, so it is retried like a read.
func (c *Client) UpdateCheckRun(ctx context.Context, repo ghref.Repo, id int64, in CheckRunInput) (*gh.CheckRun, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("update check run: %w", err)
	}
	if err := in.validate(); err != nil {
		return nil, fmt.Errorf("update check run %d on %s: %w", id, repo, err)
	}
	cr, _, err := doJSON[*gh.CheckRun](ctx, c, http.MethodPatch, repoPath(repo)+"/check-runs/"+strconv.FormatInt(id, 10), in, true)
	if err != nil {
		return nil, fmt.Errorf("update check run %d on %s: %w", id, repo, err)
	}
	return cr, nil
}

// FindCheckRun returns the latest check run named name on ref (a SHA or
// branch), or nil when there is none.
func (c *Client) FindCheckRun(ctx context.Context, repo ghref.Repo, ref, name string) (*gh.CheckRun, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("find check run: %w", err)
	}
	if name == "" {
		return nil, fmt.Errorf("find check run on %s@%s: empty name", repo, ref)
	}
	runs, err := c.listCheckRuns(ctx, repo, ref, url.Values{"check_name": {name}, "filter": {"latest"}})
	if err != nil {
		return nil, fmt.Errorf("find check run %s on %s@%s: %w", name, repo, ref, err)
	}
	var latest *gh.CheckRun
	for _, r := range runs {
		// filter=latest keeps one run per name; the highest id is the
		// newest should GitHub return more.
		if r != nil && r.GetName() == name && (latest == nil || r.GetID() > latest.GetID()) {
			latest = r
		}
	}
	return latest, nil
}
