package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// hookPath is where the escalation webhook is delivered, on the
// simulator's address.
const hookPath = "/chaos/escalation-webhook"

// hooks wraps the simulator's handler to see the requests that open a
// dangerous window (a merge call, an escalation's webhook) and tells the
// fault injector at once, so it can kill the process making them.
type hooks struct {
	windows chan string // "merge", "escalation"

	mu       sync.Mutex
	webhooks []string // bodies delivered
}

func newHooks() *hooks { return &hooks{windows: make(chan string, 64)} }

func (h *hooks) signal(window string) {
	select {
	case h.windows <- window:
	default: // the injector is busy; windows are plentiful
	}
}

func (h *hooks) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == hookPath {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			h.mu.Lock()
			h.webhooks = append(h.webhooks, string(body))
			h.mu.Unlock()
			h.signal("escalation")
			// A slow endpoint keeps the escalator inside its webhook call
			// while the injector aims at it.
			time.Sleep(300 * time.Millisecond)
			w.WriteHeader(http.StatusOK)
			return
		}
		merge := r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/merge")
		next.ServeHTTP(w, r)
		if merge {
			h.signal("merge")
		}
	})
}

func (h *hooks) webhookBodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.webhooks...)
}
