package main

// prloop app create: a GitHub App for prloop in one step, by GitHub's
// manifest flow ("Registering a GitHub App from a manifest",
// https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest).
// A page on 127.0.0.1 posts the manifest (exactly the permissions and
// events prloop needs: github.NewAppManifest) to GitHub; GitHub registers
// the App and sends the browser back with a one-time code; prloop
// exchanges it for the App's id, private key and webhook secret and keeps
// them in the data directory, readable by the user only. Neither the code
// nor a credential is printed, logged or put in an error.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// appDirName is where app create keeps the App's files in the data
// directory.
const appDirName = "github-app"

// The files of an App, each mode 0600 in a 0700 directory.
const (
	appKeyFile    = "private-key.pem"
	appSecretFile = "webhook-secret"
	appInfoFile   = "app.json"
)

func runApp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(stderr, "Usage: prloop app create [-org ORG] [-name NAME] [-webhook-url URL]")
		return fmt.Errorf("%w: want 'prloop app create'", errUsage)
	}
	return runAppCreate(ctx, args[1:], stdout, stderr)
}

func runAppCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop app create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	org := fs.String("org", "", "register the App for this organisation (you must own it); default: your user account")
	name := fs.String("name", "", "the App's name, unique on GitHub, at most 34 characters (default prloop-ORG, or prloop); GitHub's page lets you change it")
	webhookURL := fs.String("webhook-url", "", "where GitHub delivers the App's webhook events: the poller's https://…/webhook; empty: no webhook, prloop polls")
	webURL := fs.String("github-url", "", "GitHub's web address (default from PRLOOP_GITHUB_API_URL: https://github.com for api.github.com, https://HOST for https://HOST/api/v3)")
	addr := fs.String("addr", "127.0.0.1:0", "the local address of the page and of GitHub's redirect back")
	wait := fs.Duration("wait", 15*time.Minute, "how long to wait for GitHub's redirect back")
	openBrowser := fs.Bool("open", true, "open the page in a browser")
	force := fs.Bool("force", false, "replace an App already kept in the data directory")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prloop app create [-org ORG] [-name NAME] [-webhook-url URL]\n\n"+
			"Registers a GitHub App with the permissions and webhook events prloop needs\n"+
			"(docs/github-permissions.md) by GitHub's manifest flow, and keeps its id,\n"+
			"private key and webhook secret in $PRLOOP_DATA_DIR/%s (default %s), mode 0600.\n\n", appDirName, defaultDataDir)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *org != "" {
		if err := (ghref.Repo{Owner: *org, Name: "x"}).Validate(); err != nil {
			return fmt.Errorf("%w: -org: %v", errUsage, err)
		}
	}
	if *name == "" {
		*name = "prloop"
		if *org != "" {
			*name += "-" + *org
		}
	}
	apiURL := cmp.Or(os.Getenv("PRLOOP_GITHUB_API_URL"), github.DefaultAPIURL)
	if *webURL == "" {
		w, err := githubWebURL(apiURL)
		if err != nil {
			return fmt.Errorf("%w: PRLOOP_GITHUB_API_URL=%s: %v", errUsage, apiURL, err)
		}
		*webURL = w
	}
	dataDir, err := filepath.Abs(cmp.Or(os.Getenv("PRLOOP_DATA_DIR"), defaultDataDir))
	if err != nil {
		return fmt.Errorf("resolve PRLOOP_DATA_DIR: %w", err)
	}
	dir := filepath.Join(dataDir, appDirName)
	if _, err := os.Stat(filepath.Join(dir, appKeyFile)); err == nil && !*force {
		return fmt.Errorf("%s already holds a GitHub App: use it, move it away, or pass -force to replace it", dir)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s for GitHub's redirect back: %w", *addr, err)
	}
	local := "http://" + ln.Addr().String()
	manifest := github.NewAppManifest(*name, local+"/callback", *webhookURL)
	state := randomToken()
	action, err := manifestAction(*webURL, *org, state)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w: -github-url %s: %v", errUsage, *webURL, err)
	}
	done := make(chan appResult, 1)
	srv := &http.Server{Handler: appFlowHandler(ctx, manifest, action, state, apiURL, dir, done), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	where := "your account"
	if *org != "" {
		where = "the organisation " + *org
	}
	fmt.Fprintf(stdout, "To create the GitHub App %q for %s, open this page in a browser signed in to %s:\n\n  %s/\n\nprloop waits %s for GitHub to send you back.\n", *name, where, *webURL, local, *wait)
	if *openBrowser {
		startBrowser(local + "/")
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	var res appResult
	select {
	case res = <-done:
	case <-ctx.Done():
		return fmt.Errorf("no redirect back from GitHub within %s (-wait): open %s/ and press 'Create GitHub App'", *wait, local)
	}
	if res.err != nil {
		return res.err
	}
	printAppCreated(stdout, res, manifest, dir)
	return nil
}

// appResult is the outcome of GitHub's redirect back.
type appResult struct {
	app github.AppConversion
	err error
}

// appFlowHandler serves the page that posts the manifest and the redirect
// back: it checks the state, exchanges the code and saves the App. done
// receives one result.
func appFlowHandler(ctx context.Context, m github.AppManifest, action, state, apiURL, dir string, done chan<- appResult) http.Handler {
	mux := http.NewServeMux()
	manifestJSON, _ := json.Marshal(m)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_ = manifestPage.Execute(w, map[string]string{"Action": action, "Manifest": string(manifestJSON), "Name": m.Name})
	})
	// One redirect back is acted on; the lock also keeps a second,
	// concurrent one from converting the code again.
	var mu sync.Mutex
	handled := false
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "This is not the answer to the page prloop app create served: the state differs.", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if handled {
			http.Error(w, "prloop app create has finished; see its output.", http.StatusGone)
			return
		}
		handled = true
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		app, err := github.ConvertAppManifest(cctx, &http.Client{Timeout: 30 * time.Second}, apiURL, q.Get("code"))
		if err == nil {
			err = saveApp(dir, app)
		}
		done <- appResult{app, err}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintln(w, "prloop could not finish creating the App:", err)
			return
		}
		fmt.Fprintf(w, "The GitHub App %s (id %d) is created; prloop keeps its key in %s.\nInstall it on your repositories: %s/installations/new\nThen follow the terminal's instructions.\n", app.Name, app.ID, dir, app.HTMLURL)
	})
	return mux
}

// manifestPage posts the manifest to GitHub as soon as it loads; the
// button is for browsers without JavaScript.
var manifestPage = template.Must(template.New("manifest").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>prloop: create the GitHub App {{.Name}}</title></head>
<body onload="document.getElementById('f').submit()">
<form id="f" action="{{.Action}}" method="post">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<p>prloop asks GitHub to register the App <b>{{.Name}}</b> with the permissions and events it needs.</p>
<button type="submit">Continue to GitHub</button>
</form>
</body></html>
`))

// manifestAction is the URL the manifest form posts to: the user's or the
// organisation's "new App" page, with the state GitHub sends back.
func manifestAction(webURL, org, state string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(webURL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errors.New("want an http(s) URL")
	}
	if org != "" {
		u = u.JoinPath("organizations", org, "settings", "apps", "new")
	} else {
		u = u.JoinPath("settings", "apps", "new")
	}
	u.RawQuery = url.Values{"state": {state}}.Encode()
	return u.String(), nil
}

// githubWebURL is GitHub's web address for its REST API root: github.com
// for api.github.com, https://HOST for GitHub Enterprise Server's
// https://HOST/api/v3, else the API's own address (the simulator serves
// both).
func githubWebURL(apiURL string) (string, error) {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return "", errors.New("not a URL")
	}
	if u.Host == "api.github.com" {
		return "https://github.com", nil
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// saveApp keeps the App in dir: its key and webhook secret, and what else
// prloop needs to know (id, slug, owner), each mode 0600 in a directory
// mode 0700. The client secret, which prloop does not use, is not kept.
func saveApp(dir string, app github.AppConversion) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	info, err := json.MarshalIndent(map[string]any{
		"id": app.ID, "slug": app.Slug, "name": app.Name, "html_url": app.HTMLURL,
		"owner": app.Owner.Login, "client_id": app.ClientID,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", appInfoFile, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{appKeyFile, []byte(app.PEM.Reveal())},
		{appSecretFile, []byte(app.WebhookSecret.Reveal())},
		{appInfoFile, append(info, '\n')},
	} {
		if err := writePrivate(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

// writePrivate writes data to path readable by the user only: a new file
// created 0600 beside it, then renamed over it.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// printAppCreated says what was made, where it is kept and what to set:
// paths and ids, never a credential.
func printAppCreated(w io.Writer, res appResult, m github.AppManifest, dir string) {
	app := res.app
	fmt.Fprintf(w, "\nCreated the GitHub App %s (id %d, owner %s): %s\n", app.Name, app.ID, app.Owner.Login, app.HTMLURL)
	fmt.Fprintf(w, "Kept in %s (mode 0600): %s, %s, %s\n", dir, appKeyFile, appSecretFile, appInfoFile)
	if missing := github.MissingAppGrants(m, app); len(missing) > 0 {
		fmt.Fprintf(w, "\nWarning: the App lacks what prloop needs (changed on GitHub's page?): %s.\nGrant it in the App's settings: %s\n", strings.Join(missing, ", "), app.HTMLURL)
	}
	fmt.Fprintf(w, "\nNext:\n  1. Install it on the repositories prloop manages: %s/installations/new\n", app.HTMLURL)
	fmt.Fprintf(w, "     The installation's id is the number at the end of its settings page's address.\n")
	fmt.Fprintf(w, "  2. Set, for prloop run and each service:\n")
	fmt.Fprintf(w, "       PRLOOP_GITHUB_APP_ID=%d\n", app.ID)
	fmt.Fprintf(w, "       PRLOOP_GITHUB_APP_INSTALLATION_ID=<the installation's id>\n")
	fmt.Fprintf(w, "       PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH=%s\n", filepath.Join(dir, appKeyFile))
	if len(m.DefaultEvents) > 0 {
		fmt.Fprintf(w, "       PRLOOP_WEBHOOK_SECRET=\"$(cat %s)\"   # the poller checks deliveries with it\n", filepath.Join(dir, appSecretFile))
	}
	fmt.Fprintf(w, "       PRLOOP_GITHUB_LOGIN=%s[bot]\n", app.Slug)
	fmt.Fprintf(w, "     and unset GITHUB_TOKEN. Then: prloop doctor\n")
	fmt.Fprintf(w, "  Kubernetes: the key goes into the Secret prloop as github-app-private-key.pem (docs/helm.md, githubApp.id=%d).\n", app.ID)
}

// randomToken is an unguessable state for the manifest flow.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startBrowser opens url in the desktop's browser, if there is one; the
// page's address is printed either way.
func startBrowser(url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "linux":
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return
		}
		cmd = exec.Command("xdg-open", url)
	default:
		return
	}
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}
