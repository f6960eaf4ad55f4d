package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kelseyhightower/envconfig"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// testVarPrefix marks the test harness's own variables (PRLOOP_TEST_…),
// which reach a binary a test runs through its environment.
const testVarPrefix = config.Prefix + "TEST_"

// knownVars are the PRLOOP_* variables prloop reads: the envconfig names
// of every service's configuration (with the GitHub client's and the
// review policy's they embed) and of the operator commands' settings.
func knownVars() []string {
	var names []string
	for _, cfg := range []any{&poller.Config{}, &feedback.Config{}, &merger.Config{}, &escalator.Config{}, &cliSettings{}} {
		var b strings.Builder
		if err := envconfig.Usagef("", cfg, &b, "{{range .}}{{.Key}}\n{{end}}"); err != nil {
			panic(fmt.Sprintf("list the variables of %T: %v", cfg, err)) // a malformed struct tag: a programming error
		}
		for name := range strings.Lines(b.String()) {
			if name = strings.TrimSpace(name); name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// checkEnv refuses PRLOOP_* variables of environ (KEY=VALUE) that prloop
// does not read, naming each with the known name it is closest to: a
// misspelt setting would otherwise be ignored, silently.
func checkEnv(environ, known []string) error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.Prefix) || strings.HasPrefix(name, testVarPrefix) || slices.Contains(known, name) {
			continue
		}
		msg := name
		if s := closest(name, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		unknown = append(unknown, msg)
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	what := "unknown variable"
	if len(unknown) > 1 {
		what += "s"
	}
	return fmt.Errorf("%s %s: prloop reads no such setting; 'prloop run -h' lists them", what, strings.Join(unknown, ", "))
}

// closest is the known name at the smallest edit distance from name, when
// that is close enough to be a slip (a third of the name's length, after
// the prefix), or empty.
func closest(name string, known []string) string {
	best, bestD := "", len(strings.TrimPrefix(name, config.Prefix))/3+1
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the edit distance between a and b: insertions,
// deletions, substitutions and transpositions of adjacent bytes (the
// optimal string alignment distance; the names are ASCII), the slips of a
// hand typing a name.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
