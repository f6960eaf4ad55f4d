package sandbox

import (
	"os"
	"path/filepath"
	"sort"
)

// mountPath is one host path shown in the sandbox at the same path.
type mountPath struct {
	Path     string
	ReadOnly bool
	Optional bool // skipped when missing on the host (Options paths)
}

// userPaths lists the caller's paths, cleaned and ordered so a parent is
// mounted before anything inside it (the later mount wins).
func (s *Sandbox) userPaths(c Cmd) []mountPath {
	var ps []mountPath
	add := func(paths []string, ro, optional bool) {
		for _, p := range paths {
			if p != "" {
				ps = append(ps, mountPath{Path: filepath.Clean(p), ReadOnly: ro, Optional: optional})
			}
		}
	}
	add(s.opts.ReadOnly, true, true)
	add(s.opts.Writable, false, true)
	add(c.ReadOnly, true, false)
	add(c.Writable, false, false)
	add([]string{c.Dir}, false, false)
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].Path) < len(ps[j].Path) })
	return ps
}

// systemPath is one of systemDirs as it exists on the host.
type systemPath struct {
	Path    string
	Symlink string // the link's target when the host path is a symlink (merged /usr)
}

// hostSystemPaths returns the systemDirs that exist on the host.
func hostSystemPaths() []systemPath {
	var out []systemPath
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		sp := systemPath{Path: d}
		if fi.Mode()&os.ModeSymlink != 0 {
			if sp.Symlink, err = os.Readlink(d); err != nil {
				continue
			}
		} else if !fi.IsDir() {
			continue
		}
		out = append(out, sp)
	}
	return out
}
