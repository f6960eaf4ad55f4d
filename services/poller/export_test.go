package poller

import (
	"maps"
	"slices"
)

// Tracked are the keys of the PRs w keeps a written line of, sorted, for
// tests that show the writer forgets PRs that are done.
func (w *StatusWriter) Tracked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.last))
}
