package github

import (
	"regexp"
	"strings"
)

// tokenShape matches what GitHub's credentials look like: classic and
// fine-grained personal access tokens, OAuth, user-to-server,
// server-to-server (an App installation's) and refresh tokens
// ("About authentication to GitHub", GitHub's token formats), and an
// Authorization header's value.
var tokenShape = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b|(?i:\b(?:bearer|token|basic)\s+[A-Za-z0-9_\-\.=+/]{20,})`)

// Redacted replaces a credential in text prloop passes on.
const Redacted = "[redacted]"

// RedactTokens replaces in s every string shaped like a GitHub credential,
// and each of secrets (prloop's own token, whatever its shape): text read
// from GitHub (a CI log, say) goes to the agent, and a log may print a
// token.
func RedactTokens(s string, secrets ...Secret) string {
	for _, sec := range secrets {
		if v := sec.Reveal(); len(v) >= 8 {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return tokenShape.ReplaceAllString(s, Redacted)
}
