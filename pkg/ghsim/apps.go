package ghsim

// GitHub Apps registered from a manifest, as GitHub documents the flow
// ("Registering a GitHub App from a manifest",
// https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
//
//  1. the browser POSTs a form with a JSON `manifest` to
//     /settings/apps/new (the signed-in user's App) or
//     /organizations/ORG/settings/apps/new, with ?state=…;
//  2. once the person confirms, GitHub registers the App and redirects to
//     the manifest's redirect_url with ?code=…&state=…;
//  3. POST /app-manifests/{code}/conversions (no authentication) answers
//     201 with the App, its client secret, webhook secret and private key
//     (PEM); the code works once, within an hour.
//
// The simulator's web session is the user SetWebUser names, who confirms
// at once: step 1 answers step 2's redirect.

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// App is a GitHub App the simulator registered from a manifest.
type App struct {
	ID                int64
	Slug, Name, Owner string
	OwnerIsOrg        bool
	// Permissions and Events are what the manifest asked for.
	Permissions   map[string]string
	Events        []string
	WebhookURL    string
	URL           string // the homepage (external_url)
	Description   string
	ClientID      string
	ClientSecret  string
	WebhookSecret string
	PEM           string // PKCS#1 RSA private key, as GitHub hands it out
	Created       time.Time
}

// appManifest is what the simulator reads of a manifest.
type appManifest struct {
	Name           *string `json:"name"`
	URL            string  `json:"url"`
	Description    string  `json:"description"`
	HookAttributes *struct {
		URL    string `json:"url"`
		Active *bool  `json:"active"`
	} `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultEvents      []string          `json:"default_events"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// apps holds the registered Apps and the codes not yet converted.
type apps struct {
	mu      sync.Mutex
	webUser string
	byID    []*App
	codes   map[string]pendingCode
}

type pendingCode struct {
	app     *App
	expires time.Time
}

// manifestCodeTTL is how long a code can be converted: "You must complete
// this step of the GitHub App Manifest flow within one hour."
const manifestCodeTTL = time.Hour

// eventPermission is the permission an App needs to subscribe to a webhook
// event ("Webhook events and payloads": each event's "Availability" and
// permission); GitHub refuses a manifest whose default_events need a
// permission its default_permissions lack. Events not listed are not
// checked.
var eventPermission = map[string][]string{
	"pull_request":                {"pull_requests"},
	"pull_request_review":         {"pull_requests"},
	"pull_request_review_comment": {"pull_requests"},
	"issue_comment":               {"issues", "pull_requests"},
	"issues":                      {"issues"},
	"check_suite":                 {"checks"},
	"check_run":                   {"checks"},
	"status":                      {"statuses"},
	"push":                        {"contents"},
}

var appSlugRE = regexp.MustCompile(`[^a-z0-9]+`)

// SetWebUser signs login in to the simulator's web pages (the manifest
// flow's /settings/apps/new): the person who registers Apps.
func (s *Sim) SetWebUser(login string) {
	s.ensureUser(login, false)
	s.apps.mu.Lock()
	s.apps.webUser = login
	s.apps.mu.Unlock()
}

// Apps returns the Apps registered from manifests, oldest first.
func (s *Sim) Apps() []App {
	s.apps.mu.Lock()
	defer s.apps.mu.Unlock()
	out := make([]App, 0, len(s.apps.byID))
	for _, a := range s.apps.byID {
		out = append(out, *a)
	}
	return out
}

func (s *Sim) appRoutes() {
	s.mux.HandleFunc("POST /settings/apps/new", s.newAppFromManifest)
	s.mux.HandleFunc("POST /organizations/{org}/settings/apps/new", s.newAppFromManifest)
	s.handle("POST /app-manifests/{code}/conversions", s.convertManifest)
}

// newAppFromManifest is GitHub's page behind the manifest form, confirmed
// at once by the web user: it registers the App and redirects to the
// manifest's redirect_url with a code and the state it was given.
func (s *Sim) newAppFromManifest(w http.ResponseWriter, r *http.Request) {
	page := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintln(w, msg)
	}
	s.apps.mu.Lock()
	owner := s.apps.webUser
	s.apps.mu.Unlock()
	if owner == "" {
		page(http.StatusUnauthorized, "Sign in to GitHub to register a GitHub App (ghsim: SetWebUser).")
		return
	}
	org := r.PathValue("org")
	if err := r.ParseForm(); err != nil {
		page(http.StatusBadRequest, "Invalid form: "+err.Error())
		return
	}
	var m appManifest
	if err := json.Unmarshal([]byte(r.PostForm.Get("manifest")), &m); err != nil {
		page(http.StatusUnprocessableEntity, "Invalid GitHub App manifest: "+err.Error())
		return
	}
	app, problem := s.registerApp(m, owner, org)
	if problem != "" {
		page(http.StatusUnprocessableEntity, "Invalid GitHub App configuration: "+problem)
		return
	}
	code := randomHex(20)
	s.apps.mu.Lock()
	if s.apps.codes == nil {
		s.apps.codes = map[string]pendingCode{}
	}
	s.apps.codes[code] = pendingCode{app: app, expires: s.Now().Add(manifestCodeTTL)}
	s.apps.mu.Unlock()
	if m.RedirectURL == "" { // GitHub shows the App's settings then
		http.Redirect(w, r, webBase(s.apiBase(r))+"/settings/apps/"+app.Slug, http.StatusFound)
		return
	}
	to, err := url.Parse(m.RedirectURL)
	if err != nil {
		page(http.StatusUnprocessableEntity, "Invalid redirect_url: "+err.Error())
		return
	}
	q := to.Query()
	q.Set("code", code)
	if st := r.URL.Query().Get("state"); st != "" {
		q.Set("state", st)
	}
	to.RawQuery = q.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

// registerApp checks a manifest as GitHub does and registers its App, or
// says what GitHub would refuse.
func (s *Sim) registerApp(m appManifest, user, org string) (*App, string) {
	if m.URL == "" {
		return nil, "url is required (the App's homepage)"
	}
	name := user + "'s App"
	if m.Name != nil && *m.Name != "" {
		name = *m.Name
	}
	if len(name) > 34 {
		return nil, fmt.Sprintf("name %q is too long (maximum is 34 characters)", name)
	}
	for p, lvl := range m.DefaultPermissions {
		if !slices.Contains([]string{"read", "write", "admin"}, lvl) {
			return nil, fmt.Sprintf("default_permissions: %s: %q is not read, write or admin", p, lvl)
		}
	}
	webhook := ""
	if h := m.HookAttributes; h != nil {
		if h.URL == "" {
			return nil, "hook_attributes: url is required"
		}
		if h.Active == nil || *h.Active {
			webhook = h.URL
		}
	}
	for _, e := range m.DefaultEvents {
		need, known := eventPermission[e]
		if known && !slices.ContainsFunc(need, func(p string) bool { return m.DefaultPermissions[p] != "" }) {
			return nil, fmt.Sprintf("default_events: %s needs the permission %s", e, strings.Join(need, " or "))
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, "ghsim: generate the App's key: " + err.Error()
	}
	owner := user
	if org != "" {
		owner = org
	}
	s.ensureUser(owner, false)
	a := &App{
		ID:            s.newID(),
		Slug:          strings.Trim(appSlugRE.ReplaceAllString(strings.ToLower(name), "-"), "-"),
		Name:          name,
		Owner:         owner,
		OwnerIsOrg:    org != "",
		Permissions:   m.DefaultPermissions,
		Events:        m.DefaultEvents,
		WebhookURL:    webhook,
		URL:           m.URL,
		Description:   m.Description,
		ClientID:      "Iv23li" + randomHex(7),
		ClientSecret:  randomHex(20),
		WebhookSecret: randomHex(20),
		PEM:           string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		Created:       s.Now(),
	}
	s.apps.mu.Lock()
	defer s.apps.mu.Unlock()
	if slices.ContainsFunc(s.apps.byID, func(o *App) bool { return strings.EqualFold(o.Name, name) || o.Slug == a.Slug }) {
		return nil, fmt.Sprintf("name %q is already taken", name)
	}
	s.apps.byID = append(s.apps.byID, a)
	return a, ""
}

// convertManifest is POST /app-manifests/{code}/conversions.
func (s *Sim) convertManifest(c *reqCtx) *result {
	code := c.r.PathValue("code")
	s.apps.mu.Lock()
	p, ok := s.apps.codes[code]
	delete(s.apps.codes, code) // once
	s.apps.mu.Unlock()
	if !ok || !c.now.Before(p.expires) {
		return notFound()
	}
	a := p.app
	web := webBase(c.base)
	owner := s.userByLogin(a.Owner).wire(c.base)
	if a.OwnerIsOrg {
		owner.Type = "Organization"
	}
	perms := a.Permissions
	if perms == nil {
		perms = map[string]string{}
	}
	events := a.Events
	if events == nil {
		events = []string{}
	}
	at := a.Created.UTC().Format(time.RFC3339)
	return jsonResult(http.StatusCreated, map[string]any{
		"id":             a.ID,
		"slug":           a.Slug,
		"node_id":        nodeID("03:Integration", a.ID),
		"client_id":      a.ClientID,
		"owner":          owner,
		"name":           a.Name,
		"description":    a.Description,
		"external_url":   a.URL,
		"html_url":       web + "/apps/" + a.Slug,
		"created_at":     at,
		"updated_at":     at,
		"permissions":    perms,
		"events":         events,
		"client_secret":  a.ClientSecret,
		"webhook_secret": a.WebhookSecret,
		"pem":            a.PEM,
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
