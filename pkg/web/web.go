// Package web serves prloop's read-only web page: every PR prloop watches
// with its status line, each base branch's merge queue in order, and the
// recent escalations. It is rendered on the server from a prstatus board
// (html/template, inline CSS, no scripts, no external assets) and refreshes
// itself, so it needs nothing but the process's HTTP server.
//
// Everything on the page comes from events, and branch names, logins and
// reasons in them are written by whoever opened or reviewed a PR: the
// template escapes all of it.
package web

import (
	_ "embed"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

//go:embed page.tmpl
var pageText string

var pageTmpl = parse("page", pageText)

// Options are what the page shows and how.
type Options struct {
	// Line are the settings the status line names.
	Line prstatus.Options
	// WebBase is the GitHub web root for links to PRs whose events carry
	// no URL; https://github.com when empty.
	WebBase string
	// Refresh is how often the browser reloads the page; 5s when zero.
	Refresh time.Duration
	// Escalations is how many recent escalations the page lists; 20 when
	// zero.
	Escalations int
	// Now is the clock the waits are measured with; time.Now when nil.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.WebBase == "" {
		o.WebBase = "https://github.com"
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	if o.Escalations <= 0 {
		o.Escalations = 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Escalation is one PR handed to a human.
type Escalation struct {
	PR     ghref.PR
	Reason events.Reason
	Detail string
	At     time.Time
}

// board is the part of a prstatus.Follower the page reads.
type board interface {
	View(fn func(b *prstatus.Board))
	CaughtUp() <-chan struct{}
}

var _ board = (*prstatus.Follower)(nil)

// Feed is what the page is drawn from: a follower's board and the
// escalations it has seen, or why it is not following.
type Feed struct {
	follower board
	max      int

	mu          sync.Mutex
	escalations []Escalation // oldest first, at most max
	err         error
}

// NewFeed follows f: it takes f's OnApply to remember escalations, which
// the board keeps only while they last.
func NewFeed(f *prstatus.Follower, max int) *Feed {
	fd := newFeed(f, max)
	f.OnApply = fd.onApply
	return fd
}

func newFeed(b board, max int) *Feed {
	if max <= 0 {
		max = 20
	}
	return &Feed{follower: b, max: max}
}

func (fd *Feed) onApply(pr ghref.PR) {
	var esc *Escalation
	fd.follower.View(func(b *prstatus.Board) {
		// Escalated is the escalator's word that a human was asked, whether
		// the poller's review timeout or a service's request led to it.
		if p := b.Get(pr); p != nil && p.Last == events.TypeEscalated {
			esc = &Escalation{PR: p.PR, Reason: p.Escalation, Detail: p.EscalationDetail, At: p.LastAt}
		}
	})
	if esc == nil {
		return
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.escalations = append(fd.escalations, *esc)
	if len(fd.escalations) > fd.max {
		fd.escalations = slices.Delete(fd.escalations, 0, len(fd.escalations)-fd.max)
	}
}

// Fail records why the feed stopped following, or why the one before it
// did: the page says so until the feed has caught up.
func (fd *Feed) Fail(err error) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.err = err
}

// Page is the http.Handler of the page.
type Page struct {
	o   Options
	log *slog.Logger

	mu   sync.RWMutex
	feed *Feed
}

// NewPage returns the page of feed (nil: an empty, loading page until
// SetFeed).
func NewPage(feed *Feed, log *slog.Logger, o Options) *Page {
	return &Page{o: o.withDefaults(), log: log, feed: feed}
}

// SetFeed replaces the feed the page is drawn from (a new follower after
// the last one failed).
func (p *Page) SetFeed(feed *Feed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.feed = feed
}

// ServeHTTP renders the page.
func (p *Page) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.RLock()
	feed := p.feed
	p.mu.RUnlock()
	p.write(w, pageTmpl, p.model(feed))
}

// write renders tmpl with m, with the headers every page of prloop's has.
func (p *Page) write(w http.ResponseWriter, tmpl *template.Template, m any) {
	var b strings.Builder
	if err := tmpl.Execute(&b, m); err != nil {
		p.log.Error("render the web page", "page", tmpl.Name(), "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Nothing on the page runs or loads anything: a script that slipped
	// past the escaping would still be refused.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write([]byte(b.String()))
}

// model is what the template draws.
type model struct {
	Refresh     int
	Loading     bool
	Error       string
	Now         string
	PRs         []prRow
	Queues      []queue
	Escalations []escRow
}

type prRow struct {
	Ref, URL, Page, Title, Head, State, Text, Last, Ago string
}

type queue struct {
	Repo, Base string
	Entries    []queueEntry
}

type queueEntry struct {
	Pos                          int
	Ref, URL, Title, Text, State string
	Waited                       string
}

type escRow struct {
	Ref, URL, Reason, Detail, When, Ago string
}

func (p *Page) model(feed *Feed) model {
	now := p.o.Now()
	m := model{Refresh: max(1, int(p.o.Refresh.Round(time.Second)/time.Second)), Now: now.UTC().Format(time.RFC3339), Loading: true}
	if feed == nil {
		return m
	}
	select {
	case <-feed.follower.CaughtUp():
		m.Loading = false
	default:
	}
	feed.mu.Lock()
	if feed.err != nil && m.Loading {
		m.Error = feed.err.Error()
	}
	escs := slices.Clone(feed.escalations)
	feed.mu.Unlock()
	feed.follower.View(func(b *prstatus.Board) {
		for _, e := range slices.Backward(escs) {
			// Recent escalations are those still waiting for a human: one
			// since merged, closed or resolved leaves the list.
			if cur := b.Get(e.PR); cur == nil || !cur.NeedsHuman() {
				continue
			}
			m.Escalations = append(m.Escalations, escRow{
				Ref: e.PR.String(), URL: p.url(e.PR), Reason: strings.ReplaceAll(string(e.Reason), "_", " "), Detail: e.Detail,
				When: e.At.UTC().Format(time.RFC3339), Ago: ago(now, e.At),
			})
		}
		rows := b.Rows(p.o.Line)
		prstatus.SortByLast(rows)
		type qkey struct{ repo, base string }
		seen := map[qkey]bool{}
		for _, r := range rows {
			m.PRs = append(m.PRs, prRow{
				Ref: r.PR.String(), URL: p.url(r.PR), Page: prPath(r.PR), Title: r.Title, Head: ghref.ShortSHA(r.Head), State: string(r.Line.State), Text: r.Line.Text,
				Last: string(r.Last), Ago: ago(now, r.LastAt),
			})
			k := qkey{r.PR.RepoRef().Key(), r.Base}
			if r.Position == 0 || seen[k] {
				continue
			}
			seen[k] = true
			q := queue{Repo: r.PR.RepoRef().String(), Base: r.Base}
			for i, e := range b.Queue(r.PR.RepoRef(), r.Base) {
				el := b.Line(e.PR, p.o.Line)
				q.Entries = append(q.Entries, queueEntry{Pos: i + 1, Ref: e.PR.String(), URL: p.url(e.PR), Title: e.Title, Text: el.Text, State: string(el.State), Waited: prstatus.Age(now, e.QueuedAt)})
			}
			m.Queues = append(m.Queues, q)
		}
	})
	slices.SortFunc(m.Queues, func(x, y queue) int {
		return strings.Compare(strings.ToLower(x.Repo)+" "+x.Base, strings.ToLower(y.Repo)+" "+y.Base)
	})
	return m
}

// url is the PR's html URL from its events, else the one GitHub would give.
func (p *Page) url(pr ghref.PR) string { return pr.WithURL(p.o.WebBase).URL }

func ago(now, t time.Time) string {
	if s := prstatus.Age(now, t); s != "" {
		return s + " ago"
	}
	return ""
}
