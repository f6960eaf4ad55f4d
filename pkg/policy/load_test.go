package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// fakeFiles serves files by commit; an absent commit is 404, and down
// fails every read.
type fakeFiles struct {
	mu    sync.Mutex
	files map[string]string
	down  bool
	reads int
}

func (f *fakeFiles) GetFile(_ context.Context, _ ghref.Repo, path, ref string) (github.FileContent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.down {
		return github.FileContent{}, errors.New("502 bad gateway")
	}
	s, ok := f.files[ref]
	if !ok || path != Path {
		return github.FileContent{}, fmt.Errorf("get: %w", github.ErrNotFound)
	}
	return github.FileContent{Data: []byte(s)}, nil
}

func TestLoader_Effective(t *testing.T) {
	t.Parallel()
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	src := &fakeFiles{files: map[string]string{
		"good":    "version: 1\nmerge: {method: rebase}\n",
		"invalid": "version: 1\nreview:\n  reviwers: []\n",
	}}
	l := NewLoader(src)
	op := testOperator()

	e, err := l.Effective(t.Context(), op, repo, "main", "none")
	require.NoError(t, err)
	assert.False(t, e.File, "404: no file, operator defaults")
	assert.Equal(t, Value[string]{"squash", FromOperator}, e.MergeMethod)

	e, err = l.Effective(t.Context(), op, repo, "main", "good")
	require.NoError(t, err)
	assert.Equal(t, Value[string]{"rebase", FromFile}, e.MergeMethod)

	e, err = l.Effective(t.Context(), op, repo, "main", "invalid")
	require.NoError(t, err)
	require.Error(t, e.Invalid)
	assert.Equal(t, `.github/prloop.yml:3: unknown key "reviwers" (did you mean "reviewers"?)`, e.Invalid.Error())

	reads := src.reads
	src.down = true
	for _, sha := range []string{"none", "good", "invalid"} {
		_, err := l.Effective(t.Context(), op, repo, "main", sha)
		require.NoError(t, err, "a commit's answer is cached: %s", sha)
	}
	assert.Equal(t, reads, src.reads)

	_, err = l.Effective(t.Context(), op, repo, "main", "moved")
	require.Error(t, err, "a failed read of a new base is an error, never the last valid policy")
	src.down = false
	src.files["moved"] = "version: 1\n"
	e, err = l.Effective(t.Context(), op, repo, "main", "moved")
	require.NoError(t, err, "a failed read is not cached")
	assert.True(t, e.File)
}

func TestLoader_CacheIsBounded(t *testing.T) {
	t.Parallel()
	src := &fakeFiles{files: map[string]string{}}
	l := NewLoader(src)
	l.size = 3
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	for i := range 10 {
		_, err := l.Load(t.Context(), repo, fmt.Sprint(i))
		require.NoError(t, err)
	}
	assert.Len(t, l.cache, 3)
}
