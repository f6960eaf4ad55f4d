package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// WebhookEvents are the webhook events prloop acts on (the poller's POST
// /webhook; any other event is acknowledged and ignored): a PR, its
// reviews and review comments, conversation comments (and reactions'
// neighbours: there is no reaction event, so emoji are polled), check
// suites and commit statuses. A GitHub App made by `prloop app create`
// subscribes to exactly these.
var WebhookEvents = []string{"pull_request", "pull_request_review", "pull_request_review_comment", "issue_comment", "check_suite", "status"}

// AppPermissions are the repository permissions a GitHub App needs for
// features: each permission of Needs (but a token's) at the highest level
// a feature needs it.
func AppPermissions(features []Feature) map[string]string {
	out := map[string]string{}
	for _, n := range Needs {
		if n.TokenOnly || !slices.Contains(features, n.Feature) {
			continue
		}
		if levelRank[n.Level] > levelRank[out[n.Permission]] {
			out[n.Permission] = n.Level
		}
	}
	return out
}

// AppManifest is a GitHub App manifest: the App GitHub registers when
// someone posts it to github.com/settings/apps/new ("Registering a GitHub
// App from a manifest",
// https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest).
type AppManifest struct {
	Name        string `json:"name,omitempty"`
	URL         string `json:"url"` // the App's homepage; GitHub requires it
	Description string `json:"description,omitempty"`
	// HookAttributes is the App's webhook; without it the App has none
	// and subscribes to no events.
	HookAttributes *AppHook `json:"hook_attributes,omitempty"`
	// RedirectURL is where GitHub sends the browser, with ?code=…&state=…,
	// once the App is registered.
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultEvents      []string          `json:"default_events,omitempty"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// AppHook is a manifest's hook_attributes.
type AppHook struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// HomepageURL is prloop's homepage, a manifest's url.
const HomepageURL = "https://github.com/prloop/prloop"

// NewAppManifest is the manifest of an App for prloop: a private App with
// the permissions of every feature (AppPermissions) and, when webhookURL is
// set, a webhook for WebhookEvents. redirectURL receives the code.
func NewAppManifest(name, redirectURL, webhookURL string) AppManifest {
	m := AppManifest{
		Name:               name,
		URL:                HomepageURL,
		Description:        "prloop drives coding agents' pull requests through review, fixes and merge.",
		RedirectURL:        redirectURL,
		DefaultPermissions: AppPermissions(AllFeatures()),
	}
	if webhookURL != "" {
		m.HookAttributes = &AppHook{URL: webhookURL, Active: true}
		m.DefaultEvents = slices.Clone(WebhookEvents)
	}
	return m
}

// AppConversion is GitHub's answer to POST /app-manifests/{code}/conversions:
// the registered App and its credentials, which GitHub gives this once.
// The credentials are Secrets, so that printing or logging the struct
// shows none of them.
type AppConversion struct {
	ID       int64  `json:"id"`
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	HTMLURL  string `json:"html_url"`
	ClientID string `json:"client_id"`
	Owner    struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"owner"`
	Permissions   map[string]string `json:"permissions"`
	Events        []string          `json:"events"`
	ClientSecret  Secret            `json:"client_secret"`
	WebhookSecret Secret            `json:"webhook_secret"`
	PEM           Secret            `json:"pem"`
}

// ConvertAppManifest exchanges the code GitHub's manifest flow redirected
// with for the App's configuration and credentials (POST
// /app-manifests/{code}/conversions on the REST API at apiURL; no
// authentication; the code works once, within an hour). The code is a
// credential for that hour: it appears in no error.
func ConvertAppManifest(ctx context.Context, hc *http.Client, apiURL, code string) (AppConversion, error) {
	if code == "" || strings.ContainsAny(code, "/?#") {
		return AppConversion{}, errors.New("convert the GitHub App manifest: the code GitHub redirected with is empty or malformed")
	}
	base, err := url.Parse(strings.TrimSuffix(apiURL, "/") + "/")
	if err != nil {
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest: PRLOOP_GITHUB_API_URL: %w", err)
	}
	u := base.JoinPath("app-manifests", code, "conversions")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: %w", base.Host, err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message holds the URL, and so the code
			err = ue.Err
		}
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: %w", base.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: read the answer: %w", base.Host, err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = ": the code is unknown, used or more than an hour old; run prloop app create again"
		}
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: %s %q%s", base.Host, resp.Status, e.Message, hint)
	}
	var c AppConversion
	if err := json.Unmarshal(body, &c); err != nil {
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: decode the answer: %w", base.Host, err)
	}
	if c.ID == 0 || c.PEM == "" {
		return AppConversion{}, fmt.Errorf("convert the GitHub App manifest at %s: the answer has no App id or private key", base.Host)
	}
	return c, nil
}

// MissingAppGrants compares what GitHub registered (permissions and
// events of a conversion) with the manifest: GitHub lets the person edit
// the App before creating it. It lists what prloop needs and the App lacks.
func MissingAppGrants(m AppManifest, c AppConversion) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(m.DefaultPermissions)) {
		if levelRank[c.Permissions[p]] < levelRank[m.DefaultPermissions[p]] {
			out = append(out, fmt.Sprintf("permission %s: %s", p, m.DefaultPermissions[p]))
		}
	}
	for _, e := range m.DefaultEvents {
		if !slices.Contains(c.Events, e) {
			out = append(out, "event "+e)
		}
	}
	return out
}
