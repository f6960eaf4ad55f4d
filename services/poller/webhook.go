package poller

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// maxWebhookBody is GitHub's own cap on a webhook payload.
const maxWebhookBody = 25 << 20

// Kicker triggers evaluations; *Service implements it.
type Kicker interface {
	Kick(pr ghref.PR)
	KickHead(repo ghref.Repo, sha string)
}

var _ Kicker = (*Service)(nil)

// WebhookHandler serves POST /webhook. It verifies X-Hub-Signature-256 in
// constant time (bad or missing → 401, nothing changes), and for the events
// prloop cares about triggers an immediate evaluation of the PR. Webhooks
// only trigger; the evaluation reads GitHub and decides, so a forged or
// replayed payload can at most cause an extra evaluation.
func WebhookHandler(secret []byte, k Kicker, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
		if err != nil || len(body) > maxWebhookBody {
			http.Error(w, "payload unreadable or too large", http.StatusRequestEntityTooLarge)
			return
		}
		if !validSignature(secret, body, r.Header.Get("X-Hub-Signature-256")) {
			log.Warn("webhook rejected: bad or missing signature", "event", r.Header.Get("X-GitHub-Event"), "delivery", r.Header.Get("X-GitHub-Delivery"))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		event := r.Header.Get("X-GitHub-Event")
		targets, err := webhookTargets(event, body)
		if err != nil {
			log.Warn("webhook ignored: malformed payload", "event", event, "err", err)
			http.Error(w, "malformed payload", http.StatusBadRequest)
			return
		}
		for _, t := range targets {
			if t.sha != "" {
				k.KickHead(t.repo, t.sha)
			} else {
				k.Kick(t.repo.PR(t.number))
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// validSignature checks GitHub's "sha256=<hex hmac>" header.
func validSignature(secret, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

type target struct {
	repo   ghref.Repo
	number int
	sha    string
}

// payload holds the fields of the accepted events that name a PR.
type payload struct {
	Repository struct {
		Name  string `json:"name"`
		Owner struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	Issue *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	CheckSuite *struct {
		HeadSHA      string `json:"head_sha"`
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"check_suite"`
	SHA string `json:"sha"`
}

// webhookTargets extracts the PRs (or head commits) an event is about.
// Events prloop does not use (not in github.WebhookEvents, which a GitHub
// App made by prloop app create subscribes to) yield none.
func webhookTargets(event string, body []byte) ([]target, error) {
	if !slices.Contains(github.WebhookEvents, event) {
		return nil, nil
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	repo := ghref.Repo{Owner: p.Repository.Owner.Login, Name: p.Repository.Name}
	if err := repo.Validate(); err != nil {
		return nil, err
	}
	var out []target
	switch event {
	case "pull_request", "pull_request_review", "pull_request_review_comment":
		if p.PullRequest != nil && p.PullRequest.Number > 0 {
			out = append(out, target{repo: repo, number: p.PullRequest.Number})
		}
	case "issue_comment":
		if p.Issue != nil && p.Issue.Number > 0 && len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null" {
			out = append(out, target{repo: repo, number: p.Issue.Number})
		}
	case "check_suite":
		if p.CheckSuite != nil {
			for _, pr := range p.CheckSuite.PullRequests {
				if pr.Number > 0 {
					out = append(out, target{repo: repo, number: pr.Number})
				}
			}
			if len(out) == 0 && p.CheckSuite.HeadSHA != "" {
				out = append(out, target{repo: repo, sha: p.CheckSuite.HeadSHA})
			}
		}
	case "status":
		if p.SHA != "" {
			out = append(out, target{repo: repo, sha: p.SHA})
		}
	}
	return out, nil
}
