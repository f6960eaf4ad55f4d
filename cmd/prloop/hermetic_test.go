package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// The patterns are built from parts so that this file does not match them.
var (
	// apiDataDir is where the GitHub API reference data sat beside the
	// checkout before it moved into testdata/ folders.
	apiDataDir = "shared" + "/" + "github-api"
	// workspace is the development machine's checkout area, which a clone
	// elsewhere does not have.
	workspace = "/" + "work" + "/"
)

// outsidePaths reports the string literals of a Go file that name a path
// outside the repository: the old location of the API reference data, the
// workspace's absolute paths, and relative paths that climb above root from
// the file's directory, where its tests run. A filepath.Join or path.Join
// call is judged by its literal arguments joined, since those paths are
// spelled piecewise.
func outsidePaths(root, file string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	var found []string
	report := func(pos token.Pos, p string) {
		found = append(found, fset.Position(pos).String()+": "+strconv.Quote(p))
	}
	check := func(pos token.Pos, p string, complete bool) {
		slashed := filepath.ToSlash(p)
		switch {
		case strings.Contains(slashed, apiDataDir), strings.HasPrefix(slashed, workspace):
			report(pos, p)
		case complete && !filepath.IsAbs(p) && (p == ".." || strings.HasPrefix(slashed, "../")):
			rel, err := filepath.Rel(root, filepath.Join(dir, p))
			if err != nil || rel == ".." || strings.HasPrefix(filepath.ToSlash(rel), "../") {
				report(pos, p)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok {
				check(n.Pos(), s, true)
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Join" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "filepath" && pkg.Name != "path" {
				return true
			}
			var parts []string
			complete := true // every argument is a literal: the path is known
			for _, a := range n.Args {
				lit, ok := a.(*ast.BasicLit)
				s, isStr := stringLit(lit)
				if !ok || !isStr {
					complete = false
					continue
				}
				parts = append(parts, s)
			}
			if len(parts) > 1 {
				check(n.Pos(), filepath.Join(parts...), complete)
			}
		}
		return true
	})
	return found, nil
}

func stringLit(l *ast.BasicLit) (string, bool) {
	if l == nil || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// TestHermetic_NoGoFileReadsOutsideTheRepository keeps the tests true on a
// fresh clone with nothing beside it: no Go file, test or not, may name a
// path outside the repository.
func TestHermetic_NoGoFileReadsOutsideTheRepository(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	var files int
	err := eachGoFile(root, func(p string, src []byte) error {
		files++
		found, err := outsidePaths(root, p, src)
		if err != nil {
			return err
		}
		assert.Empty(t, found, "paths outside the repository: copy what the test needs into testdata/ beside it")
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk reached the repository's Go files")
}

// eachGoFile calls fn with every Go file of the repository at root and its
// contents, skipping hidden directories (.git, .ci's caches).
func eachGoFile(root string, fn func(path string, src []byte) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(p, src)
	})
}

// TestHermetic_OutsidePaths guards the check itself: a check that cannot
// fail proves nothing.
func TestHermetic_OutsidePaths(t *testing.T) {
	t.Parallel()
	root := filepath.FromSlash("/repo")
	file := filepath.Join(root, "services", "poller", "webhook_test.go")
	// {data} and {ws} stand for the patterns, which this file must not
	// spell out.
	fill := strings.NewReplacer("{data}", apiDataDir, "{ws}", workspace)
	tests := []struct {
		name, code string
		flagged    bool
	}{
		{name: "climbs out by joined literals", code: `filepath.Join("..", "..", "..", "shared", "x.json")`, flagged: true},
		{name: "climbs out in one literal", code: `os.ReadFile("../../../x.json")`, flagged: true},
		{name: "old reference data after a computed base", code: `filepath.Join(dir, "..", "shared", "github-api")`, flagged: true},
		{name: "old reference data in a message", code: `fmt.Errorf("want ../{data}")`, flagged: true},
		{name: "workspace absolute path", code: `os.ReadFile("{ws}x.json")`, flagged: true},
		{name: "testdata beside the test", code: `filepath.Join("testdata", "webhooks-openapi.json")`},
		{name: "repository root from the package", code: `filepath.Join("..", "..", "go.work")`},
		{name: "computed base climbing", code: `filepath.Join(dir, "..", "x")`},
		{name: "path.Join of a URL", code: `path.Join("/repos", "octo")`},
		{name: "other Join", code: `strings.Join([]string{"..", "..", "..", ".."}, "/")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "package p\n\nfunc f() { _ = " + fill.Replace(tt.code) + " }\n"
			found, err := outsidePaths(root, file, []byte(src))
			require.NoError(t, err)
			if tt.flagged {
				assert.NotEmpty(t, found)
			} else {
				assert.Empty(t, found)
			}
		})
	}
}
