// Package buildinfo says which build of the service is running: the
// version stamped at build time, else what Go records of the VCS state.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is stamped by the build (Makefile, scripts/run.sh, Dockerfile):
//
//	go build -ldflags "-X github.com/acmepay/payments/internal/buildinfo.Version=$(git describe --always --dirty)"
//
// Empty in an unstamped build; Get falls back to the VCS revision.
var Version string

// Devel is the version of a build that carries neither a stamp nor a VCS
// revision (go run, go test, a build outside a git checkout).
const Devel = "(devel)"

// Info describes one build.
type Info struct {
	Version   string // stamped, else the module version, else the short revision (+"-dirty"), else Devel
	Revision  string // the VCS commit; "" when Go recorded none
	Modified  bool   // the tree had uncommitted changes
	Time      string // the commit time (RFC 3339); "" when unknown
	GoVersion string
}

// Get reads this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, bi)
}

func resolve(stamped string, bi *debug.BuildInfo) Info {
	info := Info{Version: stamped, GoVersion: runtime.Version()}
	module := ""
	if bi != nil {
		module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	switch {
	case info.Version != "":
	case module != "" && module != Devel && !pseudo(module, info.Revision):
		info.Version = module
	case info.Revision != "":
		info.Version = info.Revision[:min(12, len(info.Revision))]
		if info.Modified {
			info.Version += "-dirty"
		}
	default:
		info.Version = Devel
	}
	return info
}

// pseudo reports whether a module version is the one Go makes up from the
// VCS state (v0.0.0-<time>-<revision>[+dirty], since Go 1.24): no release,
// so the short revision says it better.
func pseudo(module, revision string) bool {
	m := strings.TrimSuffix(module, "+dirty")
	return len(revision) >= 12 && strings.HasSuffix(m, "-"+revision[:12])
}
