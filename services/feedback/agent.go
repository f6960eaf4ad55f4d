package feedback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prloop/prloop/pkg/sandbox"
)

// secretNames are environment variables that carry GitHub or prloop
// credentials; neither the agent nor prloop's git processes get them.
var secretNames = map[string]bool{
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "GH_ENTERPRISE_TOKEN": true, "GITHUB_ENTERPRISE_TOKEN": true,
	"PRLOOP_WEBHOOK_SECRET": true, "PRLOOP_NATS_CREDS_FILE": true,
	"GIT_ASKPASS": true, "SSH_ASKPASS": true, "GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
	// Tracing could print what prloop's git sends.
	"GIT_TRACE": true, "GIT_TRACE_CURL": true, "GIT_TRACE_PACKET": true, "GIT_CURL_VERBOSE": true, "GIT_TRACE_REDACT": true,
}

// secretPrefixes are prefixes of such variables: the GitHub client's
// settings (App key path and friends) and git configuration injected by
// whoever started prloop.
var secretPrefixes = []string{"PRLOOP_GITHUB_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}

// SafeEnv returns environ without GitHub credentials: the variables above,
// any whose value contains one of the secrets (the token itself, wherever
// someone put it), and PRLOOP_PROMPT_FILE, which the caller sets.
func SafeEnv(environ []string, secrets ...string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if secretNames[name] || name == "PRLOOP_PROMPT_FILE" {
			continue
		}
		if hasAnyPrefix(name, secretPrefixes) || containsAny(value, secrets) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if len(sub) >= 8 && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// sandboxAgent runs the coding agent command in the sandbox.
type sandboxAgent struct {
	// Spec is the preset's command line, or the command sh -c runs.
	Spec agentSpec
	// Prices price a preset's tokens (PRLOOP_AGENT_PRICES);
	// TranscriptMaxBytes caps each run's transcript.
	Prices             priceTable
	TranscriptMaxBytes int64
	// Model is PRLOOP_AGENT_MODEL, for pricing a stream that names none.
	Model string
	// Timeout bounds one run; KillGrace separates SIGTERM from SIGKILL.
	Timeout, KillGrace time.Duration
	// LogMaxBytes caps the kept output.
	LogMaxBytes int64
	// Sandbox is where it runs; it adds the paths of
	// PRLOOP_AGENT_READONLY_PATHS and PRLOOP_AGENT_WRITABLE_PATHS.
	Sandbox Sandbox
}

// AgentRun describes one run.
type AgentRun struct {
	Dir        string
	Prompt     string
	PromptFile string
	LogFile    string
	// Env is the complete environment, without credentials.
	Env []string
	// Timeout, when positive and shorter than the Agent's, bounds this run
	// (what is left of the PR's agent budget).
	Timeout time.Duration
	// Transcript is where a preset's stream is kept (JSONL).
	Transcript string
	// Check, when set, is asked after each line of a preset's stream: an
	// error (a *BudgetError) stops the run, and Run returns it.
	Check func(RunStats) error
	// Stats, when set, receives what the stream said (a preset's run).
	Stats *RunStats
}

// ErrAgentTimeout is wrapped by Run's error when the agent ran out of time.
var ErrAgentTimeout = errors.New("agent timed out")

// ErrAgentNotRunnable is wrapped by Run's error when the agent's shell
// exited 126 (found but cannot be executed) or 127 (not found): another
// run cannot help, so none is made.
var ErrAgentNotRunnable = errors.New("the agent command could not be run")

// Bounds of the tail of the agent's stderr that an error quotes.
const (
	stderrTailLines = 20
	stderrTailBytes = 2048
)

// Run runs the agent in the sandbox with its worktree writable, the prompt
// on stdin and in PromptFile (read-only, outside the worktree), its output
// in LogFile (capped). When it times out or ctx is cancelled, it gets
// SIGTERM, then SIGKILL after KillGrace; when Run returns, the sandbox
// has killed every process the agent started.
func (a *sandboxAgent) Run(ctx context.Context, r AgentRun) error {
	if err := os.WriteFile(r.PromptFile, []byte(r.Prompt), 0o600); err != nil {
		return fmt.Errorf("write prompt file: %w", err)
	}
	logf, err := os.OpenFile(r.LogFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create agent log: %w", err)
	}
	defer logf.Close()
	out := &cappedWriter{w: logf, left: a.LogMaxBytes}

	timeout := a.Timeout
	if r.Timeout > 0 && r.Timeout < timeout {
		timeout = r.Timeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tail := &tailWriter{max: stderrTailBytes}
	var stdout io.Writer = out
	// A budget stops the run through its own cause, told apart from a
	// timeout and from ctx's end.
	bctx, stop := context.WithCancelCause(tctx)
	defer stop(nil)
	var stream *streamWriter
	if a.Spec.Preset != PresetCommand {
		tf, closeT, err := openTranscript(r.Transcript, a.TranscriptMaxBytes)
		if err != nil {
			return err
		}
		defer closeT()
		stream = &streamWriter{p: newStreamParser(a.Spec.Preset, a.Prices, a.Model), check: r.Check, stop: stop}
		stdout = io.MultiWriter(tf, stream)
	}
	runErr := a.Sandbox.Run(bctx, sandbox.Cmd{
		Args: a.Spec.argv(), Dir: r.Dir,
		Env:      append(append(append([]string(nil), r.Env...), a.Spec.Env...), "PRLOOP_PROMPT_FILE="+r.PromptFile),
		ReadOnly: []string{filepath.Dir(r.PromptFile)},
		Stdin:    strings.NewReader(r.Prompt), Stdout: stdout, Stderr: io.MultiWriter(out, tail), KillGrace: a.KillGrace,
	})
	fmt.Fprintf(out, "\n[prloop: agent exited: %v]\n", exitText(runErr))
	if stream != nil {
		stream.flush()
		st := stream.Stats()
		fmt.Fprintf(out, "[prloop: %s stream: %d turns, $%.4f, %d lines (transcript: %s)]\n", st.Preset, st.Turns, st.CostUSD, st.Lines, filepath.Base(r.Transcript))
		if r.Stats != nil {
			*r.Stats = st
		}
	}
	if out.dropped > 0 {
		fmt.Fprintf(logf, "[prloop: %d bytes of output dropped over PRLOOP_AGENT_LOG_MAX_BYTES]\n", out.dropped)
	}
	var budgetErr *BudgetError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("agent stopped: %w", context.Cause(ctx))
	case errors.As(context.Cause(bctx), &budgetErr) && tctx.Err() == nil:
		return fmt.Errorf("agent stopped: %w", budgetErr)
	case tctx.Err() != nil:
		return fmt.Errorf("%w after %s", ErrAgentTimeout, timeout)
	case notRunnable(runErr):
		return fmt.Errorf("agent failed: %s: %w%s", exitText(runErr), ErrAgentNotRunnable, quoteTail(tail.String()))
	case runErr != nil && !errors.Is(runErr, exec.ErrWaitDelay):
		return fmt.Errorf("agent failed: %s", exitText(runErr))
	}
	return nil
}

// notRunnable reports whether the shell said it could not run the
// command: exit status 126 (not executable) or 127 (not found).
func notRunnable(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && (ee.ExitCode() == 126 || ee.ExitCode() == 127)
}

// quoteTail is what an error says of the end of the agent's stderr: its
// visible text (Sanitize), the last stderrTailLines lines and
// stderrTailBytes bytes of it.
func quoteTail(s string) string {
	s = Sanitize(s)
	lines := strings.Split(s, "\n")
	s = strings.Join(lines[max(0, len(lines)-stderrTailLines):], "\n")
	if len(s) > stderrTailBytes {
		cut := len(s) - stderrTailBytes
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = "[…]" + s[cut:]
	}
	if s == "" {
		return "; it wrote nothing to stderr"
	}
	return "; its stderr ends with:\n" + s
}

func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	}
	return err.Error()
}

// tailWriter keeps the last max bytes written (and a few more, until the
// next write trims them).
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p[max(0, len(p)-t.max):]...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// cappedWriter keeps the first left bytes and counts the rest.
type cappedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	left    int64
	dropped int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(int64(len(p)), max(0, c.left))
	if keep > 0 {
		if _, err := c.w.Write(p[:keep]); err != nil {
			return 0, err
		}
		c.left -= keep
	}
	c.dropped += int64(len(p)) - keep
	return len(p), nil
}
