package feedback_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scripted model servers for the real coding agents' CLIs: the Anthropic
// Messages API (Claude Code) and the OpenAI Responses API (Codex), both
// streaming, each answering the agent's requests with the next turn of a
// script, offline. They record what the agent sent: the prompt, the
// results of its tools, and every request's headers and body (a leak of
// prloop's credentials is found by searching them).

// turn is what the model says in one response: text, and tool calls.
type turn struct {
	text  string
	tools []toolCall
}

// toolCall is one tool call of a turn.
type toolCall struct {
	name  string
	input map[string]any
}

// script gives the n-th (from 1) response of the agent's conversation;
// cwd is the agent's working directory as its request says it.
type script func(n int, cwd string) turn

// modelSim is a scripted model server.
type modelSim struct {
	t   testing.TB
	srv *httptest.Server
	// usage is the tokens each response reports: input and output.
	inTokens, outTokens int

	mu sync.Mutex
	// calls counts the responses of the agent's conversation; raw is
	// every request as received; prompts the first user text of each
	// conversation request; results the tool results sent back.
	calls   int
	raw     []string
	prompts []string
	results []string
	script  script
}

// Calls is how many conversation turns the agent asked for.
func (m *modelSim) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Seen returns everything the agent sent, headers and bodies.
func (m *modelSim) Seen() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.raw, "\n")
}

// Results returns the tool results the agent sent back.
func (m *modelSim) Results() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.results, "\n")
}

// Prompts returns the prompts the agent sent.
func (m *modelSim) Prompts() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.prompts, "\n")
}

func newModelSim(t testing.TB, s script, handler func(m *modelSim) http.HandlerFunc) *modelSim {
	t.Helper()
	m := &modelSim{t: t, script: s, inTokens: 1000, outTokens: 100}
	m.srv = httptest.NewServer(handler(m))
	t.Cleanup(m.srv.Close)
	return m
}

// record keeps a request and returns its body.
func (m *modelSim) record(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	var h strings.Builder
	for k, v := range r.Header {
		fmt.Fprintf(&h, "%s: %s\n", k, strings.Join(v, ","))
	}
	m.mu.Lock()
	m.raw = append(m.raw, r.Method+" "+r.URL.String()+"\n"+h.String()+string(body))
	m.mu.Unlock()
	return body
}

// next counts a conversation turn and returns the script's answer.
func (m *modelSim) next(cwd, prompt string, results []string) turn {
	m.mu.Lock()
	m.calls++
	n := m.calls
	if prompt != "" && n == 1 {
		m.prompts = append(m.prompts, prompt)
	}
	m.results = append(m.results, results...)
	m.mu.Unlock()
	return m.script(n, cwd)
}

// sse writes one server-sent event.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// cwdRE finds the working directory in an agent's system prompt.
var cwdRE = regexp.MustCompile(`(?i)working directory:\s*(/[^\s"<]+)`)

// textOf flattens a message content (a string, or blocks) to its text,
// and returns its tool results.
func textOf(content any) (text string, results []string) {
	switch c := content.(type) {
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		for _, x := range c {
			blk, _ := x.(map[string]any)
			switch blk["type"] {
			case "text", "input_text":
				fmt.Fprint(&b, blk["text"], "\n")
			case "tool_result":
				t, _ := textOf(blk["content"])
				results = append(results, fmt.Sprintf("%v %s", blk["is_error"], t))
			}
		}
		return b.String(), results
	}
	return "", nil
}

// anthropicSim serves the Anthropic Messages API (POST /v1/messages with
// "stream": true, answered as server-sent events: message_start,
// content_block_start/delta/stop, message_delta, message_stop). Requests
// without tools are the CLI's side questions (titles and the like) and get
// a short text that is no turn of the conversation.
func anthropicSim(t testing.TB, s script) *modelSim {
	return newModelSim(t, s, func(m *modelSim) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body := m.record(r)
			if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
				http.NotFound(w, r)
				return
			}
			var req struct {
				Tools    []any `json:"tools"`
				System   any   `json:"system"`
				Messages []struct {
					Role    string `json:"role"`
					Content any    `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			tr := turn{text: "ok"}
			if len(req.Tools) > 0 {
				sys, _ := textOf(req.System)
				if s, ok := req.System.(string); ok {
					sys = s
				}
				cwd := ""
				if mm := cwdRE.FindStringSubmatch(sys); mm != nil {
					cwd = mm[1]
				}
				var prompt string
				var results []string
				if n := len(req.Messages); n > 0 {
					// The prompt is the conversation's first user text
					// (after any context the CLI puts before it).
					for _, msg := range req.Messages {
						if msg.Role == "user" {
							if txt, res := textOf(msg.Content); len(res) == 0 {
								prompt += txt
							} else {
								break
							}
						}
					}
					_, results = textOf(req.Messages[n-1].Content)
				}
				tr = m.next(cwd, prompt, results)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			id := fmt.Sprintf("msg_%d_%d", m.Calls(), len(req.Messages))
			sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
				"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": []any{},
				"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": m.inTokens, "output_tokens": 1},
			}})
			i := 0
			if tr.text != "" {
				sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": tr.text}})
				sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
				i++
			}
			for k, tc := range tr.tools {
				in, _ := json.Marshal(tc.input)
				sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{
					"type": "tool_use", "id": fmt.Sprintf("toolu_%s_%d", id, k), "name": tc.name, "input": map[string]any{}}})
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
				sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
				i++
			}
			stop := "end_turn"
			if len(tr.tools) > 0 {
				stop = "tool_use"
			}
			sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
				"usage": map[string]any{"output_tokens": m.outTokens}})
			sse(w, "message_stop", map[string]any{"type": "message_stop"})
		}
	})
}

// agentBinDir is where the real agents' CLIs are installed
// (PRLOOP_TEST_AGENT_BIN_DIR, which .ci/run sets; the repository's
// .ci/agents/node_modules/.bin otherwise), and the directories the sandbox
// must show for them to run: the whole node_modules, which holds each
// CLI's native binary in a platform package. A missing CLI skips the test,
// except where PRLOOP_TEST_REQUIRE_AGENTS=1 (CI).
func agentBinDir(t testing.TB, bin string) (dir string, readOnly []string) {
	t.Helper()
	dir = os.Getenv("PRLOOP_TEST_AGENT_BIN_DIR")
	if dir == "" {
		d, err := filepath.Abs(filepath.Join("..", "..", ".ci", "agents", "node_modules", ".bin"))
		require.NoError(t, err)
		dir = d
	}
	if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
		if os.Getenv("PRLOOP_TEST_REQUIRE_AGENTS") == "1" {
			t.Fatalf("the agent CLI %s is not installed in %s (PRLOOP_TEST_REQUIRE_AGENTS=1): %v", bin, dir, err)
		}
		t.Skipf("the agent CLI %s is not installed in %s (npm ci in .ci/agents, or set PRLOOP_TEST_AGENT_BIN_DIR)", bin, dir)
	}
	return dir, []string{filepath.Dir(dir)}
}

// findFiles lists the files under root whose names end with suffix.
func findFiles(t *testing.T, root, suffix string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

// cwdTagRE finds the working directory in Codex's environment context.
var cwdTagRE = regexp.MustCompile(`<cwd>([^<]+)</cwd>`)

// openAISim serves the OpenAI Responses API (POST /v1/responses with
// "stream": true, answered as server-sent events: response.created, one
// response.output_item.done per message or function call, and
// response.completed with the usage). Tool calls are function calls of
// the tool named in the script (Codex's exec_command).
func openAISim(t testing.TB, s script) *modelSim {
	return newModelSim(t, s, func(m *modelSim) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body := m.record(r)
			if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
				http.NotFound(w, r)
				return
			}
			var req struct {
				Input []map[string]any `json:"input"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var cwd, prompt string
			var results []string
			for _, it := range req.Input {
				switch it["type"] {
				case "function_call_output":
					results = append(results, fmt.Sprint(it["output"]))
				case "message", nil:
					if it["role"] != "user" {
						continue
					}
					txt, _ := textOf(it["content"])
					if mm := cwdTagRE.FindStringSubmatch(txt); mm != nil {
						cwd = mm[1]
						continue
					}
					prompt += txt
				}
			}
			tr := m.next(cwd, prompt, results)
			w.Header().Set("Content-Type", "text/event-stream")
			id := fmt.Sprintf("resp_%d", m.Calls())
			sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
			idx := 0
			if tr.text != "" {
				sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": map[string]any{
					"type": "message", "role": "assistant", "id": id + "_msg", "content": []any{map[string]any{"type": "output_text", "text": tr.text}}}})
				idx++
			}
			for k, tc := range tr.tools {
				args, _ := json.Marshal(tc.input)
				sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": map[string]any{
					"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", id, k), "call_id": fmt.Sprintf("call_%s_%d", id, k),
					"name": tc.name, "arguments": string(args)}})
				idx++
			}
			sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "usage": map[string]any{
				"input_tokens": m.inTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": m.outTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": m.inTokens + m.outTokens,
			}}})
		}
	})
}
