package escalator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/prloop/prloop/pkg/backoff"
	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// Payload is the JSON body posted to PRLOOP_ESCALATION_WEBHOOK_URL. Text
// makes it a valid Slack incoming-webhook message; the other fields are
// for anything else that reads it.
type Payload struct {
	Text             string          `json:"text"`
	PR               ghref.PR        `json:"pr"`
	Repository       string          `json:"repository"`
	Number           int             `json:"number"`
	URL              string          `json:"url,omitempty"`
	HeadSHA          string          `json:"head_sha,omitempty"`
	Reason           events.Reason   `json:"reason"`
	Severity         events.Severity `json:"severity"`
	Title            string          `json:"title"`
	Why              string          `json:"why"`
	FixCycle         int             `json:"fix_cycle,omitempty"`
	Detail           string          `json:"detail,omitempty"`
	LastError        string          `json:"last_error,omitempty"`
	MissingReviewers []string        `json:"missing_reviewers,omitempty"`
	Label            string          `json:"label"`
	Mentions         []string        `json:"mentions,omitempty"`
	Actions          []string        `json:"actions"`
}

// PayloadOf summarises an escalation for the webhook.
func PayloadOf(r Request, o CommentOptions, actions []string) Payload {
	info := infoOf(r.Reason)
	link := r.PR.String()
	if r.PR.URL != "" {
		link = "<" + r.PR.URL + "|" + r.PR.String() + ">"
	}
	text := fmt.Sprintf("prloop needs a human on %s: %s (%s, %s). %s", link, info.title, r.Reason, r.Severity, info.why)
	if m := mentions(o.Mentions); m != "" {
		text += " cc " + m
	}
	return Payload{
		Text: text, PR: r.PR, Repository: r.PR.RepoRef().String(), Number: r.PR.Number, URL: r.PR.URL, HeadSHA: r.HeadSHA,
		Reason: r.Reason, Severity: r.Severity, Title: info.title, Why: info.why, FixCycle: r.FixCycle,
		Detail: truncate(r.Detail, maxText), LastError: truncate(r.LastError, maxText), MissingReviewers: r.MissingReviewers,
		Label: o.Label, Mentions: o.Mentions, Actions: actions,
	}
}

// Webhook posts JSON to a URL with retries and exponential backoff.
type Webhook struct {
	// URL is secret: it appears in no error or log line.
	URL     github.Secret
	Client  *http.Client
	Retries int
	Backoff time.Duration
	Timeout time.Duration
}

// errPermanent marks an answer retrying will not change (4xx but 429).
var errPermanent = errors.New("refused")

// Post delivers body, retrying network errors, 5xx and 429 up to Retries
// times. An Idempotency-Key header lets a receiver drop repeats.
func (w Webhook) Post(ctx context.Context, key string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode webhook body: %w", err)
	}
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	// The wait doubles before each retry (pkg/backoff).
	wait := backoff.Policy{Base: w.Backoff, MaxDoublings: w.Retries}
	var last error
	for attempt := 0; attempt <= w.Retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(wait.Delay(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("webhook: %w (last attempt: %v)", ctx.Err(), last)
			case <-t.C:
			}
		}
		last = w.once(ctx, client, key, b)
		if last == nil || errors.Is(last, errPermanent) {
			break
		}
	}
	if last != nil {
		return fmt.Errorf("webhook: %w", last)
	}
	return nil
}

func (w Webhook) once(ctx context.Context, client *http.Client, key string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL.Reveal(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: bad URL", errPermanent)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "prloop")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		// url.Error repeats the URL, which is secret: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return fmt.Errorf("%w: answered %d", errPermanent, resp.StatusCode)
}
