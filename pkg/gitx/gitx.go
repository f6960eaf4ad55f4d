// Package gitx runs prloop's own git processes: with system and global
// configuration ignored, hooks and fsmonitor off, only the https, http and
// file transports, a timeout on every command, and the GitHub token only
// where a command talks to a remote, as an http.<scheme://host/>.extraHeader
// in that one process's environment (GIT_CONFIG_COUNT/KEY/VALUE): never in
// a URL, an argument (which /proc/<pid>/cmdline shows to every user of the
// host), a file or a log line, and redacted from git's error output.
//
// Feedback's mirror and the merger's rebase both run git this way; git in
// the agent's worktree takes Environ's credential-free environment into its
// sandbox.
package gitx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/github"
)

// Timeouts of one git process.
const (
	// LocalTimeout bounds a command that does not talk to a remote.
	LocalTimeout = 2 * time.Minute
	// NetworkTimeout bounds a fetch or push.
	NetworkTimeout = 10 * time.Minute
)

// ErrGit is wrapped by errors of git commands that ran and failed.
var ErrGit = errors.New("git failed")

// hardening is configuration every prloop git command runs with. Config
// from the environment outranks the repository's, so a worktree's
// .git/config cannot undo it.
var hardening = [][2]string{
	{"core.hooksPath", os.DevNull},
	{"core.fsmonitor", "false"},
	{"core.alternateRefsCommand", ""},
	{"commit.gpgsign", "false"},
	{"tag.gpgsign", "false"},
	{"protocol.allow", "never"},
	{"protocol.https.allow", "always"},
	{"protocol.http.allow", "always"},
	{"protocol.file.allow", "always"},
	{"transfer.fsckObjects", "true"},
	{"credential.helper", ""},
	{"http.proxy", ""},
	{"core.sshCommand", "false"},
}

// hardeningEnv ignores system and global configuration and replacement
// objects, and never asks anyone for a password.
var hardeningEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_ATTR_NOSYSTEM=1",
	"GIT_NO_REPLACE_OBJECTS=1", "GIT_TERMINAL_PROMPT=0",
}

// Runner runs git commands as prloop's own processes.
type Runner struct {
	// Bin is the git executable; default "git".
	Bin string
	// Env is the base environment, already stripped of credentials.
	Env []string
	// Token returns the credential for remotes, fresh for each command
	// that talks to one (an App installation token expires); nil: none.
	Token func(ctx context.Context) (github.Secret, error)
}

// Cmd is one git command.
type Cmd struct {
	// Args are git's arguments, without the executable.
	Args []string
	// Dir is the working directory; default GitDir, else "/".
	Dir string
	// GitDir, when set, is passed as --git-dir (a bare repository).
	GitDir string
	// Remote is the remote the command talks to ("" for a local command):
	// only then does it get the credential, and the network timeout.
	Remote string
	// Env is added to the environment (a committer identity, say).
	Env []string
}

// authScope is the URL prefix the auth header is limited to: scheme and
// host for http(s) remotes, so git sends it nowhere else (submodules, LFS
// or redirects elsewhere); the remote itself for others (file:// with the
// simulator), where git never uses it.
func authScope(remote string) string {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return remote
	}
	return u.Scheme + "://" + u.Host + "/"
}

// basicAuth is the header value git sends: GitHub accepts a token as the
// password of the x-access-token user, for PATs and App tokens alike.
func basicAuth(tok github.Secret) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+tok.Reveal()))
}

// Environ returns the environment of one git command, and the secrets in
// it (to redact from its output). remote is "" for a command that needs
// no credentials: then the environment has none.
func (r *Runner) Environ(ctx context.Context, remote string) ([]string, []string, error) {
	cfg := append([][2]string(nil), hardening...)
	var secrets []string
	if remote != "" && r.Token != nil {
		tok, err := r.Token(ctx)
		if err != nil {
			return nil, nil, err
		}
		if tok != "" {
			header := basicAuth(tok)
			cfg = append(cfg, [2]string{"http." + authScope(remote) + ".extraHeader", header})
			secrets = append(secrets, tok.Reveal(), strings.TrimPrefix(header, "Authorization: Basic "))
		}
	}
	env := append(append([]string(nil), r.Env...), hardeningEnv...)
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
	for i, kv := range cfg {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env, secrets, nil
}

// command returns the process Run starts for c, with the secrets its
// environment holds, and the cancel of its timeout.
func (r *Runner) command(ctx context.Context, c Cmd) (*exec.Cmd, []string, context.CancelFunc, error) {
	timeout := LocalTimeout
	if c.Remote != "" {
		timeout = NetworkTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	env, secrets, err := r.Environ(ctx, c.Remote)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("git %s: %w", c.Args[0], err)
	}
	bin := r.Bin
	if bin == "" {
		bin = "git"
	}
	args := c.Args
	if c.GitDir != "" {
		args = append([]string{"--git-dir=" + c.GitDir}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = c.GitDir
	}
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Env = append(env, c.Env...)
	return cmd, secrets, cancel, nil
}

// Run runs c and returns its trimmed stdout, or an error wrapping ErrGit
// with its stderr, secrets redacted.
func (r *Runner) Run(ctx context.Context, c Cmd) (string, error) {
	cmd, secrets, cancel, err := r.command(ctx, c)
	if err != nil {
		return "", err
	}
	defer cancel()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return Finish(cmd.Run(), c.Args, &out, &errb, secrets)
}

// maxStderr bounds the stderr an error carries.
const maxStderr = 2000

// Finish turns the end of a git command run with args into its trimmed
// stdout, or into an error wrapping ErrGit and err with its stderr, with
// secrets redacted: for git run elsewhere (in a sandbox) too.
func Finish(err error, args []string, out, errb *bytes.Buffer, secrets []string) (string, error) {
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		for _, s := range secrets {
			msg = strings.ReplaceAll(msg, s, "[REDACTED]")
		}
		if len(msg) > maxStderr {
			msg = strings.ToValidUTF8(msg[:maxStderr], "") + "\n[… truncated]"
		}
		return strings.TrimSpace(out.String()), &Error{Args: args, Err: err, Stderr: msg}
	}
	return strings.TrimSpace(out.String()), nil
}

// Error is a git command that ran and failed.
type Error struct {
	// Args are the command's arguments.
	Args []string
	// Err is how it ended (an *exec.ExitError for a non-zero exit).
	Err error
	// Stderr is what it said, secrets redacted.
	Stderr string
}

func (e *Error) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// Unwrap lets errors.Is find ErrGit and the process's own error.
func (e *Error) Unwrap() []error { return []error{ErrGit, e.Err} }

// ExitCode is the exit status of a git command that ran and failed, or -1.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
