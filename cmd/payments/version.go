package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// printVersion prints one line from the build information Go stamps into
// the binary: module version, VCS revision and time, Go version, platform.
func printVersion(stdout io.Writer) error {
	bi, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprintln(stdout, versionLine(bi))
	return err
}

func versionLine(bi *debug.BuildInfo) string {
	version, revision, when, modified := "(unknown)", "", "", false
	if bi != nil {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := "payments " + version
	if revision != "" {
		line += " commit " + revision
		if modified {
			line += " (modified)"
		}
		if when != "" {
			line += " of " + when
		}
	}
	return line + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// serviceVersion is the module version stamped into the binary, for the
// traces' service.version.
func serviceVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "(unknown)"
}
