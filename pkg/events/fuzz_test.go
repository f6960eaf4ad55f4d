package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

// Fuzz targets for the event contract. Seed corpora live under
// testdata/fuzz/<target>; run one with
// `go test -run '^$' -fuzz '^FuzzSubject$' -fuzztime 3s ./pkg/events`.

// FuzzSubject: token encoding is injective on case-folded names and
// reversible; every valid PR's subject parses back to it; and a subject
// ParseSubject accepts is the canonical one (re-encoding it gives it back),
// so no two subjects name the same PR.
func FuzzSubject(f *testing.F) {
	f.Add("acme", "widgets", 42, uint8(0), "pr.acme.widgets.42.ReviewApproved")
	f.Add("Acme-Corp", "my.repo_v2", 1, uint8(3), "pr.acme-corp.my=2erepo_v2.1.FeedbackReceived")
	f.Add("a", ".github", 7, uint8(14), "pr.a.=2egithub.7.PREscalated")
	f.Add("o", "..", 1, uint8(1), "pr.o.=2e=2e.1.x")
	f.Add("ünïcode", "répo", 9, uint8(5), "pr.=c3=bcn.r.9.t")
	f.Add(strings.Repeat("o", 39), strings.Repeat("r.", 50), 2147483647, uint8(2), "pr.a.b.0.t")
	f.Add("a b", "c*d>e", -1, uint8(9), "pr.a.b.01.t")
	f.Add("x", "=2e", 1, uint8(7), "pr.x.=2E.1.t")
	f.Add("x", "y", 1, uint8(7), "pr.x.=61.1.t")
	f.Add("x", "y", 1, uint8(7), "pr.=c3=80.b.1.t")
	f.Add("x", "y", 1, uint8(7), "pr.=ff.b.1.t")
	f.Add("", "", 0, uint8(0), "pr.x.y.+1.t")
	f.Add("a\x00b", "\xff", 3, uint8(11), "pr..y.1.t")
	f.Fuzz(func(t *testing.T, owner, repo string, number int, typ uint8, subject string) {
		for _, name := range []string{owner, repo} {
			tok := EncodeToken(name)
			require.False(t, tok == "" && name != "", "empty token for %q", name)
			for i := 0; i < len(tok); i++ {
				c := tok[i]
				ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '='
				require.True(t, ok, "token %q of %q has byte %q outside a NATS token's safe set", tok, name, c)
			}
			back, err := DecodeToken(tok)
			if name == "" {
				require.Error(t, err)
				continue
			}
			require.NoError(t, err, "token %q of %q", tok, name)
			require.Equal(t, strings.ToLower(name), back)
		}
		require.Equal(t, strings.ToLower(owner) == strings.ToLower(repo), EncodeToken(owner) == EncodeToken(repo),
			"distinct case-folded names %q and %q must get distinct tokens", owner, repo)

		typ1 := Types[int(typ)%len(Types)]
		pr := ghref.PR{Owner: owner, Repo: repo, Number: number}
		if CheckRef(pr, typ1) == nil {
			s := Subject(pr, typ1)
			got, gotType, err := ParseSubject(s)
			require.NoError(t, err, "subject %q", s)
			assert.Equal(t, ghref.PR{Owner: strings.ToLower(owner), Repo: strings.ToLower(repo), Number: number}, got)
			assert.Equal(t, typ1, gotType)
			assert.True(t, matches(FilterSubject(typ1), s), "filter %q misses %q", FilterSubject(typ1), s)
			assert.True(t, matches(PRFilter(pr), s), "filter %q misses %q", PRFilter(pr), s)
			assert.True(t, matches(RepoFilter(pr.RepoRef()), s), "filter %q misses %q", RepoFilter(pr.RepoRef()), s)
		}

		got, gotType, err := ParseSubject(subject)
		if err != nil {
			require.ErrorIs(t, err, ErrBadSubject)
			return
		}
		require.Equal(t, subject, Subject(got, gotType), "ParseSubject accepted a non-canonical subject")
	})
}

// matches reports whether the NATS subject filter selects subject.
func matches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

// FuzzEvent: an event of every type built by New decodes to the same data
// (Decode(Message(New(x))) == x), and any body Decode accepts is
// consistent (type, subject and data agree) and survives its own round
// trip; anything else is rejected with ErrMalformed, never a panic.
func FuzzEvent(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, d := range samples(testPR) {
		e, err := New("poller", d, now, "sha", "3")
		require.NoError(f, err)
		m, err := Message(e)
		require.NoError(f, err)
		f.Add(m.Data, "acme", "widgets", 42, uint8(i), "Fix the parser")
	}
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"PRMerged","subject":"a/b#1","data":{"pr":{"owner":"A","repo":"b","number":1}}}`), "A", "b", 1, uint8(10), "")
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"PRMerged","subject":"a/b#2","data":{"pr":{"owner":"a","repo":"b","number":1}}}`), "a", "b.", 1, uint8(10), "")
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"Nope","subject":"a/b#1","data":{}}`), "-", "b", 1, uint8(1), "\u202eevil")
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"PRMerged","data_base64":"e30="}`), "a", "..", 1, uint8(1), "")
	f.Add([]byte(`{"specversion":"1.0","id":"x","sour`), "a", "b", 0, uint8(2), "")
	f.Add([]byte(`null`), "a", "b", -5, uint8(3), "line\nbreak")
	f.Add([]byte("\xff\xfe"), "a", "b", 1, uint8(4), "\xff")
	f.Fuzz(func(t *testing.T, body []byte, owner, repo string, number int, typ uint8, title string) {
		// Build, render, decode.
		pr := ghref.PR{Owner: owner, Repo: repo, Number: number}
		d := samples(pr)[int(typ)%len(Types)]
		base := reflect.ValueOf(d).Elem().FieldByName("Base")
		base.FieldByName("Title").SetString(CleanTitle(title))
		e, err := New("fuzz", d, now, title)
		if CheckRef(d.Ref(), d.EventType()) != nil {
			require.Error(t, err, "New accepted invalid %+v", d.Ref())
		} else {
			require.NoError(t, err)
			m, err := Message(e)
			require.NoError(t, err)
			require.Equal(t, Subject(d.Ref(), d.EventType()), m.Subject)
			e2, d2, err := Decode(m.Data)
			require.NoError(t, err)
			require.Equal(t, d, d2)
			require.Equal(t, e.ID(), e2.ID())
			require.Equal(t, e.Type(), e2.Type())
			require.True(t, e.Time().Equal(e2.Time()))
		}

		// Arbitrary bytes.
		e, d, err = Decode(body)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.Equal(t, Type(e.Type()), d.EventType())
		require.True(t, strings.EqualFold(e.Subject(), d.Ref().String()))
		require.NoError(t, CheckRef(d.Ref(), d.EventType()))
		m, err := Message(e)
		require.NoError(t, err)
		e2, d2, err := Decode(m.Data)
		require.NoError(t, err, "re-rendered %s", m.Data)
		require.Equal(t, d, d2)
		require.Equal(t, e.ID(), e2.ID())
		again, err := json.Marshal(e2)
		require.NoError(t, err)
		require.JSONEq(t, string(m.Data), string(again), "rendering is not stable")
	})
}

// FuzzCleanTitle: a cleaned title has no control, format or invisible
// characters and no invalid UTF-8, at most one space between words and none
// at either end, at most MaxTitle runes, and cleaning it again changes
// nothing.
func FuzzCleanTitle(f *testing.F) {
	f.Add("Fix the parser")
	f.Add("  leading\tand\ntrailing  ")
	f.Add("bidi \u202egnp.exe\u202c override")
	f.Add("zero\u200bwidth\u200c\u200d\ufeffmarks")
	f.Add("isolates \u2066x\u2069 and tags \U000E0041\U000E0042")
	f.Add("nbsp\u00a0and\u2028line\u2029para\u3000ideo")
	f.Add("bad \xff\xfe utf8 \xc3")
	f.Add(strings.Repeat("a", MaxTitle-1) + " b")
	f.Add(strings.Repeat("é", MaxTitle+10))
	f.Add("<!-- hidden --> ```fence```")
	f.Fuzz(func(t *testing.T, s string) {
		got := CleanTitle(s)
		require.True(t, utf8.ValidString(got))
		require.LessOrEqual(t, utf8.RuneCountInString(got), MaxTitle)
		require.Equal(t, strings.TrimSpace(got), got, "leading or trailing space in %q", got)
		require.NotContains(t, got, "  ")
		for _, r := range got {
			require.False(t, unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError, "rune %U survived in %q", r, got)
			require.True(t, r == ' ' || !unicode.IsSpace(r), "space %U survived in %q", r, got)
		}
		require.Equal(t, got, CleanTitle(got), "not idempotent")
	})
}
