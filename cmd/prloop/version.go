package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…" (the
// release build does); otherwise prloop describes itself from the build
// information Go records.
var version = "dev"

// versionString is prloop's version for `prloop version` and the logs.
func versionString() string {
	info, _ := debug.ReadBuildInfo()
	return describeVersion(version, info)
}

// describeVersion says which prloop this is: the release version stamped
// with -ldflags; else the module version `go install …@vX` records; else,
// for a build from a checkout, "dev" with the commit, its time and
// whether the tree had changes. It is pure.
func describeVersion(stamped string, info *debug.BuildInfo) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		return "dev"
	}
	out := "dev+" + rev[:min(len(rev), 12)]
	if settings["vcs.modified"] == "true" {
		out += "-dirty"
	}
	if t := settings["vcs.time"]; t != "" {
		out += " (" + strings.TrimSuffix(t, "Z") + "Z)"
	}
	return out
}
