package feedback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/kvlease"
)

// Opening a pull request (PRCreateRequested): prloop pushes the agent's
// branch from its own mirror and opens the PR, then announces it with
// PRCreated, which the poller watches like PRWatchRequested. The agent
// never holds a credential: its commits cross the wall as a bundle
// (git_open.go), are checked in the mirror like a fix's (Inspect) and are
// pushed from there.

// ErrOpenRefused is wrapped by the errors of a request to open a PR that
// prloop will not carry out as asked: retrying cannot help, so the request
// is dead-lettered with the reason (prloop dlq list).
var ErrOpenRefused = errors.New("prloop does not open this pull request")

// maxLabels and maxLabel bound a request's labels (GitHub's label names
// are at most 50 characters).
const (
	maxLabels = 20
	maxLabel  = 50
)

// OpenRequest is a request to push a branch and open its pull request.
type OpenRequest struct {
	Repo ghref.Repo
	// Worktree is the agent's checkout holding Branch.
	Worktree, Branch string
	// Base is the branch to merge into; empty: the repository's default.
	Base               string
	Title, Body        string
	Labels             []string
	Draft              bool
	ContextPath, Actor string
	// Head is the branch's head as the requester read it: informative.
	Head string
}

func openRequestOf(d *events.CreateRequested) OpenRequest {
	return OpenRequest{
		Repo: d.PR.RepoRef(), Worktree: d.Worktree, Branch: d.Branch, Base: d.BaseBranch,
		Title: d.Title, Body: d.Body, Labels: d.Labels, Draft: d.Draft, ContextPath: d.ContextPath, Actor: d.Actor, Head: d.HeadSHA,
	}
}

// check refuses a request that cannot be carried out whatever GitHub says.
func (r OpenRequest) check() error {
	switch {
	case !filepath.IsAbs(r.Worktree):
		return fmt.Errorf("%w: worktree %q is not an absolute path", ErrOpenRefused, r.Worktree)
	case r.Branch == "" || strings.HasPrefix(r.Branch, "-"):
		return fmt.Errorf("%w: branch name %q", ErrOpenRefused, r.Branch)
	case strings.HasPrefix(r.Base, "-"):
		return fmt.Errorf("%w: base branch name %q", ErrOpenRefused, r.Base)
	case len(r.Labels) > maxLabels:
		return fmt.Errorf("%w: %d labels, at most %d", ErrOpenRefused, len(r.Labels), maxLabels)
	}
	for _, l := range r.Labels {
		if l == "" || len([]rune(l)) > maxLabel || l != events.CleanTitle(l) {
			return fmt.Errorf("%w: label %q: want 1 to %d visible characters on one line", ErrOpenRefused, l, maxLabel)
		}
	}
	if st, err := os.Stat(r.Worktree); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: worktree %s is not a directory", ErrOpenRefused, r.Worktree)
	}
	return nil
}

// openFacts are what the mirror and GitHub say about a request to open.
type openFacts struct {
	// Base is the base branch's head and Result the branch's head as the
	// mirror took it in from the worktree; NewCommits counts Result's
	// commits Base lacks.
	Base, Result string
	NewCommits   int
	// Remote is the branch's head on GitHub ("" when absent), and
	// RemoteBehind whether Result descends from it (a fast-forward).
	Remote       string
	RemoteBehind bool
	// Existing is the open PR of the branch, into any base, if any.
	Existing *openPR
	// Claim is prloop's record that it pushed this branch to open a PR
	// (nil: none): the only kind of branch it pushes to once the branch
	// is on GitHub.
	Claim *openClaim
	// Protected names the branch rules that protect the branch on GitHub
	// ("" when none do).
	Protected string
}

// openClaim is prloop's record that it pushed a branch to open a pull
// request from a worktree, written before the first push and kept in the
// feedback service's bucket. The worktree's checked-out branch is the
// agent's choice: without the claim, a worktree on another PR's branch (or
// on release/2.4) would have prloop fast-forward that branch with its own
// token and announce that PR as the agent's.
type openClaim struct {
	Worktree string `json:"worktree"`
	// PR is the pull request opened or announced for the branch; 0 until
	// then.
	PR int       `json:"pr,omitempty"`
	At time.Time `json:"at"`
}

// openPR is an open pull request as far as planning needs it.
type openPR struct {
	Number int
	Head   string
	// Base is the PR's base branch.
	Base string
}

// openKind is what to do about a request to open.
type openKind int

const (
	openRefuse openKind = iota
	// openCreate opens the PR (after the push, when push is set).
	openCreate
	// openAnnounce announces the PR that is open already (after pushing
	// the new commits, when push is set).
	openAnnounce
)

// openPlan is planOpen's answer.
type openPlan struct {
	kind openKind
	push bool
	why  string
}

// planOpen decides what to do about a request to open a pull request,
// given what the mirror and GitHub say. It is pure. prloop pushes only to
// a branch it may own: one GitHub does not have yet, or one it opened a PR
// from, from this same worktree (f.Claim); never to the base branch or a
// branch GitHub's rules protect. prloop never force-pushes: a branch on
// GitHub with commits the worktree's lacks is refused, as is a branch with
// nothing to merge. A PR already open for the branch is announced, not
// opened twice.
func planOpen(req OpenRequest, base string, f openFacts) openPlan {
	refuse := func(format string, args ...any) openPlan {
		return openPlan{kind: openRefuse, why: fmt.Sprintf(format, args...)}
	}
	owned := f.Claim != nil && f.Claim.Worktree == req.Worktree
	switch {
	case req.Branch == base:
		return refuse("branch %q is the base branch", req.Branch)
	case f.Protected != "":
		return refuse("branch %q is protected on GitHub (%s); prloop opens pull requests from branches of their own", req.Branch, f.Protected)
	case f.Remote != "" && !owned && f.Existing != nil:
		return refuse("branch %q belongs to pull request #%d, which prloop did not open from %s; check out a new branch for this work",
			req.Branch, f.Existing.Number, req.Worktree)
	case f.Remote != "" && !owned && f.Claim != nil:
		return refuse("branch %q is the branch prloop opened a pull request from in another worktree, %s; check out a new branch for this work",
			req.Branch, f.Claim.Worktree)
	case f.Remote != "" && !owned:
		return refuse("branch %q exists on GitHub and prloop did not create it; prloop pushes only to a new branch or to one it opened a pull request from in this worktree (for a pull request you opened yourself, use prloop watch)",
			req.Branch)
	case f.Existing != nil && f.Existing.Base != base:
		return refuse("branch %q belongs to pull request #%d into %s, not into %s", req.Branch, f.Existing.Number, f.Existing.Base, base)
	case f.Existing != nil && f.Claim != nil && f.Claim.PR != 0 && f.Existing.Number != f.Claim.PR:
		return refuse("branch %q belongs to pull request #%d, not to #%d that prloop opened from it", req.Branch, f.Existing.Number, f.Claim.PR)
	case f.NewCommits == 0:
		return refuse("branch %q has no commits that %s lacks", req.Branch, base)
	case f.Remote != "" && f.Remote != f.Result && !f.RemoteBehind:
		return refuse("branch %q on GitHub is at %s, which the worktree's %s does not descend from; prloop does not force-push",
			req.Branch, ghref.ShortSHA(f.Remote), ghref.ShortSHA(f.Result))
	}
	push := f.Remote != f.Result
	if f.Existing != nil {
		return openPlan{kind: openAnnounce, push: push}
	}
	return openPlan{kind: openCreate, push: push}
}

// protectingRules are the branch rule types that make a branch one that
// changes reach through pull requests, or that only some may push to:
// never a branch to open a pull request from. Rules many teams set on
// every branch (no force-push, no deletion) do not count.
var protectingRules = []string{"pull_request", "required_status_checks", "update", "creation", "merge_queue", "required_deployments"}

// protectedBy names the rules among rules that protect a branch, "" when
// none does.
func protectedBy(rules []github.BranchRule) string {
	var out []string
	for _, r := range rules {
		if slices.Contains(protectingRules, r.Type) && !slices.Contains(out, r.Type) {
			out = append(out, r.Type)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "rules: " + strings.Join(out, ", ")
}

// claimKey is where the claim of the branch that openKey names is kept.
func claimKey(key string) string { return "claim." + key }

// loadClaim reads the claim under key, with its revision (nil and 0 when
// there is none). A claim that does not decode is kept (its revision) but
// counts as none: prloop does not push on its word.
func (s *Service) loadClaim(ctx context.Context, key string) (*openClaim, uint64, error) {
	e, err := s.d.KV.Get(ctx, claimKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the claim %s: %w", key, err)
	}
	var c openClaim
	if json.Unmarshal(e.Value(), &c) != nil || c.Worktree == "" {
		return nil, e.Revision(), nil
	}
	return &c, e.Revision(), nil
}

// saveClaim writes c under key if it is still at revision rev (0: none),
// and returns the new revision.
func (s *Service) saveClaim(ctx context.Context, key string, c openClaim, rev uint64) (uint64, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return 0, fmt.Errorf("encode the claim %s: %w", key, err)
	}
	next, err := kvlease.Put(ctx, s.d.KV, claimKey(key), body, rev)
	if err != nil {
		return 0, fmt.Errorf("write the claim %s (revision %d): %w", key, rev, err)
	}
	return next, nil
}

// openTitle is the PR's title and body: the request's, or else the last
// commit's subject and body (as the mirror holds it, never the worktree's
// word), cleaned and bounded; the branch name when nothing else is left.
func openTitle(req OpenRequest, subject, body string) (string, string) {
	title := events.CleanTitle(req.Title)
	text := req.Body
	if title == "" {
		title = events.CleanTitle(subject)
		if text == "" {
			text = body
		}
	}
	if title == "" {
		title = events.CleanTitle(req.Branch)
	}
	return title, cleanBody(text)
}

// cleanBody makes a PR body fit to post: invisible characters out,
// newlines normalised, at most events.MaxBody bytes.
func cleanBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return Truncate(strings.TrimSpace(stripInvisible(s)), events.MaxBody)
}

// openKey names a request to open in the bucket and the mirror: the
// repository and a digest of the branch (branch names are case-sensitive
// and may hold what a key may not).
func openKey(repo ghref.Repo, branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return "open." + events.EncodeToken(repo.Owner) + "." + events.EncodeToken(repo.Name) + "." + hex.EncodeToString(sum[:8])
}

// Open carries out a request to open a pull request, holding the lease of
// its repository and branch: it takes the branch's commits into the
// mirror, pushes them (checked as a fix's are), opens the PR or finds it
// open, adds the labels, and publishes PRCreated. A repeat finds the PR
// and publishes the same event, which JetStream drops. It returns an
// error wrapping ErrOpenRefused (permanent) for a request it refuses, and
// other errors to be retried.
func (s *Service) Open(ctx context.Context, req OpenRequest) (ghref.PR, error) {
	log := s.d.Log.With("repo", req.Repo.String(), "branch", req.Branch)
	if err := req.check(); err != nil {
		return ghref.PR{}, err
	}
	key := openKey(req.Repo, req.Branch)
	lease, err := kvlease.Acquire(ctx, s.d.KV, leasePrefix+key, s.d.Holder, kvlease.Options{TTL: s.cfg.LeaseTTL, Note: "open " + req.Branch, Log: log})
	if err != nil {
		return ghref.PR{}, fmt.Errorf("open %s in %s: %w", req.Branch, req.Repo, err)
	}
	actx, release := lease.Hold(ctx)
	pr, err := s.open(actx, req, key, lease, log)
	cause := context.Cause(actx)
	release()
	if err != nil && cause != nil {
		return pr, fmt.Errorf("open %s in %s interrupted: %w", req.Branch, req.Repo, cause)
	}
	return pr, err
}

func (s *Service) open(ctx context.Context, req OpenRequest, key string, lease *kvlease.Lease, log *slog.Logger) (ghref.PR, error) {
	fence := func() error { return fenceLease(ctx, lease, s.cfg.LeaseTTL) }
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	repo, err := s.d.GitHub.GetRepo(actx, req.Repo)
	cancel()
	if errors.Is(err, github.ErrNotFound) {
		return ghref.PR{}, fmt.Errorf("%w: repository %s: %w", ErrOpenRefused, req.Repo, err)
	} else if err != nil {
		return ghref.PR{}, err
	}
	base := req.Base
	if base == "" {
		base = repo.GetDefaultBranch()
	}
	if base == "" {
		base = "main"
	}
	remote := repo.GetCloneURL()
	if err := checkRemote(remote); err != nil {
		return ghref.PR{}, fmt.Errorf("%w: %w", ErrOpenRefused, err)
	}

	tok, err := s.d.GitHub.GitToken(ctx)
	if err != nil {
		return ghref.PR{}, err
	}
	g := *s.git
	g.Env = SafeEnv(s.d.Environ(), tok.Reveal())
	var git openGit = &g
	dir := filepath.Join(s.worksDir, strings.ToLower(req.Repo.Owner), strings.ToLower(req.Repo.Name))
	wt := Worktree{
		Dir: req.Worktree, Remote: remote, Branch: req.Branch, Mirror: filepath.Join(dir, "mirror.git"),
		Out: filepath.Join(dir, key+".d"), RefPrefix: "refs/prloop/" + key,
	}
	if err := g.checkBranch(ctx, req.Branch); err != nil {
		return ghref.PR{}, fmt.Errorf("%w: %w", ErrOpenRefused, err)
	}
	defer func() {
		_ = git.DropRefs(context.WithoutCancel(ctx), wt)
		_ = os.RemoveAll(wt.Out)
	}()

	var f openFacts
	if f.Base, err = git.SyncBase(ctx, wt, base); err != nil {
		if errors.Is(err, ErrUnusable) {
			return ghref.PR{}, fmt.Errorf("%w: %w", ErrOpenRefused, err)
		}
		return ghref.PR{}, fmt.Errorf("fetch base %s of %s: %w", base, req.Repo, err)
	}
	if f.Remote, err = git.SyncBranch(ctx, wt); err != nil {
		return ghref.PR{}, fmt.Errorf("fetch branch %s of %s: %w", req.Branch, req.Repo, err)
	}
	if f.Result, err = git.ExportBranch(ctx, wt, f.Base); err != nil {
		// The worktree is the agent's: a branch it lacks, a bundle over the
		// bound or objects that fail fsck do not get better by waiting.
		return ghref.PR{}, fmt.Errorf("%w: take branch %s from %s: %w", ErrOpenRefused, req.Branch, req.Worktree, err)
	}
	if f.NewCommits, err = git.CountCommits(ctx, wt, f.Base, f.Result); err != nil {
		return ghref.PR{}, err
	}
	if f.Remote != "" {
		if f.RemoteBehind, err = git.IsAncestor(ctx, wt, f.Remote, f.Result); err != nil {
			return ghref.PR{}, err
		}
	}
	actx, cancel = context.WithTimeout(ctx, apiTimeout)
	existing, err := s.d.GitHub.FindOpenPull(actx, req.Repo, req.Branch, "")
	cancel()
	if err != nil {
		return ghref.PR{}, err
	}
	if existing != nil {
		f.Existing = &openPR{Number: existing.GetNumber(), Head: existing.GetHead().GetSHA(), Base: existing.GetBase().GetRef()}
	}
	actx, cancel = context.WithTimeout(ctx, apiTimeout)
	rules, err := s.d.GitHub.ListBranchRules(actx, req.Repo, req.Branch)
	cancel()
	if err != nil {
		return ghref.PR{}, err
	}
	f.Protected = protectedBy(rules)
	var claimRev uint64
	if f.Claim, claimRev, err = s.loadClaim(ctx, key); err != nil {
		return ghref.PR{}, err
	}

	plan := planOpen(req, base, f)
	if plan.kind == openRefuse {
		return ghref.PR{}, fmt.Errorf("%w: %s", ErrOpenRefused, plan.why)
	}
	// The claim is written before the first push: a process that dies
	// after the push finds, on the retry, a branch that is its own.
	// A claim of another worktree on a branch GitHub no longer has (its PR
	// merged and the branch deleted, or a push that never happened) passes
	// to this one: planOpen let it through only because the branch is new.
	claim := openClaim{Worktree: req.Worktree, At: s.d.Now().UTC()}
	if f.Claim != nil && f.Claim.Worktree == req.Worktree {
		claim = *f.Claim
	} else if claimRev, err = s.saveClaim(ctx, key, claim, claimRev); err != nil {
		return ghref.PR{}, err
	}
	if plan.push {
		start, err := git.MergeBase(ctx, wt, f.Base, f.Result)
		if err != nil {
			return ghref.PR{}, err
		}
		if err := git.Inspect(ctx, wt, start, f.Result, s.cfg.AgentMaxCommits, s.cfg.limits().ForbidWorkflows); err != nil {
			if errors.Is(err, ErrRefused) {
				return ghref.PR{}, fmt.Errorf("%w: %w", ErrOpenRefused, err)
			}
			return ghref.PR{}, err
		}
		if err := fence(); err != nil {
			return ghref.PR{}, err
		}
		if err := git.Push(ctx, wt, f.Result); err != nil {
			return ghref.PR{}, fmt.Errorf("push %s to %s: %w", req.Branch, req.Repo, err)
		}
		log.Info("pushed the branch", "head", ghref.EventSHA(f.Result), "commits", f.NewCommits)
	}

	pull := existing
	if plan.kind == openCreate {
		subject, body, err := git.CommitMessage(ctx, wt, f.Result)
		if err != nil {
			return ghref.PR{}, err
		}
		title, text := openTitle(req, subject, body)
		if err := fence(); err != nil {
			return ghref.PR{}, err
		}
		actx, cancel = context.WithTimeout(ctx, apiTimeout)
		pull, err = s.d.GitHub.CreatePull(actx, req.Repo, github.PullInput{Title: title, Head: req.Branch, Base: base, Body: text, Draft: req.Draft})
		cancel()
		if github.PullExists(err) {
			// Opened meanwhile (or by a create whose answer was lost).
			actx, cancel = context.WithTimeout(ctx, apiTimeout)
			pull, err = s.d.GitHub.FindOpenPull(actx, req.Repo, req.Branch, base)
			cancel()
			if err == nil && pull == nil {
				err = fmt.Errorf("GitHub says a pull request of %s exists but lists none open", req.Branch)
			}
			plan.kind = openAnnounce
		}
		if err != nil {
			if errors.Is(err, github.ErrValidation) {
				return ghref.PR{}, fmt.Errorf("%w: %w", ErrOpenRefused, err)
			}
			return ghref.PR{}, err
		}
	}
	pr := ghref.PR{Owner: req.Repo.Owner, Repo: req.Repo.Name, Number: pull.GetNumber(), URL: pull.GetHTMLURL()}
	if err := pr.Validate(); err != nil {
		return ghref.PR{}, fmt.Errorf("pull request of %s: %w", req.Branch, err)
	}
	if claim.PR != pr.Number {
		claim.PR = pr.Number
		if _, err := s.saveClaim(ctx, key, claim, claimRev); err != nil {
			return pr, err
		}
	}
	if len(req.Labels) > 0 {
		actx, cancel = context.WithTimeout(ctx, apiTimeout)
		_, err := s.d.GitHub.AddLabels(actx, pr, req.Labels...)
		cancel()
		if err != nil {
			return pr, err
		}
	}
	if err := fence(); err != nil {
		return pr, err
	}
	_, dup, err := s.emit.Emit(ctx, &events.Created{
		Base:       events.Base{PR: pr, HeadSHA: f.Result, Title: events.CleanTitle(pull.GetTitle())},
		BaseBranch: base, Branch: req.Branch, Worktree: req.Worktree, ContextPath: req.ContextPath,
		Actor: Name, Existing: plan.kind == openAnnounce,
	}, ghref.EventSHA(f.Result))
	if err != nil {
		return pr, err
	}
	log.Info("pull request open", "pr", pr.String(), "head", ghref.EventSHA(f.Result), "existing", plan.kind == openAnnounce, "duplicate", dup)
	return pr, nil
}

// handleOpen adapts a delivered PRCreateRequested to Open: a refusal is
// permanent (dead-lettered with its reason), anything else retried.
func (s *Service) handleOpen(ctx context.Context, d *events.CreateRequested) error {
	_, err := s.Open(ctx, openRequestOf(d))
	if errors.Is(err, ErrOpenRefused) {
		s.d.Log.Warn("request to open a pull request refused", "repo", d.PR.RepoRef().String(), "branch", d.Branch, "err", err)
		return events.Permanent(err)
	}
	return err
}
