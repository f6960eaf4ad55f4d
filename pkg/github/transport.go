package github

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prloop/prloop/pkg/backoff"
)

// Outcome classifies one HTTP attempt for counters and the Observer.
type Outcome string

// Outcomes of one attempt.
const (
	OutcomeOK           Outcome = "ok"
	OutcomeNotModified  Outcome = "not_modified" // a 304, answered from the cache
	OutcomeRedirect     Outcome = "redirect"
	OutcomeClientError  Outcome = "client_error" // 4xx other than rate limits
	OutcomeRateLimited  Outcome = "rate_limited" // 429, or 403 that is a rate limit
	OutcomeServerError  Outcome = "server_error" // 5xx
	OutcomeNetworkError Outcome = "network_error"
	OutcomeTimeout      Outcome = "timeout" // the attempt hit RequestTimeout
	// OutcomeDecodeError is a 200 whose body did not decode; it appears
	// only as the cause of a retry (RetryObserver), the attempt itself
	// having been observed as OutcomeOK.
	OutcomeDecodeError Outcome = "decode_error"
)

// Observer is told about every HTTP attempt (retries included), so metrics can
// be attached without this package knowing about them. Implementations must be
// safe for concurrent use and fast.
type Observer interface {
	OnRequest(route string, status int, outcome Outcome)
}

// RetryObserver is an Observer that also wants to know when a request is
// sent again, with the outcome of the attempt that made it necessary
// (server_error, network_error, timeout, rate_limited, decode_error).
// Observers that do not implement it see the repeated attempts only.
type RetryObserver interface {
	Observer
	OnRetry(route string, cause Outcome)
}

// RateLimit is the latest X-RateLimit-* state GitHub reported for a resource.
type RateLimit struct {
	Resource  string
	Limit     int
	Remaining int
	Used      int
	Reset     time.Time
	// Observed is when the response carrying these headers arrived.
	Observed time.Time
}

// callInfo travels in the request context from a Client method down to the
// retry layer.
type callInfo struct {
	// idempotent: repeating the request cannot act twice, so 5xx, network
	// errors and timeouts may be retried.
	idempotent bool
	// once: a single attempt, no retries and no rate-limit waits (Ping).
	once     bool
	attempts atomic.Int32
}

type callInfoKey struct{}

func withCall(ctx context.Context, idempotent bool) (context.Context, *callInfo) {
	ci := &callInfo{idempotent: idempotent}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// rateLimitRoute is GitHub's one request that never counts against a quota.
const rateLimitRoute = "GET /rate_limit"

// retryTransport is the outermost layer: per-attempt timeouts, retries with
// backoff, rate-limit waits, rate-limit bookkeeping and counters.
//
// Retry policy. GETs (and requests marked idempotent by the Client method:
// PUT merge with a SHA, PATCH of fields, POST of a reaction or of labels,
// DELETEs) are retried on 500/502/503/504, network errors and attempt
// timeouts. Other writes — creating a comment — are retried only when GitHub
// provably did not act: a rate-limit answer (GitHub rejects those before
// processing) or a failure to connect. A 5xx or timeout on such a write may
// come after GitHub posted the comment, and a duplicate comment is worse than
// an error the caller can see and retry deliberately.
type retryTransport struct {
	c    *Client
	next http.RoundTripper
}

var _ http.RoundTripper = (*retryTransport)(nil)

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	ctx := req.Context()
	route := routeOf(req.Method, c.baseURL.Path, req.URL.Path)
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	idempotent := req.Method == http.MethodGet || req.Method == http.MethodHead
	if ci != nil {
		idempotent = idempotent || ci.idempotent
	}
	log := c.log.With("route", route, "path", req.URL.Path)
	retries, waits := 0, 0
	maxRetries, maxWaits := c.maxRetries, c.maxRateLimitWaits
	if ci != nil && ci.once {
		maxRetries, maxWaits = 0, 0
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return nil, fmt.Errorf("%s %s: cannot resend a request whose body cannot be rewound", req.Method, req.URL.Path)
		}
		// GET /rate_limit costs nothing, so a spent quota is no reason to
		// hold it back.
		if route != rateLimitRoute {
			if err := t.waitForPrimary(ctx, req, route, log); err != nil {
				return nil, err
			}
		}
		if ci != nil {
			ci.attempts.Add(1)
		}
		release := func() {}
		if c.budget != nil && route != rateLimitRoute {
			r, err := c.budget.acquire(ctx, req.Method, route, priorityOf(ctx, req.Method, route))
			if err != nil {
				return nil, err
			}
			release = r
		}
		resp, err := t.attempt(ctx, req, attempt)
		release()
		c.requests.Add(1)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			outcome := OutcomeNetworkError
			if errors.Is(err, context.DeadlineExceeded) {
				outcome = OutcomeTimeout
				err = fmt.Errorf("attempt timed out after %s: %w", c.timeout, err)
			}
			c.observe(route, 0, outcome)
			if retries >= maxRetries || !(idempotent || notSent(err)) {
				return nil, err
			}
			retries++
			c.observeRetry(route, outcome)
			d := c.backoff(retries)
			log.Warn("github request failed, retrying", "error", err, "attempt", attempt, "backoff", d)
			if err := t.pause(ctx, d); err != nil {
				return nil, err
			}
			continue
		}
		c.recordRate(resp)
		status := resp.StatusCode
		if rl := t.rateLimited(req, resp); rl != nil {
			c.observe(route, status, OutcomeRateLimited)
			if rl.Wait > c.maxWait || waits >= maxWaits || exceedsDeadline(ctx, c.now(), rl.Wait) {
				if rl.Wait > c.maxWait {
					rl.Limit = max(c.maxWait, 0)
				} else if waits >= maxWaits {
					rl.Limit = 0
				}
				log.Warn("github rate limit, giving up", "secondary", rl.Secondary, "wait", rl.Wait, "status", status)
				return nil, rl
			}
			waits++
			c.rateLimitWaits.Add(1)
			c.observeRetry(route, OutcomeRateLimited)
			log.Warn("github rate limit, waiting", "secondary", rl.Secondary, "wait", rl.Wait, "status", status, "resource", rl.Resource)
			if err := t.pause(ctx, rl.Wait); err != nil {
				return nil, err
			}
			c.forgetSpent(cmp.Or(rl.Resource, resourceFor(req.URL.Path)))
			continue
		}
		switch {
		case resp.Header.Get(CacheHeader) == CacheRevalidated:
			c.notModified.Add(1)
			c.observe(route, http.StatusNotModified, OutcomeNotModified)
		case status >= 500:
			c.observe(route, status, OutcomeServerError)
			if retryableStatus(status) && idempotent && retries < maxRetries {
				retries++
				c.observeRetry(route, OutcomeServerError)
				d := c.backoff(retries)
				if ra, ok := retryAfter(resp.Header, c.now()); ok && ra > d && ra <= c.maxWait {
					d = ra
				}
				log.Warn("github server error, retrying", "status", status, "attempt", attempt, "backoff", d)
				if err := t.pause(ctx, d); err != nil {
					return nil, err
				}
				continue
			}
		case status >= 400:
			c.observe(route, status, OutcomeClientError)
		case status >= 300:
			c.observe(route, status, OutcomeRedirect)
		default:
			c.observe(route, status, OutcomeOK)
		}
		// go-github refuses to send anything until X-RateLimit-Reset once it
		// has seen Remaining: 0, without waiting; this layer waits instead,
		// so hide the reset from it.
		if resp.Header.Get("X-RateLimit-Remaining") == "0" {
			resp.Header.Del("X-RateLimit-Reset")
		}
		return resp, nil
	}
}

// pause sleeps (through Options.Sleep) and counts the retry.
func (t *retryTransport) pause(ctx context.Context, d time.Duration) error {
	t.c.retries.Add(1)
	return t.c.sleep(ctx, d)
}

// attempt sends one try with its own timeout and reads the whole body before
// the timeout's context is released.
func (t *retryTransport) attempt(ctx context.Context, req *http.Request, n int) (*http.Response, error) {
	actx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	r := req.Clone(actx)
	if n > 1 && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
	if resp.Header.Get(CacheHeader) == CacheRevalidated {
		return resp, nil // the body is in memory: no read can time out
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, context.DeadlineExceeded
		}
		return nil, fmt.Errorf("read response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// waitForPrimary sleeps before sending when the last answer for this resource
// said the primary quota is spent and has not reset yet, rather than spending
// a request to be told so.
func (t *retryTransport) waitForPrimary(ctx context.Context, req *http.Request, route string, log *slog.Logger) error {
	c := t.c
	res := resourceFor(req.URL.Path)
	rl, ok := c.rateLimit(res)
	if !ok || rl.Remaining != 0 || rl.Reset.IsZero() {
		return nil
	}
	now := c.now()
	if !now.Before(rl.Reset) {
		return nil
	}
	wait := rl.Reset.Sub(now) + time.Second
	if wait > c.maxWait || exceedsDeadline(ctx, now, wait) {
		return &RateLimitError{Method: req.Method, Path: req.URL.Path, Resource: res, Reset: rl.Reset, Wait: wait, Limit: max(c.maxWait, 0), At: now}
	}
	c.rateLimitWaits.Add(1)
	log.Warn("github primary rate limit spent, waiting for reset", "resource", res, "wait", wait)
	if err := c.sleep(ctx, wait); err != nil {
		return err
	}
	c.forgetSpent(res)
	return nil
}

// rateLimited recognises GitHub's rate-limit answers: any 429; a 403 with
// X-RateLimit-Remaining: 0 (primary); a 403 whose message or documentation
// URL says secondary rate limit. Any other 403 is a permissions problem and is
// not retried.
func (t *retryTransport) rateLimited(req *http.Request, resp *http.Response) *RateLimitError {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	h := resp.Header
	primary := h.Get("X-RateLimit-Remaining") == "0"
	secondary := false
	if !primary {
		var body struct {
			Message          string `json:"message"`
			DocumentationURL string `json:"documentation_url"`
		}
		if b, err := peekBody(resp); err == nil {
			_ = json.Unmarshal(b, &body)
		}
		msg := strings.ToLower(body.Message)
		// Only these signals: a permissions 403 (even "blocked due to
		// abuse") must never be waited on as if it were a limit.
		secondary = strings.Contains(msg, "secondary rate limit") ||
			strings.HasSuffix(body.DocumentationURL, "secondary-rate-limits") || strings.HasSuffix(body.DocumentationURL, "#abuse-rate-limits")
	}
	if resp.StatusCode == http.StatusForbidden && !primary && !secondary {
		return nil
	}
	now := t.c.now()
	e := &RateLimitError{Method: req.Method, Path: req.URL.Path, Resource: h.Get("X-RateLimit-Resource"), Secondary: !primary, At: now}
	if reset, ok := parseUnix(h.Get("X-RateLimit-Reset")); ok {
		e.Reset = reset
	}
	switch ra, ok := retryAfter(h, now); {
	case ok:
		e.Wait = ra
	case primary && !e.Reset.IsZero():
		e.Wait = max(e.Reset.Sub(now)+time.Second, time.Second)
	default:
		// GitHub: with no Retry-After, wait at least a minute.
		e.Wait = time.Minute
	}
	return e
}

func peekBody(resp *http.Response) ([]byte, error) {
	b, err := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

func retryableStatus(s int) bool {
	return s == http.StatusInternalServerError || s == http.StatusBadGateway ||
		s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout
}

// notSent reports errors that prove the request never reached GitHub.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func exceedsDeadline(ctx context.Context, now time.Time, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && now.Add(wait).After(dl)
}

// retryAfter parses Retry-After (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func parseUnix(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// resourceFor guesses the rate-limit resource of a path before GitHub says.
func resourceFor(path string) string {
	switch {
	case strings.Contains(path, "/search/"):
		return "search"
	case strings.HasSuffix(path, "/graphql"):
		return "graphql"
	}
	return "core"
}

// DefaultBackoff is the wait before retry n (1-based): 1 s, 2 s, 4 s, 8 s,
// 16 s (then 16 s), each plus up to 25 % random jitter so that many clients
// failing together do not retry together.
func DefaultBackoff(n int) time.Duration { return defaultBackoff.Delay(n) }

// defaultBackoff is DefaultBackoff's policy.
var defaultBackoff = backoff.Policy{Base: time.Second, MaxDoublings: 4, Jitter: 0.25}

// tokenTransport adds the token to requests for the API host only, so a
// redirect elsewhere (archive downloads, a hostile Link header) never carries it.
type tokenTransport struct {
	token Secret
	host  string
	next  http.RoundTripper
}

var _ http.RoundTripper = (*tokenTransport)(nil)

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.host) {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+t.token.Reveal())
	return t.next.RoundTrip(r)
}

// String keeps the token out of %v.
func (t *tokenTransport) String() string { return "github.tokenTransport{host: " + t.host + "}" }

// hostGuard sends requests for the API host through auth and others around it.
type hostGuard struct {
	host  string
	auth  http.RoundTripper
	plain http.RoundTripper
}

func (g *hostGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.EqualFold(req.URL.Host, g.host) {
		return g.auth.RoundTrip(req)
	}
	return g.plain.RoundTrip(req)
}

// routeCounters counts attempts per route and outcome.
type routeCounters struct {
	mu sync.Mutex
	m  map[RouteOutcome]int64
}

func (r *routeCounters) add(k RouteOutcome) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[RouteOutcome]int64{}
	}
	r.m[k]++
	r.mu.Unlock()
}

func (r *routeCounters) snapshot() map[RouteOutcome]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.m)
}
