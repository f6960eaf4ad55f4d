package review

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/config/configtest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	defaults, err := CompileFindingIgnore(DefaultFindingIgnore)
	require.NoError(t, err)
	custom, err := CompileFindingIgnore([]string{`^\W*minor\b`, `\bbikeshed`})
	require.NoError(t, err)
	const suggestion = "\n\n```suggestion\n\treturn fmt.Errorf(\"open %s: %w\", name, err)\n```\n"
	tests := []struct {
		name       string
		body       string
		ignore     []string // nil: the defaults
		actionable bool
		reason     string // a part of the reason
	}{
		// Critical findings are always actionable, whatever the patterns.
		{name: "security", body: "Security: the token is logged in plain text.", actionable: true, reason: "critical: security"},
		{name: "vulnerability", body: "This is vulnerable to SQL injection.", actionable: true, reason: "critical: security"},
		{name: "bug tag", body: "[bug] the loop never ends when n is 0", actionable: true, reason: "critical: bug"},
		{name: "CodeRabbit potential issue", body: "_⚠️ Potential issue_\n\n**The file is never closed.**", actionable: true, reason: "critical: bug"},
		{name: "breaking change", body: "This is a breaking change for callers of Open.", actionable: true, reason: "critical: breaking change"},
		{name: "red circle critical", body: "🔴 Critical: nil map write", actionable: true, reason: "critical: severity marker"},
		{name: "bold severity high", body: "**Severity: high**\n\nThe error is dropped.", actionable: true, reason: "critical: severity marker"},
		{name: "Gemini high priority image", body: "![high](https://www.gstatic.com/codereviewagent/high-priority.svg)\n\nThe lock is never released.", actionable: true, reason: "critical: severity marker"},
		{name: "a critical nit is critical", body: "Nit: this also leaks the session: a security problem.", actionable: true, reason: "critical: security"},
		{name: "a race is a bug", body: "Consider the data race on counter.", actionable: true, reason: "critical: bug"},

		// The default ignore patterns: style, formatting, nit, typo, trivial, low severity.
		{name: "nit label", body: "Nit: rename x to count.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "CodeRabbit nitpick, with a suggestion", body: "_🧹 Nitpick (assertive)_\n\nPrefer a shorter name." + suggestion, reason: "PRLOOP_FINDING_IGNORE"},
		{name: "bold style label", body: "**Style**: use camelCase here.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "formatting", body: "Formatting: this line is longer than 100 characters.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "typo", body: "Typo: 'recieve' should be 'receive'.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "typo tag anywhere", body: "In the comment above [typo] teh.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "trivial severity", body: "🔵 Trivial\n\nThe blank line is not needed.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "low severity", body: "**Severity: low** — the message could be clearer.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "Gemini low priority image", body: "![low](https://www.gstatic.com/codereviewagent/low-priority.svg)\n\nThis could be a const.", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "a word inside code decides nothing", body: "`style` is passed twice to render().", actionable: true, reason: "a finding"},
		{name: "security inside a code block decides nothing", body: "Nit: long line.\n\n```go\nsecurity.Check(bug)\n```", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "security in a hidden comment decides nothing", body: "Nit: long line.<!-- security scan id 1 -->", reason: "PRLOOP_FINDING_IGNORE"},
		{name: "a mention of style later on is no label", body: "The handler ignores the style argument, so every page renders unstyled.", actionable: true, reason: "a finding"},

		// Concrete changes are actionable.
		{name: "suggestion block", body: "The error loses its context." + suggestion, actionable: true, reason: "a suggestion block"},
		{name: "diff block", body: "Return early:\n\n~~~diff\n-\tif ok {\n+\tif !ok {\n~~~", actionable: true, reason: "a diff block"},
		{name: "committable suggestion in details", body: "Wrap the error.\n\n<details>\n<summary>📝 Committable suggestion</summary>\n\n```suggestion\nreturn err\n```\n</details>", actionable: true, reason: "a suggestion block"},
		{name: "change x to y", body: "Change the timeout to `30 * time.Second`.", actionable: true, reason: "names the new code"},
		{name: "replace x with y", body: "Consider replacing the loop with `slices.Contains(names, n)`.", actionable: true, reason: "names the new code"},
		{name: "use y instead", body: "Maybe use `errors.Is` instead: the error is wrapped.", actionable: true, reason: "names the new code"},
		{name: "a consider with a suggestion block", body: "Consider wrapping the error." + suggestion, actionable: true, reason: "a suggestion block"},

		// "Consider …" without a concrete change is not.
		{name: "consider", body: "Consider adding more tests for this function.", reason: `"consider …"`},
		{name: "you might want to", body: "You might want to split this function.", reason: `"consider …"`},
		{name: "bold consider", body: "**Consider extracting a helper** for readability.", reason: `"consider …"`},
		{name: "a go block is no concrete change", body: "Consider a table test:\n\n```go\nfor _, tt := range tests {}\n```", reason: `"consider …"`},

		// Anything else stays actionable, as before the classifier.
		{name: "a plain finding", body: "err is ignored", actionable: true, reason: "a finding"},
		{name: "empty", body: "", actionable: true, reason: "a finding"},

		// The patterns are the operator's.
		{name: "custom pattern ignores", body: "Minor: the doc comment could be shorter.", ignore: []string{`^\W*minor\b`, `\bbikeshed`}, reason: `pattern ^\W*minor\b`},
		{name: "custom patterns replace the defaults", body: "Nit: rename x to count.", ignore: []string{`^\W*minor\b`, `\bbikeshed`}, actionable: true, reason: "a finding"},
		{name: "custom patterns never silence a critical finding", body: "Minor: an SQL injection in the filter.", ignore: []string{`^\W*minor\b`, `\bbikeshed`}, actionable: true, reason: "critical: security"},
		{name: "no patterns leave the built-in rules", body: "Nit: rename x.", ignore: []string{}, actionable: true, reason: "a finding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ignore := defaults
			switch {
			case tt.ignore == nil:
			case len(tt.ignore) == 0:
				ignore = nil
			default:
				ignore = custom
			}
			got := Classify(Item{Kind: KindReviewComment, Author: "coderabbitai[bot]", Body: tt.body}, ignore)
			assert.Equal(t, tt.actionable, got.Actionable, got.Reason)
			assert.Contains(t, got.Reason, tt.reason)
		})
	}
}

func TestPolicyConfig_FindingIgnore(t *testing.T) {
	configtest.Run(t, []configtest.Case[PolicyConfig]{
		{
			Name: "the default is DefaultFindingIgnore",
			Check: func(t *testing.T, c PolicyConfig) {
				assert.Equal(t, DefaultFindingIgnore, c.FindingIgnore)
				assert.Len(t, c.Policy("prloop-bot").FindingIgnore, len(DefaultFindingIgnore))
			},
		},
		{
			Name: "set but empty leaves only the built-in rules",
			Env:  map[string]string{"PRLOOP_FINDING_IGNORE": ""},
			Check: func(t *testing.T, c PolicyConfig) {
				assert.Empty(t, c.Policy("prloop-bot").FindingIgnore)
			},
		},
		{
			Name: "custom patterns",
			Env:  map[string]string{"PRLOOP_FINDING_IGNORE": `^\W*minor\b, \bbikeshed`},
			Check: func(t *testing.T, c PolicyConfig) {
				p := c.Policy("prloop-bot")
				require.Len(t, p.FindingIgnore, 2)
				assert.False(t, Classify(Item{Body: "MINOR: shorter doc"}, p.FindingIgnore).Actionable, "case-insensitive")
			},
		},
		{
			Name:    "a bad regular expression names the variable",
			Env:     map[string]string{"PRLOOP_FINDING_IGNORE": `nit,(unclosed`},
			WantErr: []string{"PRLOOP_FINDING_IGNORE", `"(unclosed"`, "missing closing )"},
		},
	})
}
