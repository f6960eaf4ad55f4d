package ghsim

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// GitHub Actions as the simulator models it: a workflow run on a commit
// has jobs, each of which is a check run with the job's id (as on GitHub,
// where a job's check_run_url names the check run of the same id). A job's
// log is served the way GitHub serves it: GET /actions/jobs/{id}/logs
// answers 302 with a short-lived URL on another host (the log store),
// which must be fetched without the API token. Re-running a run's failed
// jobs (POST /actions/runs/{id}/rerun-failed-jobs) makes a new attempt of
// each failed job: a new job and check run, with the next conclusion of
// its JobInput.Reruns.
//
// A run RunWorkflow records is over when it is recorded. A run
// StartWorkflow starts is run by a runner outside the simulator, as on
// GitHub: each attempt of a job, the first and each re-run's, is in
// progress (its check run too) until the runner reports its conclusion
// (FinishJob); the runner finds a re-run's new attempt with WorkflowJobs.

// Annotation is a check run annotation (GET /check-runs/{id}/annotations).
type Annotation struct {
	Path               string
	StartLine, EndLine int
	// Level is notice, warning or failure.
	Level, Title, Message, RawDetails string
}

// Step is a step of a workflow job.
type Step struct {
	Name       string
	Conclusion string
}

// JobInput is a job of a simulated workflow run (RunWorkflow).
type JobInput struct {
	// Name is the job's and its check run's name.
	Name string
	// Conclusion is how the first attempt ends: success, failure,
	// cancelled, timed_out, action_required, …
	Conclusion string
	// Title, Summary and Text are the check run's output.
	Title, Summary, Text string
	Annotations          []Annotation
	Steps                []Step
	// Log is the job's log, served through the redirect.
	Log string
	// Reruns are the conclusions of the job's re-runs, in order; a re-run
	// past the list ends as Conclusion did. A flaky job: {"success"}.
	Reruns []string
}

// LogRequest is one request the log store received: what a test checks
// to see that the API token never went there.
type LogRequest struct {
	Path          string
	Authorization string
}

// actions is the simulator's GitHub Actions state.
type actions struct {
	mu   sync.Mutex
	runs map[int64]*ghaRun
	jobs map[int64]*ghaJob
	// store serves job logs on a host of its own, as GitHub's log store.
	store     *http.Server
	storeURL  string
	storeErr  error
	storeOnce sync.Once
	requests  []LogRequest
	reruns    int
}

type ghaRun struct {
	id      int64
	repo    ghref.Repo
	sha     string
	branch  string
	name    string
	attempt int
	jobs    []*ghaJob // the latest attempt of each job
	// runner says a runner outside the simulator ends each attempt of
	// its jobs (StartWorkflow, FinishJob).
	runner bool
}

type ghaJob struct {
	id       int64
	run      *ghaRun
	in       JobInput
	attempt  int    // of the job: 1 first, 2 after one re-run
	concl    string // "" while in progress
	started  time.Time
	finished time.Time // zero while in progress
	secret   string    // the log URL's signature
	cr       *checkRun // the attempt's check run
}

// done says whether the job's attempt completed.
func (j *ghaJob) done() bool { return !j.finished.IsZero() }

// seedHash is a value only the simulator can compute: the signature of
// a log URL.
func (s *Sim) seedHash(v string) uint64 { return maphash.String(s.seed, v) }

func (s *Sim) act() *actions {
	s.actOnce.Do(func() {
		s.actState = &actions{runs: map[int64]*ghaRun{}, jobs: map[int64]*ghaJob{}}
	})
	return s.actState
}

// RunWorkflow records a completed workflow run named name on sha (a
// commit of repo, or a branch) with jobs, each a check run of its own, and
// returns the run's id and the jobs' ids.
func (s *Sim) RunWorkflow(repo ghref.Repo, sha, name string, jobs ...JobInput) (int64, []int64, error) {
	return s.workflow(repo, sha, name, false, jobs)
}

// StartWorkflow starts a workflow run named name on sha (a commit of
// repo, or a branch) with one job of each of jobs' names, each a check run
// of its own, and returns the run's id and the jobs' ids. Each attempt of
// a job, the first and every re-run's, stays in progress until FinishJob
// reports its conclusion, as a runner does on GitHub.
func (s *Sim) StartWorkflow(repo ghref.Repo, sha, name string, jobs ...string) (int64, []int64, error) {
	in := make([]JobInput, len(jobs))
	for i, n := range jobs {
		in[i] = JobInput{Name: n}
	}
	return s.workflow(repo, sha, name, true, in)
}

// workflow records a run named name on sha (a commit of repo, or a
// branch) with the first attempt of each of jobs: completed at once, or
// ended by a runner (FinishJob).
func (s *Sim) workflow(repo ghref.Repo, sha, name string, runner bool, jobs []JobInput) (int64, []int64, error) {
	rp, err := s.repoFor(repo)
	if err != nil {
		return 0, nil, err
	}
	rp.mu.Lock()
	full, ok := rp.resolveRef(sha)
	rp.mu.Unlock()
	if !ok {
		return 0, nil, fmt.Errorf("run workflow %s on %s@%s: no such commit", name, repo, sha)
	}
	run := &ghaRun{repo: repo, sha: full, name: name, attempt: 1, runner: runner}
	if full != sha {
		run.branch = sha
	}
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	run.id = s.newID()
	a.runs[run.id] = run
	var ids []int64
	for _, in := range jobs {
		j := s.startJob(rp, run, in, 1, in.Conclusion)
		a.jobs[j.id] = j
		run.jobs = append(run.jobs, j)
		ids = append(ids, j.id)
	}
	return run.id, ids, nil
}

// startJob makes an attempt of a job and its check run: completed with
// concl, or in progress when a runner ends the run's jobs. a.mu must be
// held.
func (s *Sim) startJob(rp *repo, run *ghaRun, in JobInput, attempt int, concl string) *ghaJob {
	now := s.Now()
	j := &ghaJob{id: s.newID(), run: run, in: in, attempt: attempt, started: now,
		secret: strconv.FormatUint(s.seedHash(strconv.FormatInt(run.id, 10)+in.Name+strconv.Itoa(attempt)), 36)}
	j.cr = &checkRun{id: j.id, suiteID: run.id, name: in.Name, sha: run.sha, status: "in_progress", started: now}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.checks[run.sha] = append(rp.checks[run.sha], j.cr)
	if run.runner {
		rp.checkLog[run.sha] = append(rp.checkLog[run.sha], *j.cr)
		return j
	}
	j.complete(rp, concl, now)
	return j
}

// complete ends the job's attempt with concl at now, and its check run
// with the job's output (none for a success). a.mu and rp.mu must be held.
func (j *ghaJob) complete(rp *repo, concl string, now time.Time) {
	j.concl, j.finished = concl, now
	cr := j.cr
	cr.status, cr.conclusion, cr.completed = "completed", concl, now
	if concl != "success" {
		cr.title, cr.summary, cr.text, cr.annotations = j.in.Title, j.in.Summary, j.in.Text, slices.Clone(j.in.Annotations)
	}
	rp.checkLog[cr.sha] = append(rp.checkLog[cr.sha], *cr)
}

// FinishJob reports the conclusion of job's attempt in progress, as the
// runner of a run StartWorkflow started: the job and its check run
// complete.
func (s *Sim) FinishJob(repo ghref.Repo, job int64, conclusion string) error {
	if !slices.Contains(checkConclusions, conclusion) {
		return fmt.Errorf("finish job %d of %s: %q is not a conclusion GitHub knows", job, repo, conclusion)
	}
	rp, err := s.repoFor(repo)
	if err != nil {
		return err
	}
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.jobs[job]
	switch {
	case j == nil || j.run.repo.Key() != repo.Key():
		return fmt.Errorf("finish job %d of %s: no such job", job, repo)
	case !j.run.runner:
		return fmt.Errorf("finish job %d of %s: its run was recorded complete (RunWorkflow)", job, repo)
	case j.done():
		return fmt.Errorf("finish job %d of %s: attempt %d already ended %s", job, repo, j.attempt, j.concl)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	j.complete(rp, conclusion, s.Now())
	return nil
}

// JobSnapshot is one attempt of a workflow job, for a runner and tests.
type JobSnapshot struct {
	// ID is the attempt's job id, which its check run has too.
	ID   int64
	Name string
	// Attempt is 1 for the first, 2 after one re-run, …
	Attempt int
	// Status is in_progress or completed; Conclusion is set once
	// completed.
	Status, Conclusion string
}

// WorkflowJobs returns the latest attempt of each job of the workflow
// run run, in the run's order.
func (s *Sim) WorkflowJobs(repo ghref.Repo, run int64) ([]JobSnapshot, error) {
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.runs[run]
	if r == nil || r.repo.Key() != repo.Key() {
		return nil, fmt.Errorf("jobs of workflow run %d of %s: no such run", run, repo)
	}
	out := make([]JobSnapshot, 0, len(r.jobs))
	for _, j := range r.jobs {
		js := JobSnapshot{ID: j.id, Name: j.in.Name, Attempt: j.attempt, Status: "in_progress"}
		if j.done() {
			js.Status, js.Conclusion = "completed", j.concl
		}
		out = append(out, js)
	}
	return out, nil
}

// LogRequests returns the requests the log store received, oldest first.
func (s *Sim) LogRequests() []LogRequest {
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// Reruns counts the accepted requests to re-run failed jobs.
func (s *Sim) Reruns() int {
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reruns
}

// logStore starts the log store on a port of its own, once; it stops
// with the simulator.
func (s *Sim) logStore() (string, error) {
	a := s.act()
	a.storeOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			a.storeErr = fmt.Errorf("start the log store: %w", err)
			return
		}
		a.store = &http.Server{Handler: http.HandlerFunc(s.serveLog), ReadHeaderTimeout: 10 * time.Second}
		a.storeURL = "http://" + ln.Addr().String()
		go func() { _ = a.store.Serve(ln) }()
		go func() { <-s.closed; _ = a.store.Close() }()
	})
	return a.storeURL, a.storeErr
}

// serveLog is the log store: /jobs/{id}?sig=… serves the job's log as
// text. Like a blob store behind a signed URL, it refuses a request that
// brings an Authorization header of its own.
func (s *Sim) serveLog(w http.ResponseWriter, r *http.Request) {
	a := s.act()
	a.mu.Lock()
	a.requests = append(a.requests, LogRequest{Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
	id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/jobs/"), 10, 64)
	j := a.jobs[id]
	a.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "":
		http.Error(w, "AuthenticationFailed: the signed URL needs no Authorization header", http.StatusBadRequest)
	case j == nil || r.URL.Query().Get("sig") != j.secret:
		http.Error(w, "AuthorizationPermissionMismatch", http.StatusForbidden)
	default:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(j.log()))
	}
}

// log is the job attempt's log: its input's for a failure, a short
// success otherwise.
func (j *ghaJob) log() string {
	if j.concl == "success" {
		return "2026-01-01T00:00:00.0000000Z ok: " + j.in.Name + " passed\n"
	}
	return j.in.Log
}

// job finds a job of the request's repository. a.mu must be held.
func (c *reqCtx) job(a *actions) (*ghaJob, *result) {
	rp, res := c.repo()
	if res != nil {
		return nil, res
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, notFound()
	}
	j := a.jobs[id]
	if j == nil || j.run.repo.Key() != rp.ref.Key() {
		return nil, notFound()
	}
	return j, nil
}

// getJob is GET /repos/{owner}/{repo}/actions/jobs/{job_id}.
func (s *Sim) getJob(c *reqCtx) *result {
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	j, res := c.job(a)
	if res != nil {
		return res
	}
	rp, _ := c.repo()
	u := rp.apiURL(c.base)
	status, concl := "in_progress", (*string)(nil)
	if j.done() {
		status, concl = "completed", strp(j.concl)
	}
	steps := []jStep{}
	for i, st := range j.in.Steps {
		sc := strp(st.Conclusion)
		switch {
		case !j.done():
			sc = nil
		case j.concl == "success":
			sc = strp("success")
		}
		steps = append(steps, jStep{Name: st.Name, Status: status, Conclusion: sc, Number: i + 1,
			StartedAt: tsp(j.started), CompletedAt: tsp(j.finished)})
	}
	runURL := u + "/actions/runs/" + itoa64(j.run.id)
	return jsonResult(200, jJob{
		ID: j.id, RunID: j.run.id, RunURL: runURL, RunAttempt: j.attempt, NodeID: nodeID("08:CheckRun", j.id),
		HeadSHA: j.run.sha, URL: u + "/actions/jobs/" + itoa64(j.id),
		HTMLURL: strp(rp.htmlURL(c.base) + "/actions/runs/" + itoa64(j.run.id) + "/job/" + itoa64(j.id)),
		Status:  status, Conclusion: concl, CreatedAt: ts(j.started), StartedAt: ts(j.started),
		CompletedAt: tsp(j.finished), Name: j.in.Name, Steps: steps, CheckRunURL: u + "/check-runs/" + itoa64(j.id),
		Labels: []string{"ubuntu-latest"}, WorkflowName: strp(j.run.name), HeadBranch: strp(j.run.branch),
	})
}

// jobLogs is GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs: 302 to
// the log store, as GitHub redirects to a URL that expires.
func (s *Sim) jobLogs(c *reqCtx) *result {
	store, err := s.logStore()
	if err != nil {
		return errResult(500, err.Error())
	}
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	j, res := c.job(a)
	if res != nil {
		return res
	}
	return (&result{status: http.StatusFound}).setHeader("Location", store+"/jobs/"+itoa64(j.id)+"?sig="+j.secret)
}

// rerunFailedJobs is POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs:
// a new attempt of the run, in which each failed job runs again (and the
// jobs it needs, which the simulator's runs do not have): completed at
// once with the next of its JobInput.Reruns, or, in a run a runner ends
// (StartWorkflow), in progress until FinishJob.
func (s *Sim) rerunFailedJobs(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return notFound()
	}
	a := s.act()
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.runs[id]
	if run == nil || run.repo.Key() != rp.ref.Key() {
		return notFound()
	}
	run.attempt++
	for i, j := range run.jobs {
		if !j.done() || !failedConclusion(j.concl) {
			continue
		}
		concl := j.in.Conclusion
		if n := j.attempt - 1; n < len(j.in.Reruns) {
			concl = j.in.Reruns[n]
		}
		nj := s.startJob(rp, run, j.in, j.attempt+1, concl)
		a.jobs[nj.id] = nj
		run.jobs[i] = nj
	}
	a.reruns++
	return jsonResult(201, struct{}{})
}

// failedConclusion reports whether a job's conclusion is a failure that
// re-running failed jobs runs again.
func failedConclusion(c string) bool {
	return c != "success" && c != "skipped" && c != "neutral"
}

// annotations is GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations,
// paginated.
func (s *Sim) annotations(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	id, err := strconv.ParseInt(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return notFound()
	}
	rp.mu.Lock()
	var cr *checkRun
	for _, list := range rp.checks {
		if i := slices.IndexFunc(list, func(x *checkRun) bool { return x.id == id }); i >= 0 {
			cr = list[i]
		}
	}
	var list []Annotation
	if cr != nil {
		list = slices.Clone(cr.annotations)
	}
	rp.mu.Unlock()
	if cr == nil {
		return notFound()
	}
	blob := rp.htmlURL(c.base) + "/blob/" + cr.sha + "/"
	return c.paged(len(list), func(i int) json.RawMessage {
		an := list[i]
		end := max(an.EndLine, an.StartLine)
		return marshal(jAnnotation{
			Path: an.Path, BlobHref: blob + an.Path, StartLine: an.StartLine, EndLine: end,
			AnnotationLevel: strp(an.Level), Title: nilIfEmpty(an.Title), Message: strp(an.Message), RawDetails: nilIfEmpty(an.RawDetails),
		})
	})
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jJob is a workflow job as GitHub renders it.
type jJob struct {
	ID              int64    `json:"id"`
	RunID           int64    `json:"run_id"`
	RunURL          string   `json:"run_url"`
	RunAttempt      int      `json:"run_attempt"`
	NodeID          string   `json:"node_id"`
	HeadSHA         string   `json:"head_sha"`
	URL             string   `json:"url"`
	HTMLURL         *string  `json:"html_url"`
	Status          string   `json:"status"`
	Conclusion      *string  `json:"conclusion"`
	CreatedAt       ts       `json:"created_at"`
	StartedAt       ts       `json:"started_at"`
	CompletedAt     *ts      `json:"completed_at"`
	Name            string   `json:"name"`
	Steps           []jStep  `json:"steps"`
	CheckRunURL     string   `json:"check_run_url"`
	Labels          []string `json:"labels"`
	RunnerID        *int64   `json:"runner_id"`
	RunnerName      *string  `json:"runner_name"`
	RunnerGroupID   *int64   `json:"runner_group_id"`
	RunnerGroupName *string  `json:"runner_group_name"`
	WorkflowName    *string  `json:"workflow_name"`
	HeadBranch      *string  `json:"head_branch"`
}

type jStep struct {
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	Number      int     `json:"number"`
	StartedAt   *ts     `json:"started_at"`
	CompletedAt *ts     `json:"completed_at"`
}

type jAnnotation struct {
	Path            string  `json:"path"`
	BlobHref        string  `json:"blob_href"`
	StartLine       int     `json:"start_line"`
	EndLine         int     `json:"end_line"`
	StartColumn     *int    `json:"start_column"`
	EndColumn       *int    `json:"end_column"`
	AnnotationLevel *string `json:"annotation_level"`
	Title           *string `json:"title"`
	Message         *string `json:"message"`
	RawDetails      *string `json:"raw_details"`
}
