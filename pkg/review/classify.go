package review

import (
	"fmt"
	"regexp"
	"strings"
)

// Classification says whether a quorum bot's finding justifies a fix
// cycle, and why.
type Classification struct {
	Actionable bool
	// Reason says why, for people (the status line, prloop explain, the
	// fix prompt). It names a rule or an operator's pattern, never the
	// bot's own text.
	Reason string
}

// DefaultFindingIgnore is PRLOOP_FINDING_IGNORE's default: a finding that
// opens with a nit, style, formatting, typo, cosmetic or trivial label
// ("Nit:", "_🧹 Nitpick_", "**Style**", "🔵 Trivial"), carries such a tag
// ("[typo]"), or a low severity ("Severity: low", "low priority", Gemini's
// "![low]"). Keep it in step with PolicyConfig.FindingIgnore's default tag.
var DefaultFindingIgnore = []string{
	`^[\W_]*(nit(s|pick\w*)?|style|formatting|typo|cosmetic|trivial)\b`,
	`\[(nit|style|formatting|typo|cosmetic|trivial)\]`,
	`severity\W*(low|trivial|info)\b`,
	`\blow[- ]priority\b`,
	`!\[low\]`,
}

// CompileFindingIgnore compiles PRLOOP_FINDING_IGNORE's patterns,
// case-insensitive; empty entries are skipped.
func CompileFindingIgnore(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("PRLOOP_FINDING_IGNORE: pattern %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// rule is a built-in pattern with the name a Reason gives it.
type rule struct {
	name string
	re   *regexp.Regexp
}

// critical marks findings that are always actionable, whatever the ignore
// patterns say: security, bugs, breaking changes, and the high severity
// markers review bots print. They are built in so that no configuration
// can silence them.
var critical = []rule{
	{"security", regexp.MustCompile(`(?i)\bsecurity\b|\bvulnerab\w*|\binjection\b|\bCVE-\d{4}`)},
	{"bug", regexp.MustCompile(`(?i)\bbugs?\b|\bdata race\b|\brace condition\b|\bpotential issue`)},
	{"breaking change", regexp.MustCompile(`(?i)\bbreaking[- ]change`)},
	{"severity marker", regexp.MustCompile(`(?i)🔴|🚨|🟠|\bcritical\b|severity\W*(critical|high)\b|\b(critical|high)[- ]priority\b|!\[(critical|high)\]`)},
}

// concreteProse is a change spelled out in words that names the new code:
// "change x to `y`", "replace x with `y`", "use `y` instead", "should be `y`".
var concreteProse = regexp.MustCompile("(?i)\\b(chang|renam|replac)(e|ing)\\b[^\\n]{0,80}?\\b(to|with)\\s+`[^`\\n]+`|\\buse\\s+`[^`\\n]+`\\s+instead\\b|\\bshould\\s+(be|read)\\s+`[^`\\n]+`")

// hedge opens a remark that proposes without saying what to change.
var hedge = regexp.MustCompile(`(?i)^[\W_]*(consider|you (may|might|could) (want|wish) to|it (may|might|could) be (worth|better|nicer)|optionally|perhaps|maybe)\b`)

// Classify decides whether a quorum bot's finding is actionable, in this
// order (the first rule that applies decides):
//
//  1. a critical marker (security, bug, breaking change, a high severity)
//     anywhere in its text: actionable;
//  2. an ignore pattern (PRLOOP_FINDING_IGNORE): not actionable, even with
//     a suggestion, since a labelled nit stays a nit;
//  3. a concrete change (a suggestion or diff block, "change x to `y`"):
//     actionable;
//  4. a "consider …" remark without one: not actionable;
//  5. anything else: actionable, as before the classifier.
//
// Patterns see the text without code blocks, inline code, HTML comments
// and <details> sections, so code that happens to say "style" or
// "security" decides nothing. Humans' feedback is never classified.
func Classify(it Item, ignore []*regexp.Regexp) Classification {
	prose, fences := split(it.Body)
	plain := inlineCode.ReplaceAllString(prose, "code")
	for _, r := range critical {
		if r.re.MatchString(plain) {
			return Classification{Actionable: true, Reason: "critical: " + r.name}
		}
	}
	for _, re := range ignore {
		if re.MatchString(plain) {
			return Classification{Reason: "matches PRLOOP_FINDING_IGNORE pattern " + strings.TrimPrefix(re.String(), "(?i)")}
		}
	}
	for _, info := range fences {
		if info == "suggestion" || info == "diff" {
			return Classification{Actionable: true, Reason: "concrete change: a " + info + " block"}
		}
	}
	if concreteProse.MatchString(prose) {
		return Classification{Actionable: true, Reason: "concrete change: names the new code"}
	}
	if hedge.MatchString(plain) {
		return Classification{Reason: `a "consider …" remark without a concrete change`}
	}
	return Classification{Actionable: true, Reason: "a finding"}
}

var (
	inlineCode  = regexp.MustCompile("`[^`\\n]*`")
	htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	details     = regexp.MustCompile(`(?is)<details>.*?</details>`)
)

// split returns body's prose (without fenced code blocks, HTML comments and
// <details> sections) and the info strings of its fenced blocks, lower
// case ("suggestion", "diff", "go" …), including those inside <details>
// (where CodeRabbit puts its committable suggestions).
func split(body string) (prose string, fences []string) {
	var b strings.Builder
	fence := ""
	for line := range strings.Lines(body) {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			n := len(t) - len(strings.TrimLeft(t, t[:1]))
			fence = t[:n]
			info, _, _ := strings.Cut(strings.TrimSpace(t[n:]), " ")
			fences = append(fences, strings.ToLower(info))
			continue
		}
		b.WriteString(line)
	}
	prose = htmlComment.ReplaceAllString(b.String(), "")
	prose = details.ReplaceAllString(prose, "")
	return strings.TrimSpace(prose), fences
}
