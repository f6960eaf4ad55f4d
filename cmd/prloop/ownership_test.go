package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/proctest"
)

// recordOwners maps each package that holds a service's records to the
// directories whose Go files may import it: the service that owns the
// records, and the operator's commands and the chaos suite, which read
// them. Every other
// service learns what it needs from events (see "One writer" in package
// state); NATS permissions enforce the same at run time
// (TestNATSAuth_DeployServerRefusesForgedApprovals).
// A service's own package holds its private records (feedback's attempts,
// the merger's queue, the escalator's escalations): no other service
// imports it; cmd/prloop composes them into one process.
var recordOwners = map[string][]string{
	"github.com/prloop/prloop/pkg/state":          {"services/poller", "cmd/prloop", "cmd/chaos", "pkg/state"},
	"github.com/prloop/prloop/services/poller":    {"services/poller", "cmd/prloop"},
	"github.com/prloop/prloop/services/feedback":  {"services/feedback", "cmd/prloop"},
	"github.com/prloop/prloop/services/merger":    {"services/merger", "cmd/prloop"},
	"github.com/prloop/prloop/services/escalator": {"services/escalator", "cmd/prloop"},
}

// TestOwnership_NoServiceUsesAnothersRecords reads the imports of every Go
// file in the repository, tests included: a package that holds one
// service's records is imported only where its owner allows.
func TestOwnership_NoServiceUsesAnothersRecords(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	var offenders []string
	importers := map[string]int{}
	err := eachGoFile(root, func(path string, src []byte) error {
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			allowed, held := recordOwners[p]
			if !held {
				continue
			}
			importers[p]++
			if !slices.ContainsFunc(allowed, func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }) {
				offenders = append(offenders, filepath.ToSlash(path[len(root)+1:])+" imports "+p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	for p := range recordOwners {
		assert.NotZero(t, importers[p], "no file imports %s: is the walk reading the repository?", p)
	}
	assert.Empty(t, offenders, "a service reads or writes records another service owns; take what it needs from an event instead")
}
