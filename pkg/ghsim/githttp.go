package ghsim

import (
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
)

// serveGit answers git's smart HTTP protocol at /git/<owner>/<name>.git/…
// with git http-backend, as GitHub answers its clone URLs. Every request
// must carry a known token as the Basic auth password (GitHub's form for
// tokens: any user name, the token as password); a push needs write
// permission. The token is never logged.
func (s *Sim) serveGit(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/git/")
	owner, rest, _ := strings.Cut(rest, "/")
	name, sub, ok := strings.Cut(rest, ".git/")
	rp := s.repoOf(owner, name)
	if !ok || rp == nil {
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return
	}
	_, tok, _ := r.BasicAuth()
	s.mu.Lock()
	u := s.tokens[tok]
	s.mu.Unlock()
	if tok == "" || u == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
		return
	}
	if sub == "git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack" {
		rp.mu.Lock()
		perm := rp.permOf(u)
		rp.mu.Unlock()
		if permRank[perm] < permRank["write"] {
			http.Error(w, "Permission to "+rp.ref.String()+" denied to "+u.login+".", http.StatusForbidden)
			return
		}
	}
	bin, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, "git not found", http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: bin, Args: []string{"http-backend"}, Root: "/git/" + rp.ref.Owner,
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(rp.dir), "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + u.login,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		},
	}
	// http-backend finds the repository from PATH_INFO (/<name>.git/<sub>,
	// below Root) relative to GIT_PROJECT_ROOT.
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/git/" + rp.ref.Owner + "/" + rp.ref.Name + ".git/" + sub
	h.ServeHTTP(w, r2)
}
