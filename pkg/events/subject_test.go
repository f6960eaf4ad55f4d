package events

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
)

func TestEncodeToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "widgets", want: "widgets"},
		{name: "case folds", in: "Acme", want: "acme"},
		{name: "dot escaped", in: "socket.io", want: "socket=2eio"},
		{name: "hyphen and underscore kept", in: "my-repo_2", want: "my-repo_2"},
		{name: "leading dot", in: ".github", want: "=2egithub"},
		{name: "escape char escaped", in: "a=b", want: "a=3db"},
		{name: "wildcards escaped", in: "*>", want: "=2a=3e"},
		{name: "space escaped", in: "a b", want: "a=20b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := EncodeToken(tt.in)
			assert.Equal(t, tt.want, got)
			back, err := DecodeToken(got)
			require.NoError(t, err)
			assert.Equal(t, strings.ToLower(tt.in), back)
		})
	}
}

func TestDecodeToken_RejectsNonCanonical(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "Acme", "a.b", "a*", "=2", "=zz", "=61", "=2E", "a=4"} {
		_, err := DecodeToken(tok)
		assert.ErrorIs(t, err, ErrBadSubject, "token %q", tok)
	}
}

func TestSubject_RoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pr   ghref.PR
		typ  Type
		want string
	}{
		{name: "simple", pr: ghref.PR{Owner: "acme", Repo: "widgets", Number: 42}, typ: TypeReviewApproved, want: "pr.acme.widgets.42.PRReviewApproved"},
		{name: "dotted repo", pr: ghref.PR{Owner: "socketio", Repo: "socket.io", Number: 7}, typ: TypeMerged, want: "pr.socketio.socket=2eio.7.PRMerged"},
		{name: "mixed case", pr: ghref.PR{Owner: "Acme-Corp", Repo: "Big_Repo", Number: 1}, typ: TypeReviewTimeout, want: "pr.acme-corp.big_repo.1.ReviewTimeout"},
		{name: "a PR yet to be opened", pr: ghref.PR{Owner: "acme", Repo: "widgets"}, typ: TypeCreateRequested, want: "pr.acme.widgets.0.PRCreateRequested"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := Subject(tt.pr, tt.typ)
			assert.Equal(t, tt.want, s)
			assert.Len(t, strings.Split(s, "."), 5)
			pr, typ, err := ParseSubject(s)
			require.NoError(t, err)
			assert.True(t, pr.Same(tt.pr))
			assert.Equal(t, tt.typ, typ)
		})
	}
}

func TestParseSubject_Errors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"pr.acme.widgets.42", "x.acme.widgets.42.PRMerged", "pr.acme.widgets.0.PRMerged", "pr.acme.widgets.042.PRMerged", "pr.Acme.widgets.4.PRMerged", "pr.acme.widgets.4.PRMerged.extra", "pr.acme.widgets.4.PRCreateRequested", "pr.acme.widgets.00.PRCreateRequested"} {
		_, _, err := ParseSubject(s)
		assert.ErrorIs(t, err, ErrBadSubject, s)
	}
}

// validToken reports whether tok is a valid NATS subject token and KV key token.
func validToken(tok string) bool {
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if !(r < unicode.MaxASCII && (r == '-' || r == '_' || r == '=' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'))) {
			return false
		}
	}
	return true
}

func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range []string{"socket.io", "Acme", "a=b", "..", "*", ">", "日本", "a\x00b", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return
		}
		tok := EncodeToken(name)
		if !validToken(tok) {
			t.Fatalf("EncodeToken(%q) = %q is not a valid subject token", name, tok)
		}
		back, err := DecodeToken(tok)
		if err != nil {
			t.Fatalf("DecodeToken(EncodeToken(%q)) = %v", name, err)
		}
		if back != strings.ToLower(name) {
			t.Fatalf("round trip of %q gave %q", name, back)
		}
		// One-to-one: the token decodes only to the case-folded name, and any
		// other name with a different folding encodes differently.
		if other := name + "x"; EncodeToken(other) == tok {
			t.Fatalf("%q and %q share token %q", name, other, tok)
		}
	})
}
