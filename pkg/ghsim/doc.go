// Package ghsim is a GitHub REST API simulator: an http.Handler that
// answers the endpoints prloop uses with GitHub's JSON shapes, status codes
// and headers, backed by real bare git repositories. It is the test double
// for prloop's client and services, the engine of `prloop demo`, and the
// server of the 10,000-PR benchmark.
//
// # What it models
//
//   - Repositories: bare repositories under Options.Dir driven by the git
//     binary with a hermetic environment (no system or global config, dates
//     from the sim clock). clone_url is a file:// URL that git clone and git
//     push work against. Owner and repository names are case-insensitive.
//   - Pull requests (which are also issues, sharing the number): title,
//     body, draft, state, labels, reactions, issue comments, review
//     comments, reviews, requested reviewers. head.sha follows the branch:
//     every read re-reads the ref file (refs/heads/<branch>, or
//     packed-refs) with a stat cached by inode and mtime, never a git
//     process, so a direct `git push` is seen by the next request. A moved
//     head is a push and moves updated_at; a deleted head or base branch
//     closes the PR, as on GitHub.
//   - Mergeability, computed by git and cached per (base, head) pair, and
//     mergeable_state by the base branch's rules (its ruleset and classic
//     protection together): "unknown" (mergeable null) for
//     SetMergeabilityDelay after the PR opens or its head or base moves,
//     "dirty" (merge-tree conflicts), "draft", "blocked" (a required check
//     missing, pending or failed on head), "behind" (base has commits not
//     in head, and only when the base requires branches to be up to date:
//     a strict rule), "unstable" (another check failed), else "clean";
//     merged PRs report mergeable null, "unknown".
//   - Comparisons (GET /compare/{base}...{head}) from git: ahead_by,
//     behind_by, status, base and merge-base commits, the commits.
//   - Merges are real commits on the base branch: "merge" (the default, as
//     GitHub's) makes a two-parent merge commit, "squash" one commit with
//     the PR's tree on the base tip (authored by the PR author), "rebase"
//     replays the head's commits. update-branch really merges base into head.
//     Ref updates are compare-and-swap, so a concurrent push yields 409/422
//     rather than a lost commit.
//   - Commit statuses (combined state: pending when there are none) and
//     check runs, by sha or branch name; check runs listed with check_name,
//     status and filter (latest, the default: each name's newest run; all),
//     created (a new run every time, 422 without name or head_sha) and
//     updated (a conclusion completes the run) through the API, as a
//     GitHub App writes them. That only an App may write them is not
//     enforced: any token may.
//   - GitHub Actions (actions.go, RunWorkflow): workflow runs whose jobs
//     are check runs of the job's id, with output and annotations (listed
//     paginated); a job and its steps; its log through a 302 to a signed
//     URL on another port (the log store refuses an Authorization header
//     and records every request, LogRequests); re-running a run's failed
//     jobs, a new attempt with the next of JobInput.Reruns. A run
//     StartWorkflow starts is a runner's: each attempt of a job, a re-run's
//     too, is in progress until FinishJob ends it (WorkflowJobs lists the
//     latest attempts).
//   - Branch rules (GET /rules/branches/{branch}, readable by anyone): a
//     required_status_checks rule per branch with its strict policy, set
//     with SetRuleset (SetRequiredChecks: not strict); classic branch
//     protection's required status checks (GET /branches/{b}/protection,
//     404 for anyone but an admin), set with SetBranchProtection. Both
//     decide mergeable_state; neither refuses a merge, as for a token
//     that may bypass them.
//   - Permissions: admin, maintain, write, triage, read, none per
//     collaborator; the owner is admin; every repository is public, so
//     anyone may read, comment and react. Writes that need more answer 403
//     "Must have admin rights to Repository." (or "Resource not accessible
//     by integration" for bots) with X-RateLimit-Remaining > 0, so a client
//     cannot mistake them for rate limiting.
//   - Auth by "token X" or "Bearer X" (AddToken); unknown tokens get 401
//     "Bad credentials"; anonymous requests may read (60 an hour) and get
//     401 "Requires authentication" on writes.
//   - Rate limits per token on the sim clock: X-RateLimit-{Limit,Remaining,
//     Reset,Used,Resource} on every response, 403 "API rate limit exceeded
//     for user ID N." when exhausted, hourly windows; 304s and GET
//     /rate_limit are not counted (GitHub's documented rules). With
//     Options.SecondaryPerMinute, a sliding-minute secondary limit answers
//     403 with Retry-After.
//   - Conditional requests: a strong ETag on every GET 200, a hash of the
//     body and of the caller (GitHub's ETags are per token);
//     If-None-Match (and If-Modified-Since where Last-Modified is sent)
//     answers 304 with an empty body and the headers the 200 would carry,
//     Link included: the ETag covers the body only, so a page whose items
//     did not change answers 304 even when the list grew a page after it,
//     and only the 304's Link tells.
//   - Pagination: page/per_page (default 30, max 100, or
//     Options.MaxPerPage / SetMaxPerPage, e.g. 3 in tests, so that lists
//     cross page boundaries) and Link headers with first/prev/next/last
//     absolute URLs on every list.
//   - Errors in GitHub's shape {message, documentation_url, status,
//     errors?}: 404 for unknown routes, 400 "Problems parsing JSON", 422
//     "Validation Failed" with errors[] (plain strings on the reviews
//     endpoint, as its schema says).
//   - Fault injection (InjectFault): 500, 502 (HTML body), 429, secondary
//     and primary limit 403s, hangs, truncated JSON and permission 403s for
//     requests matching a method and path regexp.
//
// Bodies are encoded from the package's own wire structs rather than
// go-github's: go-github omits empty fields, but GitHub's schemas require
// many fields to be present as null (milestone, merged_at, body...). The
// field names are go-github's, and the tests check every response against
// GitHub's OpenAPI description and decode it with go-github.
//
// For speed the list forms of pull requests and issues are cached as JSON
// per PR and invalidated by version counters, so listing thousands of PRs
// costs a stat per branch and a copy per item.
//
// # Reactions and updated_at
//
// prloop assumes GitHub does not move an issue's or PR's updated_at when
// someone reacts to it, and the sim behaves so: adding or removing a
// reaction changes the `reactions` rollup in the issue list (and so that
// list's ETag) but not updated_at. GitHub does not document this either
// way, and the exchanges recorded in @octokit/fixtures contain no reaction
// writes. The available evidence agrees with the assumption: stale bots
// that key on updated_at (actions/stale, probot/stale) ignore reactions, and
// keeping reacted-to issues alive needed a separate option that fetches
// reactions explicitly (actions/stale issue #861 and pull request #1086).
// Reactions are invisible to webhooks as well, so prloop polls the issue
// list and compares rollups. Comments, reviews, review comments, pushes,
// label changes, title/body/state/base edits, requested reviewers and
// merges do move updated_at; commit statuses and check runs do not.
//
// # What it does not model
//
// Forks (head and base are always the same repository, but DeleteHeadRepo
// answers head.repo null as for a deleted fork), plain issues
// without a pull request, rules other than required status checks (no
// required reviews), merges refused by rules, auto-merge,
// GraphQL, webhooks, search, editing or deleting comments, dismissing
// reviews, teams, organisations (owners are users), check suites beyond an
// id, the search/graphql rate-limit buckets beyond their presence in
// /rate_limit, and per-user (rather than per-token) rate limits. Labels are
// created on first use with colour ededed; a user without triage permission
// gets a 403 where GitHub would silently drop the labels.
package ghsim
