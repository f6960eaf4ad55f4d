package feedback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prloop/prloop/pkg/events"
)

// The agents' structured output, as prloop reads it: Claude Code's
// stream-json (one JSON object a line: system, assistant, user and a final
// result) and Codex's exec --json (thread, turn and item events). What is
// read is counted as the run goes, so that a budget stops the run at the
// turn that crosses it rather than trusting the CLI's own caps.

// RunStats is what a preset's stream said of one run.
type RunStats struct {
	Preset Preset
	// Turns counts the model's turns: Claude Code's assistant messages
	// (num_turns of its result, when larger); Codex's completed tool uses
	// and messages, since its JSONL reports one turn for a whole exec.
	Turns int
	// CostUSD is the run's cost: the CLI's own total_cost_usd once its
	// result says it (CostReported), tokens × PRLOOP_AGENT_PRICES before
	// that and for a CLI that reports only tokens.
	CostUSD      float64
	CostReported bool
	// Token counts, over the run.
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	// Model is the model the stream names.
	Model string
	// Tools counts tool uses by tool name; Denials are the tools whose use
	// was denied (Claude Code's permission_denials, Codex's declined
	// commands).
	Tools   map[string]int
	Denials []string
	// Final is the agent's last message; Subtype, IsError and SessionID
	// are from Claude Code's result, Errors from Codex's error and
	// turn.failed events.
	Final     string
	Subtype   string
	IsError   bool
	SessionID string
	Errors    []string
	// Lines counts the stream's lines; Unparsed those that were not JSON.
	Lines, Unparsed int
}

// Summary is the run's summary for the events (events.AgentRunSummary),
// with the final message cut to maxFinal bytes.
func (s RunStats) Summary(maxFinal int) *events.AgentRunSummary {
	tools := slices.Sorted(maps.Keys(s.Tools))
	for i, t := range tools {
		tools[i] = fmt.Sprintf("%s×%d", t, s.Tools[t])
	}
	return &events.AgentRunSummary{
		Preset: string(s.Preset), Turns: s.Turns, CostUSD: roundCents(s.CostUSD), CostEstimated: !s.CostReported && s.CostUSD > 0,
		InputTokens: s.InputTokens + s.CacheReadTokens + s.CacheWriteTokens, OutputTokens: s.OutputTokens,
		Tools: tools, Denials: slices.Compact(slices.Sorted(slices.Values(s.Denials))), Final: truncate(Sanitize(s.Final), maxFinal),
	}
}

// roundCents keeps four decimals: what an event and a comment show.
func roundCents(v float64) float64 { return float64(int64(v*1e4+0.5)) / 1e4 }

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "[…]"
}

// streamParser reads a preset's stream line by line and keeps RunStats.
type streamParser struct {
	preset Preset
	prices priceTable
	stats  RunStats
	// usage is Claude Code's usage per assistant message id: a message
	// streamed in several lines repeats its usage.
	usage map[string]tokenUsage
	// order keeps the message ids in the order they came.
	order []string
	// codexUsage is Codex's usage, summed over turn.completed events.
	codexUsage tokenUsage
}

// tokenUsage is one message's tokens.
type tokenUsage struct {
	Input       int64 `json:"input_tokens"`
	Output      int64 `json:"output_tokens"`
	CacheRead   int64 `json:"cache_read_input_tokens"`
	CacheWrite  int64 `json:"cache_creation_input_tokens"`
	CachedInput int64 `json:"cached_input_tokens"` // Codex: part of Input
	model       string
}

// newStreamParser reads p's stream; model is the configured model
// (PRLOOP_AGENT_MODEL), which prices the tokens of a stream that names
// none (Codex's).
func newStreamParser(p Preset, prices priceTable, model string) *streamParser {
	return &streamParser{preset: p, prices: prices, stats: RunStats{Preset: p, Model: model, Tools: map[string]int{}}, usage: map[string]tokenUsage{}}
}

// claudeLine is the part of a Claude Code stream-json line prloop reads.
type claudeLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Message   *struct {
		ID      string     `json:"id"`
		Model   string     `json:"model"`
		Usage   tokenUsage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			Name string `json:"name"`
		} `json:"content"`
	} `json:"message"`
	// The result's fields.
	IsError           bool        `json:"is_error"`
	NumTurns          int         `json:"num_turns"`
	Result            string      `json:"result"`
	TotalCostUSD      *float64    `json:"total_cost_usd"`
	Usage             *tokenUsage `json:"usage"`
	PermissionDenials []struct {
		ToolName string `json:"tool_name"`
	} `json:"permission_denials"`
}

// codexLine is the part of a Codex exec --json line prloop reads.
type codexLine struct {
	Type     string      `json:"type"`
	ThreadID string      `json:"thread_id"`
	Message  string      `json:"message"`
	Usage    *tokenUsage `json:"usage"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item *struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Command string `json:"command"`
		Status  string `json:"status"`
		Tool    string `json:"tool"`
	} `json:"item"`
}

// line reads one line of the stream.
func (p *streamParser) line(b []byte) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return
	}
	p.stats.Lines++
	var err error
	switch p.preset {
	case PresetClaudeCode:
		err = p.claude(b)
	case PresetCodex:
		err = p.codex(b)
	}
	if err != nil {
		p.stats.Unparsed++
	}
}

func (p *streamParser) claude(b []byte) error {
	var l claudeLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	s := &p.stats
	if l.SessionID != "" {
		s.SessionID = l.SessionID
	}
	switch l.Type {
	case "system":
		if l.Model != "" {
			s.Model = l.Model
		}
	case "assistant":
		if l.Message == nil {
			return nil
		}
		m := l.Message
		id := m.ID
		if id == "" {
			id = fmt.Sprintf("line-%d", s.Lines)
		}
		if _, seen := p.usage[id]; !seen {
			p.order = append(p.order, id)
		}
		u := m.Usage
		u.model = m.Model
		if u.model == "" {
			u.model = s.Model
		}
		p.usage[id] = u
		for _, c := range m.Content {
			switch c.Type {
			case "tool_use":
				s.Tools[c.Name]++
			case "text":
				if strings.TrimSpace(c.Text) != "" {
					s.Final = c.Text
				}
			}
		}
		s.Turns = max(s.Turns, len(p.order))
		if !s.CostReported {
			p.claudeTotals()
		}
	case "result":
		s.Subtype, s.IsError = l.Subtype, l.IsError
		s.Turns = max(s.Turns, l.NumTurns)
		if l.Result != "" {
			s.Final = l.Result
		}
		for _, d := range l.PermissionDenials {
			s.Denials = append(s.Denials, d.ToolName)
		}
		if l.Usage != nil {
			u := *l.Usage
			s.InputTokens, s.OutputTokens, s.CacheReadTokens, s.CacheWriteTokens = u.Input, u.Output, u.CacheRead, u.CacheWrite
		}
		if l.TotalCostUSD != nil {
			s.CostUSD, s.CostReported = *l.TotalCostUSD, true
		}
	}
	return nil
}

// claudeTotals sums the messages' tokens and prices them.
func (p *streamParser) claudeTotals() {
	s := &p.stats
	s.InputTokens, s.OutputTokens, s.CacheReadTokens, s.CacheWriteTokens, s.CostUSD = 0, 0, 0, 0, 0
	for _, id := range p.order {
		u := p.usage[id]
		s.InputTokens += u.Input
		s.OutputTokens += u.Output
		s.CacheReadTokens += u.CacheRead
		s.CacheWriteTokens += u.CacheWrite
		s.CostUSD += p.prices.cost(u.model, u)
	}
}

func (p *streamParser) codex(b []byte) error {
	var l codexLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	s := &p.stats
	switch l.Type {
	case "thread.started":
		s.SessionID = l.ThreadID
	case "item.completed":
		if l.Item == nil {
			return nil
		}
		switch it := l.Item; it.Type {
		case "agent_message":
			s.Final = it.Text
			s.Turns++
		case "command_execution", "file_change", "mcp_tool_call", "web_search":
			name := it.Type
			if it.Tool != "" {
				name = it.Tool
			}
			s.Tools[name]++
			s.Turns++
			if it.Status == "declined" {
				s.Denials = append(s.Denials, name)
			}
		}
	case "turn.completed":
		if l.Usage != nil {
			u := &p.codexUsage
			u.Input += l.Usage.Input
			u.CachedInput += l.Usage.CachedInput
			u.Output += l.Usage.Output
			s.InputTokens, s.CacheReadTokens, s.OutputTokens = u.Input-u.CachedInput, u.CachedInput, u.Output
			s.CostUSD = p.prices.cost(s.Model, tokenUsage{Input: u.Input - u.CachedInput, CacheRead: u.CachedInput, Output: u.Output})
		}
	case "turn.failed":
		s.IsError = true
		if l.Error != nil {
			s.Errors = append(s.Errors, l.Error.Message)
		}
	case "error":
		s.Errors = append(s.Errors, l.Message)
	}
	return nil
}

// defaultTranscriptMaxBytes is PRLOOP_AGENT_TRANSCRIPT_MAX_BYTES's
// default, for a Config built without envconfig's defaults.
const defaultTranscriptMaxBytes = 4 << 20

// maxStreamLine bounds a line the parser reads; a longer one (a huge tool
// result) is kept in the transcript, within its cap, but not parsed.
const maxStreamLine = 4 << 20

// streamWriter splits what a preset writes on stdout into lines for the
// parser, and calls check after each: a non-nil error stops the run.
type streamWriter struct {
	mu       sync.Mutex
	p        *streamParser
	buf      []byte
	skipping bool
	check    func(RunStats) error
	stop     func(error)
	stopped  bool
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !w.skipping {
				w.buf = append(w.buf, b...)
				if len(w.buf) > maxStreamLine {
					w.buf, w.skipping = w.buf[:0], true
				}
			}
			break
		}
		if !w.skipping && len(w.buf)+i <= maxStreamLine {
			w.buf = append(w.buf, b[:i]...)
			w.p.line(w.buf)
			w.judge()
		}
		w.buf, w.skipping = w.buf[:0], false
		b = b[i+1:]
	}
	return n, nil
}

// flush reads a last line without a newline.
func (w *streamWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 && !w.skipping {
		w.p.line(w.buf)
		w.judge()
	}
	w.buf = w.buf[:0]
}

func (w *streamWriter) judge() {
	if w.check == nil || w.stopped {
		return
	}
	if err := w.check(w.p.stats); err != nil {
		w.stopped = true
		w.stop(err)
	}
}

// Stats returns a copy of the stats so far.
func (w *streamWriter) Stats() RunStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.p.stats
	s.Tools = maps.Clone(s.Tools)
	s.Denials = slices.Clone(s.Denials)
	s.Errors = slices.Clone(s.Errors)
	return s
}

// openTranscript creates a run's transcript file, keeping at most max
// bytes of the stream and noting what it dropped when closed.
func openTranscript(name string, max int64) (io.Writer, func(), error) {
	if name == "" {
		return io.Discard, func() {}, nil
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("create agent transcript: %w", err)
	}
	w := &cappedWriter{w: f, left: max}
	return w, func() {
		if w.dropped > 0 {
			fmt.Fprintf(f, "\n{\"type\":\"prloop.truncated\",\"dropped_bytes\":%d}\n", w.dropped)
		}
		f.Close()
	}, nil
}
