package feedback

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Host-side file operations in a worktree after the agent ran. The agent
// owns every name there: any directory on a path may be a symbolic link
// it planted, pointing at prloop's data directory, and the names come from
// the sandboxed git, which reads the agent's config. So prloop resolves
// them through an os.Root opened on the worktree, which refuses any path,
// link or "..", that leads out of it (openat2 RESOLVE_BENEATH on Linux),
// and never follows a link in the last component of a path it removes.

// removeBeneath removes the files names (relative to dir) without leaving
// dir: a name that leads out of it, through a link or "..", is refused,
// and a link itself is removed, never what it points to. A name that is
// gone already is no error.
func removeBeneath(dir string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	var errs []error
	for _, name := range names {
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
