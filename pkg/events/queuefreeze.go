package events

import (
	"strings"
	"time"
)

// A merge queue's freeze (docs/queue.md, Freeze): the operator asks with
// PRQueueFreezeRequested (`prloop queue freeze`/`unfreeze`), the merger
// records it and says so with PRQueueFrozen and PRQueueUnfrozen. They are
// about a repository's base branch, not a PR: their pr is the repository
// with number 0 (RepoNumber), as PRCreateRequested's, so their subjects
// are pr.<owner>.<repo>.0.<Type> and travel with the repository's events.
// RepoNumber is the PR number of the events about a repository rather
// than a PR (RepoLevel): 0, the number of PRCreateRequested.
const RepoNumber = CreateRequestedNumber

// RepoLevel reports whether events of type t are about a repository (its
// pr has number RepoNumber) rather than a PR. Consumers that fold events
// per PR skip them, or apply them to the PRs of that repository.
func RepoLevel(t Type) bool {
	switch t {
	case TypeCreateRequested, TypeQueueFreezeRequested, TypeQueueFrozen, TypeQueueUnfrozen:
		return true
	}
	return false
}

// AllBases is the BaseBranch of a freeze of every base branch of a
// repository: "" (no branch is named "").
const AllBases = ""

// QueueFreezeRequested is the operator's command: freeze the merge queue
// of BaseBranch (AllBases: every base of the repository) for Reason until
// Until (zero: until unfrozen), or, with Unfreeze, lift that freeze. Its
// id is ID(repo#0, PRQueueFreezeRequested, the base's token, "freeze" or
// "unfreeze", the request's time): each command is one request.
type QueueFreezeRequested struct {
	Base
	BaseBranch string    `json:"base,omitempty"`
	Unfreeze   bool      `json:"unfreeze,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Until      time.Time `json:"until,omitzero"`
	Actor      string    `json:"actor,omitempty"`
}

// QueueFrozen says the merger froze the merge queue of BaseBranch
// (AllBases: every base): nothing merges there until PRQueueUnfrozen,
// while approvals still queue and CI still runs. Until, when set, is when
// the freeze ends by itself. Its id is ID(repo#0, PRQueueFrozen, the
// base's token, the request's id).
type QueueFrozen struct {
	Base
	BaseBranch string    `json:"base,omitempty"`
	Reason     string    `json:"reason"`
	Until      time.Time `json:"until,omitzero"`
	Actor      string    `json:"actor,omitempty"`
}

// QueueUnfrozen says the freeze of BaseBranch (AllBases: of every base)
// is over: the operator lifted it (Actor) or its Until passed (Detail).
// Its id is ID(repo#0, PRQueueUnfrozen, the base's token, the id of the
// request that froze it, and of the one that lifted it or "expired").
type QueueUnfrozen struct {
	Base
	BaseBranch string `json:"base,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Actor      string `json:"actor,omitempty"`
}

// BaseToken names a freeze's base in ids and keys: the base as a subject
// token, or "=2a" ("*", which no branch name holds) for AllBases.
func BaseToken(base string) string {
	if base == AllBases {
		return EncodeToken("*")
	}
	return EncodeToken(strings.TrimSpace(base))
}
