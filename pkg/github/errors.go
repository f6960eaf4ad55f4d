package github

import (
	"errors"
	"fmt"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
)

// Sentinel errors for the GitHub answers callers act on. Every error the
// client returns for such an answer wraps exactly one of them, so callers
// write errors.Is(err, github.ErrNotFound) and never look at status codes.
var (
	// ErrNotFound is a 404: the object does not exist or the token may not see it
	// (GitHub answers 404 rather than 403 for private objects).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized is a 401: the token is missing, expired or revoked.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden is a 403 that is not a rate limit: the token lacks a
	// permission or the action is blocked (branch protection, archived repo).
	ErrForbidden = errors.New("forbidden")
	// ErrConflict is a 409, e.g. a merge whose head SHA moved.
	ErrConflict = errors.New("conflict")
	// ErrNotMergeable is a 405 from the merge endpoint: GitHub refuses the merge
	// (checks failing, review missing, merge method not allowed).
	ErrNotMergeable = errors.New("not mergeable")
	// ErrValidation is wrapped by every *ValidationError (422).
	ErrValidation = errors.New("validation failed")
	// ErrServer is a 5xx that survived the retries (or was not retried because
	// the request was a write that could have been processed).
	ErrServer = errors.New("server error")
	// ErrRateLimited is wrapped by every *RateLimitError.
	ErrRateLimited = errors.New("rate limited")
	// ErrDecode is wrapped by every *DecodeError.
	ErrDecode = errors.New("malformed response")
)

// APIError is an error answer from GitHub. It names the request (method and
// path, never headers) and wraps the sentinel for its status, if any.
type APIError struct {
	Method string
	// Path is the request path without the query.
	Path   string
	Status int
	// Message is GitHub's "message" field.
	Message string
	// DocumentationURL is GitHub's "documentation_url" field.
	DocumentationURL string
	kind             error
}

// Error names the request, the status and GitHub's message.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d", e.Method, e.Path, e.Status)
	if e.kind != nil {
		b.WriteString(" " + e.kind.Error())
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Unwrap returns the sentinel for the status (ErrNotFound …) or nil.
func (e *APIError) Unwrap() error { return e.kind }

// ValidationError is a 422 with GitHub's message and its per-field errors.
type ValidationError struct {
	APIError
	// Errors are GitHub's "errors" entries (resource, field, code, message).
	Errors []gh.Error
}

// Error adds GitHub's per-field errors to the APIError text.
func (e *ValidationError) Error() string {
	s := e.APIError.Error()
	var parts []string
	for _, fe := range e.Errors {
		switch {
		case fe.Message != "":
			parts = append(parts, fe.Message)
		case fe.Field != "" || fe.Code != "":
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s %s %s", fe.Resource, fe.Field, fe.Code)))
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}

// Unwrap returns ErrValidation.
func (e *ValidationError) Unwrap() error { return ErrValidation }

// RateLimitError is returned when GitHub rate-limited a request and waiting
// for the limit to lift would take longer than the configured cap (or than the
// context allows), or the limit was hit again after the allowed waits.
type RateLimitError struct {
	Method string
	Path   string
	// Resource is GitHub's X-RateLimit-Resource ("core", "search" …), if sent.
	Resource string
	// Secondary is true for a secondary (abuse) limit, false for the primary
	// hourly quota.
	Secondary bool
	// Reset is when the primary limit resets, if known.
	Reset time.Time
	// Wait is how long GitHub asked us to wait.
	Wait time.Duration
	// Limit is the cap that Wait exceeded (zero when the limit was hit again
	// after the allowed number of waits).
	Limit time.Duration
	// At is when the limit was met, by the client's clock: Wait counts from
	// it.
	At time.Time
}

// RetryAt is the earliest moment a retry can succeed: a second past the
// primary limit's reset, or At plus Wait; zero when neither is known.
// events.Consume waits for it in the same delivery rather than counting
// the failure toward the dead-letter stream.
func (e *RateLimitError) RetryAt() time.Time {
	switch {
	case !e.Secondary && !e.Reset.IsZero():
		return e.Reset.Add(time.Second)
	case !e.At.IsZero() && e.Wait > 0:
		return e.At.Add(e.Wait)
	}
	return time.Time{}
}

// Error names the request, the limit and how long it would have to wait.
func (e *RateLimitError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	s := fmt.Sprintf("%s %s: %s rate limit", e.Method, e.Path, kind)
	if e.Resource != "" {
		s += " (" + e.Resource + ")"
	}
	if e.Limit > 0 || e.Wait > 0 {
		s += fmt.Sprintf(": retry in %s", e.Wait.Round(time.Second))
	}
	if e.Limit > 0 {
		s += fmt.Sprintf(", longer than the %s the client may wait", e.Limit)
	}
	if !e.Reset.IsZero() {
		s += ", resets at " + e.Reset.UTC().Format(time.RFC3339)
	}
	return s
}

// Unwrap returns ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// DecodeError is a successful answer whose body could not be decoded.
type DecodeError struct {
	Method string
	Path   string
	// Route is the path template, e.g. "GET /repos/{owner}/{repo}/pulls".
	Route string
	Err   error
}

// Error names the request and route and the decoder's complaint.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode response of %s %s (%s): %v", e.Method, e.Path, e.Route, e.Err)
}

// Unwrap returns ErrDecode and the decoder's error.
func (e *DecodeError) Unwrap() []error { return []error{ErrDecode, e.Err} }

func kindForStatus(status int) error {
	switch {
	case status == 401:
		return ErrUnauthorized
	case status == 403:
		return ErrForbidden
	case status == 404:
		return ErrNotFound
	case status == 405:
		return ErrNotMergeable
	case status == 409:
		return ErrConflict
	case status == 422:
		return ErrValidation
	case status >= 500:
		return ErrServer
	}
	return nil
}
