package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prloop/prloop/pkg/github"
)

// GitHub counts the GitHub client's requests, as its Options.Observer, and
// exports the rate limits and counters of the clients given to Watch.
type GitHub struct {
	requests  *prometheus.CounterVec
	retries   *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
	clients   *githubCollector
}

var (
	_ github.Observer       = (*GitHub)(nil)
	_ github.RetryObserver  = (*GitHub)(nil)
	_ github.BudgetObserver = (*GitHub)(nil)
)

// NewGitHub creates (or finds) the prloop_github_* metrics on reg.
func NewGitHub(reg prometheus.Registerer) *GitHub {
	return &GitHub{
		requests: counterVec(reg, "github_requests_total",
			"GitHub API requests sent (every attempt, retries included), by templated route, outcome "+
				"(ok, not_modified, redirect, client_error, rate_limited, server_error, network_error, timeout) "+
				"and HTTP status (none when no answer came).",
			"route", "outcome", "status"),
		retries: counterVec(reg, "github_retries_total",
			"GitHub API requests sent again, by templated route and the outcome of the attempt that caused it "+
				"(server_error, network_error, timeout, rate_limited, decode_error).",
			"route", "cause"),
		queueWait: histogramVec(reg, "github_queue_wait_seconds",
			"How long GitHub requests waited for the process's budget of GitHub's secondary limits "+
				"(concurrency, points a minute per endpoint, content creation), by priority (poll, normal, urgent).",
			[]float64{0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60}, "priority"),
		clients: register(reg, &githubCollector{}),
	}
}

// OnQueueWait implements github.BudgetObserver.
func (g *GitHub) OnQueueWait(priority string, wait time.Duration) {
	g.queueWait.WithLabelValues(priority).Observe(wait.Seconds())
}

// OnRequest implements github.Observer.
func (g *GitHub) OnRequest(route string, status int, outcome github.Outcome) {
	code := "none"
	if status > 0 {
		code = strconv.Itoa(status)
	}
	g.requests.WithLabelValues(route, string(outcome), code).Inc()
}

// OnRetry implements github.RetryObserver.
func (g *GitHub) OnRetry(route string, cause github.Outcome) {
	g.retries.WithLabelValues(route, string(cause)).Inc()
}

// GitHubClient is what Watch reads of a GitHub client at scrape time; no
// request is made.
type GitHubClient interface {
	RateLimits() map[string]github.RateLimit
	Stats() github.Stats
}

var _ GitHubClient = (*github.Client)(nil)

// Watch exports c's rate limits per resource and its counters. Several
// clients may be watched (the all-in-one binary has one per service): the
// rate limit of a resource is the one most recently reported to any of
// them, counters are summed.
func (g *GitHub) Watch(c GitHubClient) {
	g.clients.mu.Lock()
	defer g.clients.mu.Unlock()
	g.clients.sources = append(g.clients.sources, c)
}

var (
	rateRemainingDesc = prometheus.NewDesc(namespace+"_github_rate_limit_remaining",
		"Requests left in the current GitHub rate-limit window, per resource (core, search, graphql …), "+
			"as the latest response reported it.", []string{"resource"}, nil)
	rateLimitDesc = prometheus.NewDesc(namespace+"_github_rate_limit_limit",
		"Requests allowed per GitHub rate-limit window, per resource.", []string{"resource"}, nil)
	rateResetDesc = prometheus.NewDesc(namespace+"_github_rate_limit_reset_timestamp_seconds",
		"When the current GitHub rate-limit window of a resource resets (Unix time).", []string{"resource"}, nil)
	rateWaitsDesc = prometheus.NewDesc(namespace+"_github_rate_limit_waits_total",
		"Sleeps of the GitHub client for a rate limit: after a rate-limited answer, or before sending when the quota was known spent.", nil, nil)
	cacheEntriesDesc = prometheus.NewDesc(namespace+"_github_cache_entries",
		"Responses held by the GitHub client's conditional-request cache.", nil, nil)
	cacheBytesDesc = prometheus.NewDesc(namespace+"_github_cache_bytes",
		"Bytes held by the GitHub client's conditional-request cache.", nil, nil)
	pointsDesc = prometheus.NewDesc(namespace+"_github_points_per_minute",
		"Points of GitHub's secondary limit spent in the last minute per endpoint (templated route; "+
			"1 a GET, 5 a write; GitHub allows 900), by the process's clients.", []string{"endpoint"}, nil)
)

// githubCollector reads the watched clients at scrape time.
type githubCollector struct {
	mu      sync.Mutex
	sources []GitHubClient
}

func (c *githubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rateRemainingDesc, rateLimitDesc, rateResetDesc, rateWaitsDesc, cacheEntriesDesc, cacheBytesDesc, pointsDesc} {
		ch <- d
	}
}

func (c *githubCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]GitHubClient(nil), c.sources...)
	c.mu.Unlock()
	latest := map[string]github.RateLimit{}
	var waits, cacheBytes int64
	var cacheEntries int
	points := map[string]int{}
	budgets := map[*github.Budget]bool{}
	for _, s := range sources {
		// Clients of one process share a budget: count it once.
		if bs, ok := s.(interface{ Budget() *github.Budget }); ok && bs.Budget() != nil && !budgets[bs.Budget()] {
			budgets[bs.Budget()] = true
			for ep, n := range bs.Budget().PointsPerMinute() {
				points[ep] += n
			}
		}
		for res, rl := range s.RateLimits() {
			if cur, ok := latest[res]; !ok || rl.Observed.After(cur.Observed) {
				latest[res] = rl
			}
		}
		st := s.Stats()
		waits += st.RateLimitWaits
		cacheEntries += st.CacheEntries
		cacheBytes += st.CacheBytes
	}
	for res, rl := range latest {
		if rl.Remaining >= 0 { // -1: unknown since a wait for the reset
			ch <- prometheus.MustNewConstMetric(rateRemainingDesc, prometheus.GaugeValue, float64(rl.Remaining), res)
		}
		if rl.Limit > 0 {
			ch <- prometheus.MustNewConstMetric(rateLimitDesc, prometheus.GaugeValue, float64(rl.Limit), res)
		}
		if !rl.Reset.IsZero() {
			ch <- prometheus.MustNewConstMetric(rateResetDesc, prometheus.GaugeValue, float64(rl.Reset.Unix()), res)
		}
	}
	for ep, n := range points {
		ch <- prometheus.MustNewConstMetric(pointsDesc, prometheus.GaugeValue, float64(n), ep)
	}
	if len(sources) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(rateWaitsDesc, prometheus.CounterValue, float64(waits))
	ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(cacheEntries))
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(cacheBytes))
}
