package review

import (
	"strings"
	"time"
	"unicode/utf8"
)

// CommandPrefix opens a command to prloop on a PR's conversation: a
// comment whose first line is "/prloop <command>" (docs/commands.md).
const CommandPrefix = "/prloop"

// MaxCommandLine is the longest first line read as a command, in bytes: a
// longer one is still a command line (never review feedback) but is
// refused as malformed, so that nobody's essay reaches an event.
const MaxCommandLine = 200

// The commands prloop takes on a PR (docs/commands.md).
const (
	CmdRetry    = "retry"
	CmdDequeue  = "dequeue"
	CmdQueue    = "queue"
	CmdPriority = "priority"
	CmdFix      = "fix"
	CmdStop     = "stop"
	CmdExplain  = "explain"
)

// Commands are the known command names, in the order the help lists them.
var Commands = []string{CmdRetry, CmdDequeue, CmdQueue, CmdPriority, CmdFix, CmdStop, CmdExplain}

// Command is a parsed "/prloop" line.
type Command struct {
	// Name is the command's word, lower case ("" when the line has none).
	Name string
	// Args are the words after it.
	Args []string
	// Malformed says why the line cannot be a command though it opens
	// with CommandPrefix (too long, not UTF-8, control characters); Name
	// and Args are empty then.
	Malformed string
}

// Known reports whether c names a command prloop takes.
func (c Command) Known() bool {
	for _, n := range Commands {
		if c.Name == n {
			return true
		}
	}
	return false
}

// ParseCommand reads body's first line as a command. ok says the comment
// is a command line at all: it starts with CommandPrefix, after at most
// three spaces (four make a Markdown code block), followed by a space, a
// tab or the line's end. A quote ("> /prloop"), a code fence, inline code,
// a leading blank line and lookalike characters (a full-width solidus, a
// Cyrillic "о", a zero-width space) are not commands: only what GitHub
// renders as the plain text "/prloop" at the start of the comment is.
// A command line is never review feedback, known or not (IsCommand).
func ParseCommand(body string) (c Command, ok bool) {
	line, _, _ := strings.Cut(body, "\n")
	line = strings.TrimSuffix(line, "\r")
	indent := len(line) - len(strings.TrimLeft(line, " "))
	if indent > 3 {
		return Command{}, false
	}
	rest, found := strings.CutPrefix(line[indent:], CommandPrefix)
	if !found || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return Command{}, false
	}
	switch {
	case len(line) > MaxCommandLine:
		return Command{Malformed: "the command line is too long"}, true
	case !utf8.ValidString(rest):
		return Command{Malformed: "the command line is not UTF-8"}, true
	case strings.ContainsFunc(rest, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return Command{Malformed: "the command line holds control characters"}, true
	}
	words := strings.Fields(rest)
	if len(words) == 0 {
		return Command{}, true
	}
	return Command{Name: strings.ToLower(words[0]), Args: words[1:]}, true
}

// IsCommand reports whether body is a command line (ParseCommand): such a
// comment talks to prloop and is never review feedback, whoever wrote it.
func IsCommand(body string) bool {
	_, ok := ParseCommand(body)
	return ok
}

// MayCommand reports whether u may give commands on the PR at head: the
// same rule as whose review signals count (a human, not the PR's author
// nor prloop itself, whom authorized accepts). One rule for both, so that
// whoever may approve a PR may steer it, and nobody else.
func MayCommand(u User, head Head, pol Policy, authorized Authorizer) bool {
	return eligible(u, head, pol) && authorized != nil && authorized(u.Login)
}

// eligible reports whether u could count as a reviewer at all, before
// asking who is authorized: a human other than the PR's author and prloop.
func eligible(u User, head Head, pol Policy) bool {
	return u.Login != "" && !u.IsBot() && !strings.EqualFold(u.Login, head.Author) && !strings.EqualFold(u.Login, pol.Self)
}

// FixItems is what "/prloop fix" hands the agent: the verdict's change
// requests and the findings it set aside, and the fresh conversation
// comments of whoever may review that the protocols did not count (a
// reviews-only setup, a 👀 hold), without commands, prloop's own comments
// and what a fix already addressed. The poller asks with it and the
// feedback service gathers with it: one rule.
func FixItems(v Verdict, sig Signals, head Head, pol Policy, authorized Authorizer) []Item {
	items := append(append([]Item(nil), v.Feedback...), v.Ignored...)
	have := map[string]bool{}
	for _, it := range items {
		have[it.Key()] = true
	}
	for _, c := range sig.Comments {
		key := ItemKey(KindComment, c.ID)
		if have[key] || head.Addressed[key] || IsOwn(c.Body) || IsCommand(c.Body) ||
			c.CreatedAt.Before(head.Anchor.Truncate(time.Second)) || !MayCommand(c.User, head, pol, authorized) {
			continue
		}
		have[key] = true
		items = append(items, Item{Kind: KindComment, ID: c.ID, Author: c.User.Login, Body: c.Body, CreatedAt: c.CreatedAt, URL: c.URL})
	}
	return Dedupe(items)
}

// FixCommanded reports whether comment id among sig's comments is a
// "/prloop fix" by someone who may give commands on the PR at head: what
// the feedback service checks on GitHub before it takes a change request
// the command made (the event is a trigger, never an authority).
func FixCommanded(sig Signals, id int64, head Head, pol Policy, authorized Authorizer) bool {
	for _, c := range sig.Comments {
		if c.ID != id {
			continue
		}
		cmd, ok := ParseCommand(c.Body)
		return ok && cmd.Name == CmdFix && MayCommand(c.User, head, pol, authorized)
	}
	return false
}
