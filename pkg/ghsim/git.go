package ghsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// errConflict reports a merge that git could not complete cleanly.
var errConflict = errors.New("merge conflict")

// errStale reports a compare-and-swap ref update that lost a race.
var errStale = errors.New("ref changed concurrently")

// gitIdent is who a commit is attributed to.
type gitIdent struct {
	name, email string
	when        time.Time
}

func (s *Sim) ident(u *user, when time.Time) gitIdent {
	if u == nil {
		return gitIdent{name: "GitHub", email: "noreply@github.com", when: when}
	}
	return gitIdent{name: u.login, email: itoa64(u.id) + "+" + u.login + "@users.noreply.github.com", when: when}
}

func (g gitIdent) raw() string {
	return fmt.Sprintf("%s <%s> %d +0000", g.name, g.email, g.when.Unix())
}

// git runs the git binary against a bare repository with a hermetic
// environment: no system or global configuration, identity and dates from
// the arguments, never a prompt.
func (s *Sim) git(dir string, stdin []byte, extraEnv []string, args ...string) (string, error) {
	s.gitSem <- struct{}{}
	defer func() { <-s.gitSem }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Env = append(append([]string{}, s.gitEnv...), extraEnv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), &gitError{args: args, err: err, stderr: strings.TrimSpace(errb.String())}
	}
	return out.String(), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func identEnv(author, committer gitIdent) []string {
	return []string{
		"GIT_AUTHOR_NAME=" + author.name, "GIT_AUTHOR_EMAIL=" + author.email,
		"GIT_AUTHOR_DATE=" + strconv.FormatInt(author.when.Unix(), 10) + " +0000",
		"GIT_COMMITTER_NAME=" + committer.name, "GIT_COMMITTER_EMAIL=" + committer.email,
		"GIT_COMMITTER_DATE=" + strconv.FormatInt(committer.when.Unix(), 10) + " +0000",
	}
}

func (s *Sim) initBare(dir, branch string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	cmd := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch="+branch, dir)
	cmd.Env = s.gitEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git init %s: %w: %s", dir, err, out)
	}
	return nil
}

// fiCommit is one commit of a fast-import stream.
type fiCommit struct {
	ref       string // full ref name
	from      string // parent sha; "" for a root commit
	author    gitIdent
	committer gitIdent
	message   string
	files     map[string]string // "" content deletes the path
}

func fiPath(p string) string {
	if strings.ContainsAny(p, "\"\n\\") || strings.HasPrefix(p, " ") {
		return strconv.Quote(p)
	}
	return p
}

func (c *fiCommit) write(b *bytes.Buffer) {
	fmt.Fprintf(b, "commit %s\n", c.ref)
	fmt.Fprintf(b, "author %s\ncommitter %s\n", c.author.raw(), c.committer.raw())
	fmt.Fprintf(b, "data %d\n%s\n", len(c.message), c.message)
	if c.from != "" {
		fmt.Fprintf(b, "from %s\n", c.from)
	}
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		content := c.files[p]
		if content == "" {
			fmt.Fprintf(b, "D %s\n", fiPath(p))
			continue
		}
		fmt.Fprintf(b, "M 100644 inline %s\ndata %d\n%s\n", fiPath(p), len(content), content)
	}
	b.WriteString("\n")
}

// fastImport writes commits and their refs in one git process, which is
// what makes OpenPRs cheap for thousands of branches.
func (s *Sim) fastImport(dir string, commits []fiCommit) error {
	var b bytes.Buffer
	for i := range commits {
		commits[i].write(&b)
	}
	b.WriteString("done\n")
	_, err := s.git(dir, b.Bytes(), nil, "fast-import", "--quiet", "--done", "--force")
	return err
}

// mergeTree merges b into a without a worktree and returns the tree.
func (s *Sim) mergeTree(dir, a, b string) (string, error) {
	out, err := s.git(dir, nil, nil, "merge-tree", "--write-tree", "--allow-unrelated-histories", a, b)
	if err != nil {
		if exitCode(err) == 1 {
			return "", errConflict
		}
		return "", err
	}
	tree, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(tree), nil
}

func (s *Sim) commitTree(dir, tree string, parents []string, msg string, author, committer gitIdent) (string, error) {
	args := []string{"commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := s.git(dir, []byte(msg), identEnv(author, committer), args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// updateRef moves ref from old to new atomically; old "" means the ref
// must not exist.
func (s *Sim) updateRef(dir, ref, newSHA, old string) error {
	if old == "" {
		old = strings.Repeat("0", 40)
	}
	_, err := s.git(dir, nil, nil, "update-ref", ref, newSHA, old)
	if err != nil && strings.Contains(err.Error(), "but expected") {
		return fmt.Errorf("update %s: %w", ref, errStale)
	}
	return err
}

var shortstatRE = regexp.MustCompile(`(\d+) (file|insertion|deletion)`)

// mergeability asks git how head relates to base.
func (s *Sim) mergeability(dir, base, head string) (mergeInfo, error) {
	var mi mergeInfo
	out, err := s.git(dir, nil, nil, "rev-list", "--left-right", "--count", base+"..."+head)
	if err != nil {
		return mi, err
	}
	f := strings.Fields(out)
	if len(f) == 2 {
		mi.behind, _ = strconv.Atoi(f[0])
		mi.ahead, _ = strconv.Atoi(f[1])
	}
	if mi.behind > 0 && mi.ahead > 0 {
		if _, err := s.mergeTree(dir, base, head); errors.Is(err, errConflict) {
			mi.conflict = true
		} else if err != nil {
			return mi, err
		}
	}
	out, err = s.git(dir, nil, nil, "diff", "--shortstat", base+"..."+head)
	if err != nil {
		return mi, err
	}
	for _, m := range shortstatRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		switch m[2] {
		case "file":
			mi.changedFiles = n
		case "insertion":
			mi.additions = n
		case "deletion":
			mi.deletions = n
		}
	}
	return mi, nil
}

// commitMessages returns the subjects and bodies of base..head, oldest first.
func (s *Sim) commitMessages(dir, base, head string) ([]string, error) {
	out, err := s.git(dir, nil, nil, "log", "--reverse", "--format=%B%x00", base+".."+head)
	if err != nil {
		return nil, err
	}
	var msgs []string
	for _, m := range strings.Split(out, "\x00") {
		if m = strings.TrimSpace(m); m != "" {
			msgs = append(msgs, m)
		}
	}
	return msgs, nil
}

// rebaseOnto replays the non-merge commits of base..head on top of onto,
// keeping their authors, and returns the new tip.
func (s *Sim) rebaseOnto(dir, onto, base, head string, committer gitIdent) (string, error) {
	out, err := s.git(dir, nil, nil, "rev-list", "--reverse", "--no-merges", base+".."+head)
	if err != nil {
		return "", err
	}
	idx, err := os.CreateTemp(s.home, "index-*")
	if err != nil {
		return "", fmt.Errorf("rebase: %w", err)
	}
	idx.Close()
	defer os.Remove(idx.Name())
	idxEnv := []string{"GIT_INDEX_FILE=" + idx.Name()}
	cur := onto
	for _, c := range strings.Fields(out) {
		raw, err := s.git(dir, nil, nil, "cat-file", "commit", c)
		if err != nil {
			return "", err
		}
		author, msg := parseCommit(raw)
		if _, err := s.git(dir, nil, idxEnv, "read-tree", cur); err != nil {
			return "", err
		}
		patch, err := s.git(dir, nil, nil, "diff", "--binary", "--full-index", c+"^", c)
		if err != nil {
			return "", err
		}
		if patch != "" {
			if _, err := s.git(dir, []byte(patch), idxEnv, "apply", "--cached"); err != nil {
				return "", fmt.Errorf("replay %s: %w", c, errConflict)
			}
		}
		tree, err := s.git(dir, nil, idxEnv, "write-tree")
		if err != nil {
			return "", err
		}
		if author.name == "" {
			author = committer
		}
		cur, err = s.commitTree(dir, strings.TrimSpace(tree), []string{cur}, msg, author, committer)
		if err != nil {
			return "", err
		}
	}
	return cur, nil
}

var authorRE = regexp.MustCompile(`^author (.*) <(.*)> (\d+) [+-]\d{4}$`)

func parseCommit(raw string) (gitIdent, string) {
	hdr, msg, _ := strings.Cut(raw, "\n\n")
	var id gitIdent
	for _, line := range strings.Split(hdr, "\n") {
		if m := authorRE.FindStringSubmatch(line); m != nil {
			sec, _ := strconv.ParseInt(m[3], 10, 64)
			id = gitIdent{name: m[1], email: m[2], when: time.Unix(sec, 0).UTC()}
		}
	}
	return id, msg
}
