package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Secret holds a credential. It prints, logs and marshals as "[REDACTED]" so a
// token inside any struct cannot leak through %v, slog or JSON; Reveal is the
// only way to read it.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// String redacts.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts, for %#v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue redacts, for slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts, for encoding/json and friends.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

var (
	_ fmt.Stringer   = Secret("")
	_ fmt.GoStringer = Secret("")
	_ slog.LogValuer = Secret("")
)

// Default values of Config, also used when a field is left zero.
const (
	DefaultAPIURL           = "https://api.github.com/"
	DefaultRequestTimeout   = 30 * time.Second
	DefaultMaxRetries       = 5
	DefaultMaxRateLimitWait = 15 * time.Minute
	DefaultCacheMaxBytes    = 64 << 20
)

// Config is the environment configuration of the GitHub client, read with
// envconfig from the PRLOOP_GITHUB_* variables its tags name (see
// LoadConfig; services embed it in their own config). The token itself is not
// read from PRLOOP_ variables: it comes from GITHUB_TOKEN, GH_TOKEN or
// `gh auth token` (see ResolveToken), unless GitHub App auth is configured.
type Config struct {
	// APIURL is the REST API root: https://api.github.com/ for github.com,
	// https://HOST/api/v3/ for GitHub Enterprise Server, or a simulator's URL.
	// A missing trailing slash is added.
	APIURL string `envconfig:"PRLOOP_GITHUB_API_URL" default:"https://api.github.com/" desc:"REST root; https://HOST/api/v3/ for GitHub Enterprise, or a simulator"`

	// AppID is the GitHub App's ID. App auth is used when AppID,
	// AppInstallationID and AppPrivateKeyPath are all set; setting only some
	// of them is an error.
	AppID int64 `envconfig:"PRLOOP_GITHUB_APP_ID" desc:"GitHub App ID; App auth is used when the App ID, installation ID and private key path are all set (setting only some is an error)"`
	// AppInstallationID is the App's installation ID for the organisation or
	// user whose repositories prloop manages.
	AppInstallationID int64 `envconfig:"PRLOOP_GITHUB_APP_INSTALLATION_ID" desc:"the App's installation ID for the organisation or user whose repositories prloop manages"`
	// AppPrivateKeyPath is the path of the App's PEM private key file.
	AppPrivateKeyPath string `envconfig:"PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH" desc:"path of the App's PEM private key file"`

	// RequestTimeout bounds one attempt of one request (each retry gets its own).
	// Zero means DefaultRequestTimeout.
	RequestTimeout time.Duration `envconfig:"PRLOOP_GITHUB_REQUEST_TIMEOUT" default:"30s" desc:"timeout of one GitHub request attempt"`
	// MaxRetries is how many times a request failing with a 5xx, a network
	// error or a timeout is retried (backoff 1 s, 2 s, 4 s, 8 s, 16 s with
	// jitter). Zero means DefaultMaxRetries; negative disables retries.
	MaxRetries int `envconfig:"PRLOOP_GITHUB_MAX_RETRIES" default:"5" desc:"retries of 5xx and network errors, backoff 1, 2, 4, 8, 16 s with jitter; at most 20"`
	// MaxRateLimitWait caps how long the client sleeps on a rate limit before
	// retrying; a longer wait is returned as *RateLimitError instead. Zero
	// means DefaultMaxRateLimitWait; negative never waits.
	MaxRateLimitWait time.Duration `envconfig:"PRLOOP_GITHUB_MAX_RATE_LIMIT_WAIT" default:"15m" desc:"longest wait on a rate limit before giving up"`
	// CacheMaxBytes bounds the conditional-request cache (bodies kept for
	// ETag revalidation), least recently used evicted first. Zero means
	// DefaultCacheMaxBytes; negative disables the cache.
	CacheMaxBytes int64 `envconfig:"PRLOOP_GITHUB_CACHE_MAX_BYTES" default:"67108864" desc:"size of the conditional-request cache (LRU by bytes)"`

	// Concurrency bounds the requests in flight at once, in one process
	// (the services of the all-in-one binary share it, see Budget): at most
	// MaxConcurrency, GitHub's limit. Zero means no budget (tests).
	Concurrency int `envconfig:"PRLOOP_GITHUB_CONCURRENCY" default:"20" desc:"the process's GitHub requests in flight at once (at most 100, GitHub's secondary limit); with several processes on one token, set PRLOOP_GITHUB_SHARED_BUDGET to make it the installation's"`
	// PointsPerMinute is the budget's points a minute per endpoint:
	// GitHub's 900 for one process; each of N replicas sharing a token
	// takes 900/N. (Only a benchmark that compresses time sets more.)
	PointsPerMinute int `envconfig:"PRLOOP_GITHUB_POINTS_PER_MINUTE" default:"900" desc:"the process's points a minute per REST endpoint (a read 1, a write 5; GitHub allows 900); polling may use 3/4 of it, merges and statuses all of it"`
	// SharedBudget makes the process's budget a share of the
	// installation's, held in the PRLOOP_GITHUB_BUDGET KV bucket
	// (budgetshare.go): the concurrency and points above are then the
	// installation's, split between its live processes.
	SharedBudget bool `envconfig:"PRLOOP_GITHUB_SHARED_BUDGET" default:"false" desc:"share PRLOOP_GITHUB_CONCURRENCY and the points a minute with every prloop process on this NATS (KV bucket PRLOOP_GITHUB_BUDGET): set it on every service of a split or replicated deployment, whose NATS users then need that bucket"`

	// Token, when set, is used instead of resolving one from the environment.
	// Never read from PRLOOP_ variables.
	Token Secret `ignored:"true"`
}

// Names of the environment variables, for error messages.
const (
	envAPIURL         = "PRLOOP_GITHUB_API_URL"
	envAppID          = "PRLOOP_GITHUB_APP_ID"
	envInstallationID = "PRLOOP_GITHUB_APP_INSTALLATION_ID"
	envKeyPath        = "PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH"
	envTimeout        = "PRLOOP_GITHUB_REQUEST_TIMEOUT"
	envMaxRetries     = "PRLOOP_GITHUB_MAX_RETRIES"
	envMaxWait        = "PRLOOP_GITHUB_MAX_RATE_LIMIT_WAIT"
	envCacheBytes     = "PRLOOP_GITHUB_CACHE_MAX_BYTES"
)

// LoadConfig reads Config from PRLOOP_GITHUB_* variables and validates it.
func LoadConfig() (Config, error) {
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		return Config{}, fmt.Errorf("read GitHub client configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// UsesApp reports whether GitHub App installation auth is configured.
func (c Config) UsesApp() bool {
	return c.AppID != 0 || c.AppInstallationID != 0 || c.AppPrivateKeyPath != ""
}

// Validate reports the first misconfigured variable, naming it and saying what
// is wrong.
func (c Config) Validate() error {
	if _, err := normalizeAPIURL(c.APIURL); err != nil {
		return fmt.Errorf("%s: %w", envAPIURL, err)
	}
	if c.Concurrency < 0 || c.Concurrency > MaxConcurrency {
		return fmt.Errorf("PRLOOP_GITHUB_CONCURRENCY=%d: want 1 to %d (GitHub allows %d concurrent requests)", c.Concurrency, MaxConcurrency, MaxConcurrency)
	}
	if c.PointsPerMinute < 0 {
		return fmt.Errorf("PRLOOP_GITHUB_POINTS_PER_MINUTE=%d: want a positive number (GitHub allows %d)", c.PointsPerMinute, EndpointPointsPerMinute)
	}
	if c.UsesApp() {
		var missing []string
		if c.AppID == 0 {
			missing = append(missing, envAppID)
		}
		if c.AppInstallationID == 0 {
			missing = append(missing, envInstallationID)
		}
		if c.AppPrivateKeyPath == "" {
			missing = append(missing, envKeyPath)
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s not set: GitHub App auth needs %s, %s and %s together (or none of them, to use a token)",
				strings.Join(missing, " and "), envAppID, envInstallationID, envKeyPath)
		}
		if c.AppID < 0 {
			return fmt.Errorf("%s: %d is not a GitHub App ID, want a positive number", envAppID, c.AppID)
		}
		if c.AppInstallationID < 0 {
			return fmt.Errorf("%s: %d is not an installation ID, want a positive number", envInstallationID, c.AppInstallationID)
		}
		st, err := os.Stat(c.AppPrivateKeyPath)
		if err != nil {
			return fmt.Errorf("%s: private key file: %w", envKeyPath, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", envKeyPath, c.AppPrivateKeyPath)
		}
		if c.Token != "" {
			return errors.New("both a token and GitHub App auth are configured: use one")
		}
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("%s: %s is negative, want a duration like 30s", envTimeout, c.RequestTimeout)
	}
	if c.MaxRetries > 20 {
		return fmt.Errorf("%s: %d retries would back off for hours, want at most 20", envMaxRetries, c.MaxRetries)
	}
	_ = envMaxWait // every MaxRateLimitWait is valid: negative means never wait
	_ = envCacheBytes
	return nil
}

// String describes the configuration without secrets.
func (c Config) String() string {
	auth := "token"
	if c.UsesApp() {
		auth = fmt.Sprintf("app %d installation %d key %s", c.AppID, c.AppInstallationID, c.AppPrivateKeyPath)
	}
	tok := "unset"
	if c.Token != "" {
		tok = redacted
	}
	return fmt.Sprintf("github.Config{APIURL: %s, auth: %s, token: %s, timeout: %s, retries: %d, max rate-limit wait: %s, cache: %d bytes}",
		c.APIURL, auth, tok, c.RequestTimeout, c.MaxRetries, c.MaxRateLimitWait, c.CacheMaxBytes)
}

// GoString is String, so %#v cannot print the token either.
func (c Config) GoString() string { return c.String() }

// LogValue groups the configuration for slog, without secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("api_url", c.APIURL),
		slog.Bool("app_auth", c.UsesApp()),
		slog.Int64("app_id", c.AppID),
		slog.Int64("app_installation_id", c.AppInstallationID),
		slog.Bool("token_set", c.Token != ""),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Int("max_retries", c.MaxRetries),
		slog.Duration("max_rate_limit_wait", c.MaxRateLimitWait),
		slog.Int64("cache_max_bytes", c.CacheMaxBytes),
	)
}

var (
	_ fmt.Stringer   = Config{}
	_ slog.LogValuer = Config{}
)

// normalizeAPIURL checks an API root URL and gives it a trailing slash.
func normalizeAPIURL(s string) (*url.URL, error) {
	if s == "" {
		s = DefaultAPIURL
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%q: scheme %q, want https (or http for a local simulator)", s, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	if u.User != nil {
		return nil, errors.New("the URL must not carry credentials; use GITHUB_TOKEN or App auth")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want no query or fragment", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

// GHTokenTimeout bounds `gh auth token`.
const GHTokenTimeout = 10 * time.Second

// ResolveToken finds a token: GITHUB_TOKEN, then GH_TOKEN, then the output of
// `gh auth token` if gh is on PATH. It returns the token and where it came
// from (for logs). The error names all three sources.
func ResolveToken(ctx context.Context) (Secret, string, error) {
	for _, name := range []string{"GITHUB_TOKEN", "GH_TOKEN"} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return Secret(v), name, nil
		}
	}
	why := "gh is not on PATH"
	if path, err := exec.LookPath("gh"); err == nil {
		ctx, cancel := context.WithTimeout(ctx, GHTokenTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, "auth", "token")
		cmd.Stdin = nil
		cmd.Stderr = nil // gh's stderr is not shown: keep whatever it says out of our logs
		out, err := cmd.Output()
		tok := strings.TrimSpace(string(out))
		switch {
		case ctx.Err() != nil:
			why = fmt.Sprintf("`gh auth token` did not finish within %s", GHTokenTimeout)
		case err != nil:
			why = "`gh auth token` failed (" + exitReason(err) + "); run `gh auth login`"
		case tok == "":
			why = "`gh auth token` printed nothing"
		case strings.ContainsAny(tok, " \t\n"):
			why = "`gh auth token` printed more than a token"
		default:
			return Secret(tok), "gh auth token", nil
		}
	}
	return "", "", fmt.Errorf("no GitHub token: GITHUB_TOKEN and GH_TOKEN are unset or empty and %s; set GITHUB_TOKEN, set GH_TOKEN, or log in with `gh auth login` so that `gh auth token` prints one (or configure GitHub App auth with %s, %s and %s)",
		why, envAppID, envInstallationID, envKeyPath)
}

func exitReason(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	return "could not run"
}
