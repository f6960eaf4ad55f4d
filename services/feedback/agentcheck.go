package feedback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/sandbox"
)

// The agent's command is checked at start, in the sandbox it will run in:
// a binary that the sandbox hides (or that is not installed) would
// otherwise be found out only by the first change request, after every
// agent run it may use.

// checkTimeout bounds the lookup of the agent's binary in the sandbox.
const checkTimeout = 30 * time.Second

// assignmentRE matches the name of an environment assignment in front of a
// command (NAME=value).
var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// agentProgram returns the program a `sh -c cmd` runs first: the first
// shell word after any environment assignments, with its quotes removed.
// It reports false when that cannot be known without running the shell:
// an expansion ($, `, globs, ~) or an operator in the program's word, or
// an assignment to PATH, which changes where the program is looked up; a
// relative path, which names a file of the worktree.
func agentProgram(cmd string) (string, bool) {
	rest := cmd
	for {
		word, lit, tail, ok := shellWord(rest)
		if !ok || word == "" && lit == "" {
			return "", false
		}
		if name, value, isAssign := strings.Cut(lit, "="); isAssign && assignmentRE.MatchString(lit) {
			// A command substitution may hold spaces that end no word.
			if name == "PATH" || strings.ContainsAny(value, "`()") {
				return "", false
			}
			rest = tail
			continue
		}
		if !literal(lit) || strings.Contains(word, "/") && !filepath.IsAbs(word) {
			// A relative path is looked up in the worktree, which the
			// check does not have.
			return "", false
		}
		return word, true
	}
}

// literal reports whether a word's unquoted characters (lit, quoted ones
// replaced by 'q') are free of expansions and operators.
func literal(lit string) bool {
	return !strings.ContainsAny(lit, "$`*?[~;&|<>()") && lit != ""
}

// shellWord reads the first shell word of s. word is its value with quotes
// and escapes removed; lit is the word as written with each quoted or
// escaped character replaced by 'q', so a caller can see which
// characters the shell would interpret. ok is false for an unterminated
// quote, or an expansion inside double quotes.
func shellWord(s string) (word, lit, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t\n")
	var w, l strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			return w.String(), l.String(), s[i:], true
		case c == '\\':
			if i+1 == len(s) {
				return "", "", "", false
			}
			i++
			if s[i] != '\n' {
				w.WriteByte(s[i])
				l.WriteByte('q')
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", "", "", false
			}
			w.WriteString(s[i+1 : i+1+end])
			l.WriteString(strings.Repeat("q", end))
			i += end + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '$' || s[i] == '`':
					return "", "", "", false
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
					i++
				}
				w.WriteByte(s[i])
				l.WriteByte('q')
			}
			if i == len(s) {
				return "", "", "", false
			}
		default:
			w.WriteByte(c)
			l.WriteByte(c)
		}
	}
	return w.String(), l.String(), "", true
}

// CheckAgent looks the agent command's program up inside the sandbox, with
// the environment and the paths the agent gets, and fails, naming the
// program, the sandbox and PRLOOP_AGENT_READONLY_PATHS, when it is not
// found there. A command whose program cannot be known without running it
// (see agentProgram) is not checked.
func (s *Service) CheckAgent(ctx context.Context) error {
	prog, ok := s.spec.program()
	if !ok {
		s.d.Log.Info("agent command not checked at start: its program is known only when the shell runs it", "agent_cmd", s.spec.Shell)
		return nil
	}
	if err := os.MkdirAll(s.worksDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", s.worksDir, err)
	}
	// An empty directory of its own: the agent's worktree is not there yet,
	// and a shared directory would show the lookup more than the agent sees.
	dir, err := os.MkdirTemp(s.worksDir, ".agent-check-")
	if err != nil {
		return fmt.Errorf("check the agent command: %w", err)
	}
	defer os.RemoveAll(dir)
	env := SafeEnv(s.d.Environ())
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err = s.d.Sandbox.Run(ctx, sandbox.Cmd{
		// Exit status 3 says "not found"; any other failure is the
		// sandbox's or the shell's (a PATH without sh, say).
		Args: []string{"sh", "-c", `command -v "$1" || exit 3`, "sh", prog}, Dir: dir, Env: env,
		Stdout: &stdout, Stderr: &stderr, KillGrace: time.Second,
	})
	var ee *exec.ExitError
	switch {
	case err == nil:
		s.d.Log.Info("agent command found in the sandbox", "program", prog, "path", strings.TrimSpace(stdout.String()), "sandbox", s.d.Sandbox.Mode())
		return nil
	case !errors.As(err, &ee) || ee.ExitCode() != 3 || ctx.Err() != nil:
		return fmt.Errorf("check the agent command %s in the %s sandbox: %w: %s", prog, s.d.Sandbox.Mode(), err, strings.TrimSpace(stderr.String()))
	}
	return missingAgent(prog, s.d.Sandbox.Mode(), hostPath(prog, env))
}

// missingAgent is the error for an agent program the sandbox does not
// show; host is where it is on this machine outside the sandbox, if
// anywhere.
func missingAgent(prog string, mode sandbox.Mode, host string) error {
	if mode == sandbox.None {
		return fmt.Errorf("the agent command %s is not found (PRLOOP_AGENT_SANDBOX=none: looked up on prloop's own PATH); install it, or fix PRLOOP_AGENT (or PRLOOP_AGENT_CMD)", prog)
	}
	dirs := "its directory (e.g. /root/.local/bin)"
	if host != "" {
		ds := []string{filepath.Dir(host)}
		if real, err := filepath.EvalSymlinks(host); err == nil {
			// A symlink's target must be visible too.
			ds = append(ds, filepath.Dir(real))
		}
		dirs = strings.Join(slices.Compact(ds), " and ") + " (it is " + host + " on this machine)"
	}
	return fmt.Errorf("the agent command %s is not found inside the %s sandbox; install it under /usr, or add %s to PRLOOP_AGENT_READONLY_PATHS", prog, mode, dirs)
}

// hostPath finds prog as sh would on env's PATH outside the sandbox, or
// returns "".
func hostPath(prog string, env []string) string {
	executable := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if strings.Contains(prog, "/") {
		if p, err := filepath.Abs(prog); err == nil && executable(p) {
			return p
		}
		return ""
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if p := filepath.Join(d, prog); filepath.IsAbs(p) && executable(p) {
			return p
		}
	}
	return ""
}
