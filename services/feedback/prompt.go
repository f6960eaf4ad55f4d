package feedback

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/prloop/prloop/pkg/review"
)

//go:embed prompt.tmpl
var defaultTemplate string

// templateFuncs are available to prompt templates: fence quotes text so it
// cannot close the quote (see Fence), inc counts from 1.
var templateFuncs = template.FuncMap{
	"fence": Fence,
	"inc":   func(i int) int { return i + 1 },
}

// ParseTemplate parses a prompt template with the prompt functions.
// Every prompt template may use the section "checks" (checks.tmpl), which
// quotes the failing checks.
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse prompt template %s: %w", name, err)
	}
	if t.Lookup("checks") == nil {
		if _, err := t.New("checks.tmpl").Parse(checksTemplateText); err != nil {
			return nil, fmt.Errorf("parse the checks section: %w", err)
		}
	}
	return t, nil
}

// loadTemplate reads the template at path, or the built-in one for "".
func loadTemplate(path string) (*template.Template, error) {
	if path == "" {
		return ParseTemplate("prompt.tmpl", defaultTemplate)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read prompt template: %w", err)
	}
	return ParseTemplate(filepath.Base(path), string(b))
}

// PromptData is what a prompt template sees. Text fields from GitHub or the
// worktree are sanitised; templates quote them with fence.
type PromptData struct {
	// URL, Ref ("owner/repo#n"), Title and Branch describe the PR.
	URL, Ref, Title, Branch string
	// HeadSHA is the commit the agent starts from.
	HeadSHA string
	// FixCycle counts the fixes prloop pushed to the PR before this one.
	FixCycle int
	// ContextPath names the spec or plan material from the watch request.
	ContextPath string
	// Context holds its files' text, size-capped; ContextOmitted names the
	// files the cap left out.
	Context        []ContextFile
	ContextOmitted []string
	// Comments are the feedback to address, oldest first.
	Comments []PromptComment
	// LeftOut are the quorum bots' findings the finding classifier set
	// aside (review.Classify), without their text: the prompt names them
	// so the agent knows they were left out on purpose. At most
	// maxLeftOut; LeftOutCount counts them all.
	LeftOut      []PromptComment
	LeftOutCount int
	// Checks are the failing checks to make pass (plan_checks.go), quoted by
	// the template "checks".
	Checks []PromptCheck
	// Candidate is set when the checks failed on the speculative queue's
	// candidate (the PR on top of the base), not on the head: prloop
	// merged the base into the worktree first.
	Candidate *PromptCandidate
}

// PromptCandidate is the candidate the checks failed on, and the base tip
// prloop merged into the worktree.
type PromptCandidate struct {
	SHA, BaseBranch, BaseSHA string
}

// ContextFile is one spec or plan file.
type ContextFile struct {
	Path string
	Text string
}

// PromptComment is one piece of feedback, sanitised.
type PromptComment struct {
	// Kind is "comment", "review_comment" or "review"; KindText says it in words.
	Kind, KindText string
	Author         string
	// Location is "path:line" for inline comments, "" otherwise.
	Location string
	Body     string
	DiffHunk string
	URL      string
	// Reason is why a left-out finding was set aside.
	Reason string
}

// kindText names a feedback kind in the prompt.
var kindText = map[string]string{
	review.KindComment:       "conversation comment",
	review.KindReviewComment: "inline comment",
	review.KindReview:        "review",
}

// Comments turns feedback items into prompt comments: sanitised, and
// together no larger than maxBytes (later bodies are cut first, but every
// comment keeps its place and location).
func Comments(items []review.Item, maxBytes int) []PromptComment {
	out := make([]PromptComment, 0, len(items))
	budget := maxBytes
	for _, it := range items {
		c := heading(it)
		c.Body, c.DiffHunk = Sanitize(it.Body), strings.TrimRight(stripInvisible(it.DiffHunk), "\n")
		if budget < minQuote {
			c.Body, c.DiffHunk = "[comment omitted: PRLOOP_PROMPT_MAX_BYTES reached]", ""
		} else {
			c.Body = Truncate(c.Body, budget)
			budget -= len(c.Body)
			c.DiffHunk = Truncate(c.DiffHunk, max(0, min(budget, maxHunkBytes)))
			budget -= len(c.DiffHunk)
		}
		out = append(out, c)
	}
	return out
}

// heading is what names an item in the prompt: its kind, author,
// location and URL, sanitised.
func heading(it review.Item) PromptComment {
	c := PromptComment{Kind: it.Kind, KindText: kindText[it.Kind], Author: SanitizeLine(it.Author), URL: SanitizeLine(it.URL)}
	if it.Path != "" {
		c.Location = SanitizeLine(review.Item{Path: it.Path, Line: it.Line}.Location())
	}
	if c.KindText == "" {
		c.KindText = "comment"
	}
	return c
}

// LeftOut names the findings the classifier set aside (review.Verdict's
// Ignored), at most maxLeftOut of them, each with its reason and without
// its text: the agent is not to act on them.
func LeftOut(items []review.Item) []PromptComment {
	out := make([]PromptComment, 0, min(len(items), maxLeftOut))
	for _, it := range items[:min(len(items), maxLeftOut)] {
		c := heading(it)
		c.Reason = SanitizeLine(it.Why)
		out = append(out, c)
	}
	return out
}

// maxLeftOut bounds the left-out findings a prompt names.
const maxLeftOut = 50

// maxHunkBytes caps one diff hunk: the agent has the file itself.
const maxHunkBytes = 4 << 10

// minQuote is the least room worth quoting a text in: below it, the text
// is listed as omitted.
const minQuote = 64

// ReadContext reads the text files under path (a file or a directory;
// relative paths are inside root, the worktree), sanitised, sorted by path,
// in total no more than maxBytes. It never follows symbolic links and skips
// .git, binary files and anything outside root for a relative path, so a
// link planted in the branch cannot pull a file such as a credential store
// into the prompt. Every name is resolved through an os.Root, so no link
// or ".." on the way leads out, even one planted after the check. Files
// past the cap are returned as omitted.
func ReadContext(root, path string, maxBytes int) (files []ContextFile, omitted []string, err error) {
	if path == "" {
		return nil, nil, nil
	}
	dir, rel := filepath.Dir(path), filepath.Base(path)
	if !filepath.IsAbs(path) {
		rel = filepath.Clean(path)
		if !filepath.IsLocal(rel) {
			return nil, nil, fmt.Errorf("read context %q: outside the worktree", path)
		}
		dir = root
	} else if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("read context %q: a symbolic link; not followed", path)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read context %q: %w", path, err)
	}
	defer r.Close()
	rel = filepath.ToSlash(rel)
	st, err := r.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("read context %q: %w", path, err)
	case err != nil:
		return nil, nil, fmt.Errorf("read context %q: leads outside the worktree through a symbolic link: %w", path, err)
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, nil, fmt.Errorf("read context %q: a symbolic link; not followed", path)
	}
	var paths []string
	if st.Mode().IsRegular() {
		paths = []string{rel}
	} else if st.IsDir() {
		err = fs.WalkDir(r.FS(), rel, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable entries are skipped
			}
			if d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read context %q: %w", path, err)
		}
	}
	slices.Sort(paths)
	budget := maxBytes
	for _, p := range paths {
		name := filepath.FromSlash(p)
		if filepath.IsAbs(path) {
			name = filepath.Join(dir, name)
		}
		b, err := r.ReadFile(p)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // unreadable, a link planted since, or binary
		}
		if budget < minQuote {
			omitted = append(omitted, SanitizeLine(name))
			continue
		}
		text := Truncate(Sanitize(string(b)), budget)
		budget -= len(text)
		files = append(files, ContextFile{Path: SanitizeLine(name), Text: text})
	}
	return files, omitted, nil
}

// Render executes the template with data.
func Render(t *template.Template, data PromptData) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render prompt for %s: %w", data.Ref, err)
	}
	return b.String(), nil
}
