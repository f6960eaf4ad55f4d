package ghref

// Commit SHA forms. Event ids carry the head a fact is about in the form
// EventSHA gives, and JetStream's duplicate window drops a publish whose id
// it saw, so that form must never change: a changed length would make
// every retried or re-derived event after an upgrade look new.
const (
	eventSHALen = 12
	shortSHALen = 7
)

// EventSHA is the form of a commit SHA that goes into event ids: its first
// 12 characters (the whole string when shorter).
func EventSHA(sha string) string { return sha[:min(eventSHALen, len(sha))] }

// ShortSHA is the form of a commit SHA shown to people (status lines, the
// web page, the CLI): its first 7 characters, as git abbreviates.
func ShortSHA(sha string) string { return sha[:min(shortSHALen, len(sha))] }
