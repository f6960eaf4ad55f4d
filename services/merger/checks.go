package merger

import "slices"

// union returns the names in a or b, sorted, once each.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
