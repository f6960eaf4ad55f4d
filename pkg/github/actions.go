package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/ghref"
)

// What the CI-failure loop reads of a failed check (issue #32): a check
// run's annotations, a GitHub Actions job and the tail of its log, and the
// one write, re-running a run's failed jobs.

// maxLogRead bounds how much of a job's log is read at all: the tail is
// what is kept, and a runaway log is not worth more than this.
const maxLogRead = 64 << 20

// ListCheckRunAnnotations lists every annotation of check run id, across
// pages ("List check run annotations").
func (c *Client) ListCheckRunAnnotations(ctx context.Context, repo ghref.Repo, id int64) ([]*gh.CheckRunAnnotation, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("list annotations: %w", err)
	}
	out, err := listAll[*gh.CheckRunAnnotation](ctx, c, repoPath(repo)+"/check-runs/"+strconv.FormatInt(id, 10)+"/annotations")
	if err != nil {
		return nil, fmt.Errorf("list annotations of check run %d of %s: %w", id, repo, err)
	}
	return out, nil
}

// GetWorkflowJob returns GitHub Actions job id (a job's id is its check
// run's): its run, attempt and steps.
func (c *Client) GetWorkflowJob(ctx context.Context, repo ghref.Repo, id int64) (*gh.WorkflowJob, error) {
	if err := repo.Validate(); err != nil {
		return nil, fmt.Errorf("get job: %w", err)
	}
	j, _, err := doJSON[*gh.WorkflowJob](ctx, c, http.MethodGet, repoPath(repo)+"/actions/jobs/"+strconv.FormatInt(id, 10), nil, true)
	if err != nil {
		return nil, fmt.Errorf("get job %d of %s: %w", id, repo, err)
	}
	return j, nil
}

// RerunFailedJobs re-runs the failed jobs of GitHub Actions run id, in a
// new attempt of the run ("Re-run failed jobs from a workflow run").
func (c *Client) RerunFailedJobs(ctx context.Context, repo ghref.Repo, id int64) error {
	if err := repo.Validate(); err != nil {
		return fmt.Errorf("re-run failed jobs: %w", err)
	}
	if _, err := c.send(ctx, http.MethodPost, repoPath(repo)+"/actions/runs/"+strconv.FormatInt(id, 10)+"/rerun-failed-jobs", struct{}{}, nil, false); err != nil {
		return fmt.Errorf("re-run failed jobs of run %d of %s: %w", id, repo, err)
	}
	return nil
}

// JobLogTail returns the end of GitHub Actions job id's log: at most
// maxLines lines and maxBytes bytes. GitHub answers the API request with
// a redirect to a short-lived URL on another host; that URL is fetched
// without any credential (the transport under the token layer), so the
// token never leaves for the log store.
func (c *Client) JobLogTail(ctx context.Context, repo ghref.Repo, id int64, maxLines, maxBytes int) (string, error) {
	if err := repo.Validate(); err != nil {
		return "", fmt.Errorf("job log: %w", err)
	}
	loc, _, err := c.gh.Actions.GetWorkflowJobLogs(ctx, repo.Owner, repo.Name, id, 1)
	if err != nil {
		return "", fmt.Errorf("job log of %d of %s: %s", id, repo, c.scrub(err.Error()))
	}
	if loc == nil || (loc.Scheme != "https" && loc.Scheme != "http") {
		return "", fmt.Errorf("job log of %d of %s: no usable redirect", id, repo)
	}
	text, err := c.fetchTail(ctx, loc, maxBytes)
	if err != nil {
		return "", fmt.Errorf("job log of %d of %s: %w", id, repo, err)
	}
	return TailLines(text, maxLines, maxBytes), nil
}

// fetchTail reads u without credentials, keeping its last keep bytes
// (and a little more, for whole lines).
func (c *Client) fetchTail(ctx context.Context, u *url.URL, keep int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("build the log request: %w", err)
	}
	tr := c.plain
	if tr == nil {
		tr = http.DefaultTransport
	}
	hc := &http.Client{Transport: tr}
	resp, err := hc.Do(req)
	if err != nil {
		// The signed URL is a secret of its own for its lifetime.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("fetch from %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch from %s: %s", u.Host, resp.Status)
	}
	t := &tail{keep: 2*keep + 4096}
	if _, err := io.Copy(t, io.LimitReader(resp.Body, maxLogRead)); err != nil {
		return "", fmt.Errorf("read from %s: %w", u.Host, err)
	}
	return string(t.buf), nil
}

// tail is a writer that keeps the last keep bytes written.
type tail struct {
	keep int
	buf  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.keep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// TailLines keeps the last maxLines lines of s, and of those at most the
// last maxBytes bytes, starting on a line (a line longer than that is cut
// from its start). 0 means no bound.
func TailLines(s string, maxLines, maxBytes int) string {
	s = strings.TrimRight(s, "\n")
	if maxLines > 0 {
		if lines := strings.Split(s, "\n"); len(lines) > maxLines {
			s = strings.Join(lines[len(lines)-maxLines:], "\n")
		}
	}
	if maxBytes > 0 && len(s) > maxBytes {
		cut := len(s) - maxBytes
		if nl := bytes.IndexByte([]byte(s[cut:]), '\n'); nl >= 0 && nl < len(s)-cut-1 {
			cut += nl + 1
		}
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++ // not in the middle of a rune
		}
		s = s[cut:]
	}
	return s
}
