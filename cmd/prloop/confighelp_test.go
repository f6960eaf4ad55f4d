package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunHelp_DescribesEveryVariable: `prloop run -h` follows each
// variable prloop reads with what it is (its desc tag). Issue #30: it
// listed 60 names without a word each. A field added without a desc tag
// fails here.
func TestRunHelp_DescribesEveryVariable(t *testing.T) {
	t.Parallel()
	p, _, _ := cliRun(t, []string{"GITHUB_TOKEN=", "GH_TOKEN="}, 30*time.Second, "run", "-h")
	help := p.Stderr.String()
	vars := knownVars()
	require.Greater(t, len(vars), 60)
	for _, name := range vars {
		m := regexp.MustCompile(`(?m)^  ` + name + `(?: \(default [^\n]*\))?\n      (\S[^\n]*)$`).FindStringSubmatch(help)
		if assert.NotNil(t, m, "run -h does not describe %s:\n%s", name, help) {
			assert.GreaterOrEqual(t, len(m[1]), 10, "%s's description", name)
		}
	}
}
