package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
)

// FileReader reads a file at a commit: the GitHub client's GetFile.
type FileReader interface {
	GetFile(ctx context.Context, repo ghref.Repo, path, ref string) (github.FileContent, error)
}

var _ FileReader = (*github.Client)(nil)

// DefaultCacheSize caps how many (repository, base commit) answers a
// Loader keeps: a few per watched base, so it is reached only by a very
// large installation.
const DefaultCacheSize = 4096

// Loader loads each base's policy file and caches the answer by
// repository and base commit. A file at a commit never changes, so a
// cached answer never goes stale, and a base that moves is a new key: its
// file is read again (a conditional request, free when unchanged). A read
// that fails is not cached and not replaced by an older commit's answer:
// the caller waits and asks again, and never acts on the last valid
// policy of a base whose file may now be invalid.
type Loader struct {
	src  FileReader
	size int

	mu    sync.Mutex
	cache map[string]loaded
	order []string
}

type loaded struct {
	file *File
	err  error  // an *Invalid
	blob string // the file's blob SHA ("" without a file)
}

// NewLoader returns a loader reading through src.
func NewLoader(src FileReader) *Loader {
	return &Loader{src: src, size: DefaultCacheSize, cache: map[string]loaded{}}
}

// Load returns the policy file of repo at base commit sha: nil without a
// file, or an *Invalid error for a file that is wrong. Any other error is
// a failed read, to retry.
func (l *Loader) Load(ctx context.Context, repo ghref.Repo, sha string) (*File, error) {
	c, err := l.load(ctx, repo, sha)
	if err != nil {
		return nil, err
	}
	return c.file, c.err
}

// load is Load's cached answer; its error is a failed read only.
func (l *Loader) load(ctx context.Context, repo ghref.Repo, sha string) (loaded, error) {
	if sha == "" {
		return loaded{}, fmt.Errorf("policy of %s: no base commit", repo)
	}
	key := repo.Key() + "@" + sha
	l.mu.Lock()
	c, ok := l.cache[key]
	l.mu.Unlock()
	if ok {
		return c, nil
	}
	fc, err := l.src.GetFile(ctx, repo, Path, sha)
	switch {
	case errors.Is(err, github.ErrNotFound):
		c = loaded{}
	case err != nil:
		return loaded{}, fmt.Errorf("policy of %s at %s: %w", repo, ghref.ShortSHA(sha), err)
	default:
		c.file, c.err = Decode(Path, fc.Data)
		c.blob = fc.SHA
	}
	l.mu.Lock()
	if _, dup := l.cache[key]; !dup {
		l.cache[key] = c
		l.order = append(l.order, key)
		if len(l.order) > l.size {
			delete(l.cache, l.order[0])
			l.order = l.order[1:]
		}
	}
	l.mu.Unlock()
	return c, nil
}

// Effective is the effective policy of a PR on base branch branch whose
// tip is sha: Failed (Invalid set) when the file is wrong. An error is a
// failed read: nothing may be decided until it succeeds.
func (l *Loader) Effective(ctx context.Context, op Operator, repo ghref.Repo, branch, sha string) (Effective, error) {
	f, err := l.Load(ctx, repo, sha)
	if _, bad := AsInvalid(err); bad {
		return Failed(op, err), nil
	}
	if err != nil {
		return Effective{}, err
	}
	return Resolve(op, f, branch), nil
}
