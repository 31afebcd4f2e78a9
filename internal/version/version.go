// Package version says which dsmount this is: the module version a
// `go install ...@vX` build records, or the VCS revision a build from a
// checkout records, or what the linker set (-ldflags "-X
// github.com/dsmount/dsmount/internal/version.override=v1.2.3").
package version

import (
	"runtime/debug"
	"sync"
)

// override is set by the linker for release builds; empty otherwise.
var override string

var get = sync.OnceValue(func() string {
	if override != "" {
		return override
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "devel-" + rev + modified
})

// String is this build's version, e.g. "v0.3.0" or "devel-1a2b3c4d5e6f+dirty".
func String() string { return get() }
