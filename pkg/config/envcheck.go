package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// TestVarPrefix marks the test harness's own variables (PRLOOP_TEST_…),
// which reach a binary a test runs through its environment.
const TestVarPrefix = Prefix + "TEST_"

// CheckEnv refuses PRLOOP_* variables of environ (KEY=VALUE) that prloop
// does not read, naming each with the known name it is closest to: a
// misspelt setting would otherwise be ignored, silently.
func CheckEnv(environ, known []string) error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix) || strings.HasPrefix(name, TestVarPrefix) || slices.Contains(known, name) {
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
	return fmt.Errorf("%s %s: prloop reads no such setting; 'prloop run -h' and docs/configuration.md list them", what, strings.Join(unknown, ", "))
}

// closest is the known name at the smallest edit distance from name, when
// that is close enough to be a slip (a third of the name's length, after
// the prefix), or empty.
func closest(name string, known []string) string {
	best, bestD := "", len(strings.TrimPrefix(name, Prefix))/3+1
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
