package poller

// Tracked is how many PRs w keeps a written line of, for tests that show
// the writer forgets PRs that are done.
func (w *StatusWriter) Tracked() int { return w.tracked() }
