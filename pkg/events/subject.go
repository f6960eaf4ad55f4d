package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
)

// Subject prefixes. Events live under SubjectPrefix; poison messages under
// DLQPrefix, outside pr.> so that `nats sub 'pr.>'` shows only events.
const (
	SubjectPrefix = "pr"
	DLQPrefix     = "prloop.dlq"
)

// ErrBadSubject is wrapped by ParseSubject's errors.
var ErrBadSubject = errors.New("not a prloop event subject")

const hexDigits = "0123456789abcdef"

// EncodeToken maps an owner or repository name to a NATS subject token (also
// valid as a KV key token): lower case, with every byte outside [a-z0-9_-]
// written as '=' and two hex digits. Distinct case-folded names give distinct
// tokens, and DecodeToken reverses the mapping.
func EncodeToken(name string) string {
	name = strings.ToLower(name)
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// DecodeToken reverses EncodeToken. It rejects anything EncodeToken would not
// produce, so that two tokens never decode to the same name.
func DecodeToken(tok string) (string, error) {
	if tok == "" {
		return "", fmt.Errorf("%w: empty token", ErrBadSubject)
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_':
			b.WriteByte(c)
		case c == '=' && i+2 < len(tok):
			v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
			if err != nil || strings.ToLower(tok[i+1:i+3]) != tok[i+1:i+3] {
				return "", fmt.Errorf("%w: bad escape %q in token %q", ErrBadSubject, tok[i:i+3], tok)
			}
			d := byte(v)
			if (d >= 'a' && d <= 'z') || (d >= '0' && d <= '9') || d == '-' || d == '_' || (d >= 'A' && d <= 'Z') {
				return "", fmt.Errorf("%w: needless escape %q in token %q", ErrBadSubject, tok[i:i+3], tok)
			}
			b.WriteByte(d)
			i += 2
		default:
			return "", fmt.Errorf("%w: byte %q at %d in token %q", ErrBadSubject, c, i, tok)
		}
	}
	// Escapes can spell what EncodeToken never writes: a name that is not
	// case-folded ("=c3=80", À) or not UTF-8 ("=ff"), which ToLower would
	// have turned into something else. Accepting them would give one
	// name two subjects.
	name := b.String()
	if strings.ToLower(name) != name {
		return "", fmt.Errorf("%w: token %q is not a case-folded UTF-8 name", ErrBadSubject, tok)
	}
	return name, nil
}

// Subject is the subject an event of type t about pr is published on.
func Subject(pr ghref.PR, t Type) string {
	return SubjectPrefix + "." + EncodeToken(pr.Owner) + "." + EncodeToken(pr.Repo) + "." + strconv.Itoa(pr.Number) + "." + string(t)
}

// FilterSubject is the subject filter that selects every event of type t.
func FilterSubject(t Type) string { return SubjectPrefix + ".*.*.*." + string(t) }

// RepoFilter is the subject filter that selects every event of one repository.
func RepoFilter(r ghref.Repo) string {
	return SubjectPrefix + "." + EncodeToken(r.Owner) + "." + EncodeToken(r.Name) + ".>"
}

// PRFilter is the subject filter that selects every event of one PR.
func PRFilter(pr ghref.PR) string {
	return SubjectPrefix + "." + EncodeToken(pr.Owner) + "." + EncodeToken(pr.Repo) + "." + strconv.Itoa(pr.Number) + ".*"
}

// ParseSubject splits an event subject into its PR (names case-folded) and
// type. The number is positive, and 0 for PRCreateRequested and the other
// RepoLevel types (see CheckRef).
func ParseSubject(subject string) (ghref.PR, Type, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[0] != SubjectPrefix {
		return ghref.PR{}, "", fmt.Errorf("%w: %q, want pr.<owner>.<repo>.<number>.<Type>", ErrBadSubject, subject)
	}
	owner, err := DecodeToken(parts[1])
	if err != nil {
		return ghref.PR{}, "", err
	}
	repo, err := DecodeToken(parts[2])
	if err != nil {
		return ghref.PR{}, "", err
	}
	n, err := strconv.Atoi(parts[3])
	want := n > 0
	if RepoLevel(Type(parts[4])) {
		want = n == RepoNumber
	}
	if err != nil || !want || strconv.Itoa(n) != parts[3] {
		return ghref.PR{}, "", fmt.Errorf("%w: PR number %q in %q", ErrBadSubject, parts[3], subject)
	}
	return ghref.PR{Owner: owner, Repo: repo, Number: n}, Type(parts[4]), nil
}

// PRKey names a PR in a KV key: pr.<owner>.<repo>.<number> with the tokens
// encoded as in event subjects. Every service's records of a PR use it
// (after a prefix of their own), so that one PR has one spelling.
func PRKey(pr ghref.PR) string {
	return "pr." + EncodeToken(pr.Owner) + "." + EncodeToken(pr.Repo) + "." + strconv.Itoa(pr.Number)
}

// ParsePRKey is the inverse of PRKey.
func ParsePRKey(key string) (ghref.PR, error) {
	parts := strings.Split(key, ".")
	if len(parts) != 4 || parts[0] != "pr" {
		return ghref.PR{}, fmt.Errorf("PR key %q: want pr.<owner>.<repo>.<number>", key)
	}
	pr, _, err := ParseSubject(strings.Join(append(parts, "x"), "."))
	if err != nil {
		return ghref.PR{}, fmt.Errorf("PR key %q: %w", key, err)
	}
	return pr, nil
}
