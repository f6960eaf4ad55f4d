package ghref

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePR(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want PR
	}{
		{name: "short form", in: "acme/widgets#12", want: PR{Owner: "acme", Repo: "widgets", Number: 12}},
		{name: "dotted repo", in: "socketio/socket.io#3", want: PR{Owner: "socketio", Repo: "socket.io", Number: 3}},
		{name: "pull path", in: "acme/widgets/pull/12", want: PR{Owner: "acme", Repo: "widgets", Number: 12}},
		{name: "url", in: "https://github.com/acme/widgets/pull/12", want: PR{Owner: "acme", Repo: "widgets", Number: 12, URL: "https://github.com/acme/widgets/pull/12"}},
		{name: "url with tab", in: "https://github.com/acme/widgets/pull/12/files", want: PR{Owner: "acme", Repo: "widgets", Number: 12, URL: "https://github.com/acme/widgets/pull/12"}},
		{name: "enterprise url", in: "https://ghe.example.com/Acme/Widgets/pull/7", want: PR{Owner: "Acme", Repo: "Widgets", Number: 7, URL: "https://ghe.example.com/Acme/Widgets/pull/7"}},
		{name: "api url", in: "https://api.github.com/repos/acme/widgets/pulls/5", want: PR{Owner: "acme", Repo: "widgets", Number: 5, URL: "https://api.github.com/acme/widgets/pull/5"}},
		{name: "spaces trimmed", in: "  acme/widgets#1 ", want: PR{Owner: "acme", Repo: "widgets", Number: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePR(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseRepo_Remotes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     Repo
	}{
		{name: "short", in: "acme/widgets", want: Repo{"acme", "widgets"}},
		{name: "https remote", in: "https://github.com/acme/widgets.git", want: Repo{"acme", "widgets"}},
		{name: "https no suffix", in: "https://github.com/acme/widgets", want: Repo{"acme", "widgets"}},
		{name: "scp ssh remote", in: "git@github.com:acme/widgets.git", want: Repo{"acme", "widgets"}},
		{name: "ssh url remote", in: "ssh://git@github.com/acme/socket.io.git", want: Repo{"acme", "socket.io"}},
		{name: "trailing slash", in: "https://github.com/acme/widgets/", want: Repo{"acme", "widgets"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRemote(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParse_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, wantMsg string
		pr                bool
	}{
		{name: "empty", in: "", wantMsg: "empty"},
		{name: "no slash", in: "widgets", wantMsg: "want owner/repo"},
		{name: "bad number", in: "acme/widgets#x", wantMsg: "not a positive number", pr: true},
		{name: "zero", in: "acme/widgets#0", wantMsg: "not a positive number", pr: true},
		{name: "no number", in: "acme/widgets", wantMsg: "has no PR number", pr: true},
		{name: "pr where repo wanted", in: "acme/widgets#3", wantMsg: "names a pull request"},
		{name: "bad owner", in: "ac me/widgets", wantMsg: "owner"},
		{name: "dot dot repo", in: "acme/..", wantMsg: "repository name"},
		{name: "file scheme", in: "file:///tmp/acme/widgets", wantMsg: "scheme"},
		{name: "issues path", in: "https://github.com/acme/widgets/issues/3", wantMsg: "unexpected path"},
		{name: "hostile", in: "acme/widgets;rm -rf /", wantMsg: "repository name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tt.pr {
				_, err = ParsePR(tt.in)
			} else {
				_, err = ParseRepo(tt.in)
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestPR_KeyFoldsCase(t *testing.T) {
	t.Parallel()
	a := PR{Owner: "Acme", Repo: "Widgets", Number: 1}
	b := PR{Owner: "acme", Repo: "widgets", Number: 1, URL: "x"}
	assert.True(t, a.Same(b))
	assert.Equal(t, "acme/widgets#1", a.Key())
	assert.Equal(t, "Acme/Widgets#1", a.String())
	assert.False(t, a.Same(PR{Owner: "acme", Repo: "widgets", Number: 2}))
}
