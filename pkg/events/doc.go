// Package events is the contract between prloop's services: the CloudEvents
// they exchange over NATS JetStream, the subjects those events travel on, and
// the helpers that publish and consume them.
//
// Every event is a CloudEvents 1.0 event in structured mode: the NATS message
// carries the header "Content-Type: application/cloudevents+json" and its body
// is the whole event as JSON, so `nats sub 'pr.>'` prints self-describing
// events. The event's id equals the message's Nats-Msg-Id and is derived from
// what the event is about, so a retried publish is dropped by JetStream's
// duplicate window instead of producing a second event.
//
// # Event ids
//
// An id names what the event is about, never when it was published:
// ID(pr, type, parts...) with the parts each call site passes to Emit. A
// redelivery, or a retry after a crash, of the step that publishes an
// event must rebuild the same id, so that JetStream drops the repeat within
// its duplicate window (two hours); an event that is news must get an id
// no earlier event had, or JetStream drops the news.
//
// Asking for a human is news again once a human answered: removing the
// escalation label resumes the loop, and the same failure on the same head
// minutes later must label, comment and notify again. So the ids of the
// events about a failure carry a part that changes exactly when a new
// request is legitimate, and stays the same across redeliveries and
// retries of one request:
//
//   - ReviewTimeout (poller): the PR's escalation epoch (EpochPart).
//   - PREscalationRequested for a failed review workflow (poller): the head
//     and the epoch.
//   - PREscalationRequested (feedback): the id of the PRFeedbackReceived the
//     attempt answers; the poller publishes the change request anew, with a
//     new id, when the loop resumes.
//   - PREscalationRequested and PRMergeFailed for a failure (merger): the
//     queue entry's approval sequence; a resume publishes the approval anew
//     and so queues a new entry.
//   - PREscalated (escalator): the epoch the escalation belongs to, also in
//     its data (epoch).
//
// The escalation epoch is the number of escalations a human resolved by
// removing the label. The poller owns it: it bumps it when it sees the
// label gone after it was applied (see the poller's resumeAfterEscalation)
// and says so with PREscalationResolved. Every event that can lead to an
// escalation carries the epoch it belongs to in its data (epoch), and each
// service passes it on from the event it acts on, so no service reads
// another's records to learn it. The escalator does an escalation once per
// PR, reason and epoch, ignores a request of an epoch already resolved,
// and its comment marker carries the epoch too.
//
// # Subjects
//
// Events travel on exactly five tokens,
//
//	pr.<owner>.<repo>.<number>.<Type>
//
// e.g. pr.acme.widgets.42.PRReviewApproved, so that 'pr.*.*.*.PRMerged'
// filters by kind and 'pr.acme.widgets.>' selects one repository. Owner and
// repository are folded to lower case (GitHub treats them case-insensitively)
// and every byte outside [a-z0-9_-] is escaped as '=' and two hex digits, so
// "socket.io" becomes "socket=2eio". The mapping is one-to-one and
// reversible (see EncodeToken and DecodeToken); '=' is valid both in NATS
// subjects and in KV keys.
//
// # Event types
//
// The type is the CloudEvent "type" attribute and the last subject token.
// The types are one table, the registry (registry.go): each row is a
// type, its data struct, who publishes it and what it means, and the
// table below, docs/events.md (with every data field), the Type
// constants and decoding are generated or derived from it.
// "Published by" names the NATS user (deploy/nats/nats.conf) allowed to
// publish the type; PublishedBy holds the same column as data, and the
// deployments' permissions and the services' Emitters are checked against it.
// cli is the operator's `prloop watch`, `prloop open` and `prloop queue`
// (or an orchestrator with the cli's credentials).
//
// Data field names are fixed so that consumers outside prloop can rely on
// them: pr (owner, repo, number, url), head_sha, status, fix_cycle, reason,
// merge_sha, actor, detail. The poller's review statuses (PRReviewPending,
// PRReviewInProgress, PRFeedbackReceived, PRReviewApproved) also carry
// title: the PR's title when the poller read it, cleaned by CleanTitle but
// otherwise the author's text, for display only (escape it). With the
// quorum protocol, PRReviewPending and PRReviewInProgress carry
// missing_reviewers, and PRReviewInProgress quorum_responded (it is
// published again each time another bot responds, so the status line can
// say who is still missing); PRReviewInProgress, PRFeedbackReceived and
// PRReviewApproved carry ignored_findings: the quorum bots' findings the
// classifier set aside (author, location, url, reason; see
// review.Classify).
//
//	| type                       | published by             | means |
//	|----------------------------|--------------------------|---|
//	| PRCreateRequested          | cli                      | command: push this branch, open its PR, then watch it |
//	| PRCreated                  | feedback                 | prloop pushed the branch and opened (or found) its PR |
//	| PRWatchRequested           | cli                      | command: start watching this PR |
//	| PRReviewPending            | poller                   | watched, no review signal on the current head yet |
//	| PRReviewInProgress         | poller                   | a reviewer signalled "in review" (👀), or part of the quorum responded |
//	| PRFeedbackReceived         | poller                   | changes requested on the current head |
//	| PRFeedbackAddressed        | feedback                 | the agent's fix is pushed; head_sha is the new head |
//	| PRFeedbackSkipped          | feedback                 | the change request on head_sha needs no fix any more |
//	| PRReviewApproved           | poller                   | approved on head_sha |
//	| ReviewTimeout              | poller                   | no approval within the review timeout |
//	| PRMergeQueued              | merger                   | entered the merge queue of its base branch |
//	| PRMergeWaiting             | merger                   | first in its queue, waits for these checks on head_sha |
//	| PRMerged                   | merger                   | merged by prloop |
//	| PRMergeFailed              | merger                   | not merged: not queued, or left the queue without a merge |
//	| PRClosed                   | poller                   | closed or merged outside prloop; watching stops |
//	| PREscalationRequested      | poller, feedback, merger | a human is needed |
//	| PREscalated                | escalator                | the human was called (label, comment, webhook) |
//	| PREscalationResolved       | poller                   | a human removed the escalation label; the loop resumes |
//	| PRBranchUpdated            | merger                   | prloop brought the approved head up to date with its base |
//	| PRMergeCandidate           | merger                   | speculative queue (PRLOOP_QUEUE_MODE=speculative): the candidate the PR rides in, built or gone |
//	| PRConflictResolveRequested | merger                   | command (PRLOOP_RESOLVE_CONFLICTS): the agent resolves head_sha's conflict with the base |
//	| PRChecksFailed             | poller                   | gating checks failed on head_sha (not prloop's own status) |
//	| PRAgentWaiting             | feedback                 | the agent's next run waits (the day's budget), or starts |
//	| PRQueueFreezeRequested     | cli                      | command (`prloop queue freeze`/`unfreeze`): freeze or unfreeze a base's merge queue; about the repository (#0) |
//	| PRQueueFrozen              | merger                   | nothing merges on the base until it is unfrozen (or until `until`); approvals still queue, CI still runs |
//	| PRQueueUnfrozen            | merger                   | the base's freeze is over: lifted, or its `until` passed |
//	| PRCommandReceived          | poller                   | command: a "/prloop <command>" comment by someone who may approve, taken once per comment |
//
// # Opening a pull request
//
// PRCreateRequested is about a pull request that does not exist yet, so
// its pr is the repository with number 0 (CreateRequestedNumber) and its
// subject pr.<owner>.<repo>.0.PRCreateRequested; no other type may use
// number 0 (CheckRef), and consumers that fold events per PR skip it.
// Its id is ID(repo#0, PRCreateRequested, branch, EventSHA(head)): the
// same branch at the same head is one request, new commits a new one. The
// feedback service answers it with PRCreated about the real PR, whose id
// carries the head it pushed (ID(pr, PRCreated, EventSHA(head))), so a
// repeated request for a PR already open publishes nothing new. The
// poller consumes PRCreated as it consumes PRWatchRequested.
//
// # Queue freezes
//
// PRQueueFreezeRequested (`prloop queue freeze` and `unfreeze`),
// PRQueueFrozen and PRQueueUnfrozen are about a repository's base branch
// (base; empty: every base of the repository), not a PR: like
// PRCreateRequested their pr is the repository with number 0 and their
// subject pr.<owner>.<repo>.0.<Type> (RepoLevel). The merger records the
// freeze (its PRLOOP_MERGE_QUEUE bucket, so it outlives restarts) and
// publishes PRQueueFrozen, id ID(repo#0, PRQueueFrozen, BaseToken(base),
// the request's id); PRQueueUnfrozen when an operator lifts it or its
// until passes, id ID(repo#0, PRQueueUnfrozen, BaseToken(base), the
// freezing request's id, the lifting request's id or "expired"). The
// views apply them to every queued PR of that base ("queue frozen:
// <reason>").
//
// # Order
//
// A PR's events read in causal order on the stream: an event never comes
// before the event it follows from. In particular PRFeedbackAddressed for a
// fix precedes every event about the fix's head, because the poller holds a
// new head back while the change request on the old one is being addressed,
// until the feedback service ends it with PRFeedbackAddressed,
// PRFeedbackSkipped or PREscalationRequested. A conflict resolution
// (PRConflictResolveRequested, which the poller consumes too) holds the
// PR's next head back the same way. And nothing about a PR follows its
// PRMerged.
//
// # Conflicts
//
// With PRLOOP_RESOLVE_CONFLICTS the merger answers a queued PR's conflict
// with its base by PRMergeFailed (merge_conflict) and the command
// PRConflictResolveRequested, ids ID(pr, type, head, base tip, approval
// sequence), instead of PREscalationRequested. The feedback service runs
// it as a fix cycle (fix_cycle is the approval's, from PRReviewApproved)
// and answers PRFeedbackAddressed (previous_head_sha the conflicting
// head), PRFeedbackSkipped, or PREscalationRequested with reason
// merge_conflict (or max_fix_cycles, agent_budget_exhausted), whose id
// carries the command's id.
//
// # Agent waits
//
// When the agents' spend today (UTC) on all PRs reaches
// PRLOOP_AGENT_DAILY_COST_USD, the feedback service holds each PR's next
// agent run back until the next UTC day and says so with PRAgentWaiting,
// state waiting, with the figures and resume_at; when the run starts, the
// same type with state resumed. The id is ID(pr, PRAgentWaiting,
// EventSHA(head), fix cycle, state, resume_at's date, the change
// request's id): one of each per PR per wait. Only the views read it (the status line says "waiting: the
// agents' daily budget ($X of $Y) is spent; resumes at 00:00 UTC").
//
// # Commands on the PR
//
// A comment whose first line is "/prloop <command>" by someone who may
// approve the PR is a command (docs/commands.md). The poller takes each
// once, recording its comment id in the PR's record with the event in the
// outbox, and publishes PRCommandReceived, id ID(pr, PRCommandReceived,
// comment id). The owner of the fact acts: the escalator on retry, the
// merger on dequeue, queue and stop, the poller itself on stop, priority
// and explain; fix is the poller's own PRFeedbackReceived, which the
// feedback service runs under its attempt lease like any other.
//
// # Failing checks
//
// The poller reads the checks of a watched PR's head and publishes
// PRChecksFailed when gating checks (the base's required ones, or all but
// prloop's own status context when none are known; PRLOOP_FIX_CHECKS)
// completed with failure, timed_out, cancelled, action_required or
// startup_failure, id ID(pr, PRChecksFailed, EventSHA(head), round, the
// failing checks' fingerprint). Round 1 is a head's first failure; a
// failure that comes back after a re-run is round 2. It holds the next
// head back like a change request, until the feedback service answers
// with PRFeedbackAddressed (the agent's fix), PRFeedbackSkipped (it
// re-ran the failed GitHub Actions jobs first: PRLOOP_RERUN_FAILED_CHECKS,
// or the head moved) or PREscalationRequested with reason checks_failed.
// A PR approved or queued for merging is left to the merger.
//
// A PR the speculative queue removes because its candidate failed while
// its own head is green leaves with PRMergeFailed, reason
// candidate_failed, carrying the candidate's failing checks, the
// candidate commit and the base tip, and no escalation. The feedback
// service takes it like a PRChecksFailed without a re-run: prloop merges
// the base into the branch, the agent fixes on top, and the poller holds
// the next head back until the feedback service answers.
//
// Reasons are fixed codes: review_timeout, max_fix_cycles, feedback_failed,
// agent_budget_exhausted (the PR's agent wall time, PRLOOP_AGENT_BUDGET, is spent),
// review_workflow_failed, checks_failed, merge_conflict, not_mergeable,
// and, on PRMergeFailed only (they need no human, so nothing escalates):
// candidate_failed (see Failing checks), dequeued (see Commands on the PR),
// not_approved (a PRReviewApproved whose approval GitHub does not show; the
// PR is not queued), approval_withdrawn (the approval of a queued PR no
// longer stands; a fresh PRReviewApproved queues it again),
// stale_approval (the head moved to a commit nobody approved and prloop did
// not make, or the PR was retargeted to another base: an approval is for a
// head on a base) and closed (closed while queued). Severities are info, warning
// and blocking.
//
// Every exit from a merge queue other than a merge publishes PRMergeFailed.
package events
