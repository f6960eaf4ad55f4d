package events

// PRCommandReceived says the poller took a "/prloop <command>" comment
// from someone who may approve the PR (docs/commands.md): once per comment,
// whatever restarts and replicas. It is a trigger, never an authority: the
// service that owns the fact the command changes acts on it, and checks
// again what is cheap to check (the merger an approval before it queues).

// The commands a PRCommandReceived carries (review.Commands).
const (
	CommandRetry    = "retry"
	CommandDequeue  = "dequeue"
	CommandQueue    = "queue"
	CommandPriority = "priority"
	CommandFix      = "fix"
	CommandStop     = "stop"
	CommandExplain  = "explain"
)

// CommandReceived is a command taken from a comment on the PR. Its id is
// ID(pr, PRCommandReceived, comment id): one per comment, ever.
type CommandReceived struct {
	Base
	Command   string   `json:"command"`
	Args      []string `json:"args,omitempty"`
	CommentID int64    `json:"comment_id"`
	// Author is the comment's author, whom the poller found may approve.
	Author string `json:"author"`
	// Epoch is the PR's escalation epoch when the command was taken: a
	// retry clears the escalation of that epoch only.
	Epoch int `json:"epoch,omitempty"`
}
