package github

import (
	"strings"
)

// paramAfter names the path parameter that follows a literal segment, using
// the names of GitHub's OpenAPI description, so routes read like the docs:
// "GET /repos/{owner}/{repo}/pulls/{pull_number}".
var paramAfter = map[string]string{
	"pulls":         "{pull_number}",
	"issues":        "{issue_number}",
	"reactions":     "{reaction_id}",
	"labels":        "{name}",
	"collaborators": "{username}",
	"users":         "{username}",
	"comments":      "{comment_id}",
	"reviews":       "{review_id}",
	"statuses":      "{sha}",
	"check-runs":    "{check_run_id}",
	"jobs":          "{job_id}",
	"runs":          "{run_id}",
	"branches":      "{branch}",
	"repositories":  "{repository_id}",
	"installations": "{installation_id}",
	"orgs":          "{org}",
	"teams":         "{team_slug}",
	"memberships":   "{username}",
}

// routeOf turns a request path into its template, for counters and metrics
// where the raw path would have unbounded cardinality. basePath is the API
// root's path ("/" or "/api/v3/"), stripped first.
func routeOf(method, basePath, path string) string {
	p := strings.TrimPrefix(path, strings.TrimSuffix(basePath, "/"))
	segs := strings.Split(strings.Trim(p, "/"), "/")
	out := make([]string, 0, len(segs))
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		switch {
		case i == 0 && s == "repos" && len(segs) >= 3:
			out = append(out, "repos", "{owner}", "{repo}")
			i += 2
		case s == "commits" && i+1 < len(segs):
			// /commits/{ref}/status|check-runs: the ref may contain slashes
			// only when escaped, so one segment.
			out = append(out, s, "{ref}")
			i++
		case s == "refs" && i+1 < len(segs):
			out = append(out, s, "{ref}")
			i = len(segs)
		case s == "branches" && i > 0 && segs[i-1] == "rules" && i+1 < len(segs):
			// /rules/branches/{branch}: the decoded path may hold a
			// branch's slashes.
			out = append(out, s, "{branch}")
			i = len(segs)
		case s == "contents" && i+1 < len(segs):
			// /contents/{path}: the path has slashes.
			out = append(out, s, "{path}")
			i = len(segs)
		case s == "compare" && i+1 < len(segs):
			// /compare/{base}...{head}: branch names may hold slashes.
			out = append(out, s, "{basehead}")
			i = len(segs)
		case s == "merge" || s == "update-branch" || s == "permission" || s == "status":
			out = append(out, s)
		default:
			if name, ok := paramAfter[s]; ok && i+1 < len(segs) && !isLiteralAfter(s, segs[i+1]) {
				out = append(out, s, name)
				i++
				continue
			}
			if isNumber(s) {
				out = append(out, "{id}")
				continue
			}
			out = append(out, s)
		}
	}
	if len(out) == 1 && out[0] == "" {
		return method + " /"
	}
	return method + " /" + strings.Join(out, "/")
}

// isLiteralAfter reports segments that are fixed words, not parameters, after
// a parameter-introducing segment (e.g. /pulls/comments/{id}).
func isLiteralAfter(prev, s string) bool {
	switch prev {
	case "pulls", "issues":
		return s == "comments" || s == "events"
	case "labels":
		return false
	}
	return false
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
