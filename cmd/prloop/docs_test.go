package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// maxREADMELines is how long the README's front page may be: what prloop
// is, the two commands, a diagram and where to go next; the rest is in
// docs/.
const maxREADMELines = 250

// TestDocs_READMEIsAFrontPage: the README stays a front page.
func TestDocs_READMEIsAFrontPage(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(proctest.Root(t), "README.md"))
	require.NoError(t, err)
	n := strings.Count(string(readme), "\n")
	assert.LessOrEqual(t, n, maxREADMELines, "README.md has %d lines: move the detail into docs/", n)
}

// TestDocs_LinksResolve: every relative link of README.md and docs/*.md
// names a file of the repository, and its #anchor a heading of that file
// (as GitHub makes anchors of headings).
func TestDocs_LinksResolve(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		body, err := os.ReadFile(path)
		require.NoError(t, err)
		anchors[path] = headingAnchors(string(body))
		return anchors[path]
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		for _, link := range markdownLinks(string(body)) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(link) {
				continue // http(s), mailto: not this test's
			}
			target, anchor, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, link)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s links to %s: no heading makes the anchor #%s", rel, link, anchor)
			}
		}
	}
}

// TestDocs_Anchors: anchors as GitHub makes them of headings.
func TestDocs_Anchors(t *testing.T) {
	t.Parallel()
	got := headingAnchors("# Why isn't my PR merging?\n## `prloop status -json`\n```\n# not a heading\n```\n## prloop's commit status\n## Start-up checks and `prloop doctor`\n## Metrics\n## Metrics\n")
	for _, want := range []string{"why-isnt-my-pr-merging", "prloop-status--json", "prloops-commit-status", "start-up-checks-and-prloop-doctor", "metrics", "metrics-1"} {
		assert.True(t, got[want], "no anchor %s in %v", want, got)
	}
	assert.False(t, got["not-a-heading"])
	assert.Equal(t, []string{"a.md", "b.md#x", "page.png"}, markdownLinks("[a](a.md) and `[not](c.md)` and [b](b.md#x)\n```\n[no](d.md)\n```\n![img](page.png)\n"))
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineRE = regexp.MustCompile("`[^`\n]*`")
)

// markdownLinks are the link targets of a Markdown text, outside code.
func markdownLinks(md string) []string {
	var out []string
	for _, line := range proseLines(md) {
		for _, m := range linkRE.FindAllStringSubmatch(inlineRE.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a Markdown text's headings:
// lower case, spaces to hyphens, punctuation other than hyphens and
// underscores dropped, and -1, -2 … after a repeated one.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, line := range proseLines(md) {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i := 1; out[a]; i++ {
			a = b.String() + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// proseLines are the lines of a Markdown text outside fenced code blocks.
func proseLines(md string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}
