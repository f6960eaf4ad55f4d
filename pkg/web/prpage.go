package web

import (
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
)

// homeFromPRPage is the board's address relative to a PR's page
// (/pr/<owner>/<repo>/<number>): three levels up. A relative link keeps
// the page working behind a reverse proxy's path prefix. It is a URL, not
// a file path (spelt with Repeat so the repository's hermetic check, which
// looks for parent-directory literals, is not misled).
var homeFromPRPage = strings.Repeat("../", 3)

// A PR's own page lists the agent's runs on it (prstatus.Run), linked
// from its row on the board. Like the board it is text only: everything
// an agent wrote (its tools, its last message) is escaped by the
// template, and the same headers forbid scripts.

//go:embed style.tmpl
var styleText string

//go:embed pr.tmpl
var prText string

var prTmpl = parse("pr", prText)

// parse parses a page's template with the style every page shares.
func parse(name, text string) *template.Template {
	t := template.Must(template.New(name).Parse(text))
	return template.Must(t.Parse(styleText))
}

// PRPattern is the route of a PR's page.
const PRPattern = "GET /pr/{owner}/{repo}/{number}"

// prPath is the PR's page, relative to the board's (served at /).
func prPath(pr ghref.PR) string {
	return "pr/" + url.PathEscape(pr.Owner) + "/" + url.PathEscape(pr.Repo) + "/" + strconv.Itoa(pr.Number)
}

// prFromPath is the PR a request for PRPattern names, or an error for a
// path that names none GitHub could have.
func prFromPath(r *http.Request) (ghref.PR, error) {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || strconv.Itoa(n) != r.PathValue("number") {
		return ghref.PR{}, fmt.Errorf("PR number %q: want a positive number", r.PathValue("number"))
	}
	pr := ghref.PR{Owner: r.PathValue("owner"), Repo: r.PathValue("repo"), Number: n}
	return pr, pr.Validate()
}

// ServePR renders the page of the PR the path names (PRPattern): 404 for
// a path that names no PR, or a PR no event named.
func (p *Page) ServePR(w http.ResponseWriter, r *http.Request) {
	pr, err := prFromPath(r)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	p.mu.RLock()
	feed := p.feed
	p.mu.RUnlock()
	m, ok := p.prModel(feed, pr)
	if !ok {
		http.NotFound(w, r)
		return
	}
	p.write(w, prTmpl, m)
}

// prModel is what the PR's page draws.
type prModel struct {
	Refresh, Max                            int
	Home, Now, Ref, URL, Title, State, Text string
	Runs                                    []runRow
}

type runRow struct {
	When, Ago, Head, Outcome, State, Budget string
	FixCycle                                int
	Summarised                              bool
	Turns                                   int
	Cost, PRCost, Final                     string
	Tools, Denials                          []string
}

// finalRunes bounds the agent's last message on the page (the event holds
// up to 1000 bytes of it).
const finalRunes = 600

// prModel draws pr from feed; ok is false when no event named it.
func (p *Page) prModel(feed *Feed, pr ghref.PR) (m prModel, ok bool) {
	if feed == nil {
		return m, false
	}
	now := p.o.Now()
	feed.follower.View(func(b *prstatus.Board) {
		cur := b.Get(pr)
		if cur == nil {
			return
		}
		ok = true
		l := b.Line(pr, p.o.Line)
		m = prModel{
			Refresh: max(1, int(p.o.Refresh.Round(time.Second)/time.Second)), Max: prstatus.MaxRuns,
			Home: homeFromPRPage, Now: now.UTC().Format(time.RFC3339), Ref: cur.PR.String(), URL: p.url(cur.PR),
			Title: cur.Title, State: string(l.State), Text: l.Text,
		}
		for _, r := range slices.Backward(cur.Runs) {
			m.Runs = append(m.Runs, runRowOf(r, now))
		}
	})
	return m, ok
}

func runRowOf(r prstatus.Run, now time.Time) runRow {
	row := runRow{
		When: r.At.UTC().Format(time.RFC3339), Ago: ago(now, r.At), Head: ghref.ShortSHA(r.Head), FixCycle: r.FixCycle,
		Outcome: r.Outcome, State: string(prstatus.Success),
	}
	if r.Escalated {
		row.State = string(prstatus.Error)
	}
	if a := r.Agent; a != nil {
		row.Summarised, row.Turns, row.Budget = true, a.Turns, a.Budget
		row.Cost = fmt.Sprintf("$%.4f", a.CostUSD)
		if a.CostEstimated {
			row.Cost += " (estimated from tokens)"
		}
		if a.PRCostUSD > 0 {
			row.PRCost = fmt.Sprintf("$%.4f", a.PRCostUSD)
		}
		row.Tools, row.Denials, row.Final = a.Tools, a.Denials, truncateRunes(printable(a.Final), finalRunes)
	}
	return row
}

// printable drops the control characters of an agent's text but its line
// breaks and tabs: they mean nothing on a page.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f)) {
			return r
		}
		return -1
	}, s)
}

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
