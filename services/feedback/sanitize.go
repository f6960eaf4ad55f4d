package feedback

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Review comments are written by people and bots prloop does not control,
// and they end up in an agent's prompt. Sanitize removes what a reader of
// the rendered comment on GitHub would not see, so that nothing reaches the
// agent that the reviewer's audience could not check: HTML comments,
// invisible and bidirectional control characters, image alt text and link
// titles. Fence then quotes what is left so it cannot pose as instructions.

var (
	// htmlComment matches an HTML comment, or an unterminated one up to the
	// end (GitHub hides that too).
	htmlComment = regexp.MustCompile(`(?s)<!--.*?(?:-->|$)`)
	// mdImage matches inline and reference images: ![alt](url "title"), ![alt][ref].
	mdImage = regexp.MustCompile(`!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])`)
	// htmlImage matches <img …> tags, whose alt and title are hidden.
	htmlImage = regexp.MustCompile(`(?i)<img\b[^>]*>`)
	// linkTitle matches an inline link with a title: [text](url "title").
	linkTitle = regexp.MustCompile(`\[([^\]]*)\]\(\s*(<[^>]*>|[^\s)]+)\s+(?:"[^"]*"|'[^']*'|\([^)]*\))\s*\)`)
	// refTitle matches a link reference definition with a title.
	refTitle = regexp.MustCompile(`(?m)^( {0,3}\[[^\]]+\]:[ \t]*\S+)[ \t]+(?:"[^"]*"|'[^']*'|\([^)]*\))[ \t]*$`)
	// blankRuns collapses what removals leave behind.
	blankRuns = regexp.MustCompile(`\n{3,}`)
)

// invisible reports runes that render as nothing (or change the order in
// which the rest renders): format characters (zero-width spaces and
// joiners, bidi embeddings, overrides and isolates, the BOM, soft hyphens,
// Unicode tags), control characters other than newline and tab, private-use
// characters, variation selectors, and the Hangul fillers.
func invisible(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r):
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF: // variation selectors
		return true
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x180E: // grapheme joiner, fillers
		return true
	case r == utf8.RuneError:
		return true
	}
	return false
}

// stripInvisible drops invisible runes (and invalid UTF-8) and turns
// Unicode line and paragraph separators into newlines.
func stripInvisible(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\u2028' || r == '\u2029':
			b.WriteByte('\n')
		case invisible(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Sanitize returns the visible text of a review comment's markdown. Invisible
// characters go first, so they cannot split "<!--" and smuggle a hidden
// comment past the next step.
func Sanitize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = stripInvisible(s)
	// Removing a comment can join what surrounded it into a new opener
	// ("<!<!---->--"), so remove until none is left; each pass shortens s.
	for strings.Contains(s, "<!--") {
		s = htmlComment.ReplaceAllString(s, "")
	}
	// "![]![x](y)" becomes "![][image]", a new image; each pass removes a '!'.
	for mdImage.MatchString(s) {
		s = mdImage.ReplaceAllString(s, "[image]")
	}
	s = htmlImage.ReplaceAllString(s, "[image]")
	// Removing a title can leave a new titled link around it
	// ("[]([ \"\")](0 '')" becomes "[]([)](0 '')"); each pass shortens s.
	for linkTitle.MatchString(s) {
		s = linkTitle.ReplaceAllString(s, "[$1]($2)")
	}
	s = refTitle.ReplaceAllString(s, "$1")
	s = blankRuns.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s)
}

// SanitizeLine is Sanitize for one-line fields such as a file path: it also
// folds every kind of line break and run of spaces into one space.
func SanitizeLine(s string) string {
	return strings.Join(strings.Fields(stripInvisible(s)), " ")
}

// truncatedNote ends a truncated text.
const truncatedNote = "\n[… truncated]"

// Truncate cuts s to at most n bytes on a rune boundary, ending with a note
// that says so when there is room for it.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := truncatedNote
	if n <= len(note) {
		note = ""
	}
	cut := max(0, n-len(note))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// Fence quotes text as a fenced code block that the text cannot close: the
// fence is one backtick longer than the longest backtick run inside (and at
// least three), and a fence closes only on a run at least as long as itself.
func Fence(text string) string {
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	return f + "text\n" + strings.TrimRight(text, "\n") + "\n" + f
}
