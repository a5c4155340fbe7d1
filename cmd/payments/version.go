package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/acmepay/payments/internal/buildinfo"
)

// printVersion prints one line: the version stamped at build time (or the
// VCS revision Go recorded), commit and its time, Go version, platform.
func printVersion(stdout io.Writer) error {
	_, err := fmt.Fprintln(stdout, versionLine(buildinfo.Get()))
	return err
}

func versionLine(bi buildinfo.Info) string {
	line := "payments " + bi.Version
	if bi.Revision != "" {
		line += " commit " + bi.Revision
		if bi.Modified {
			line += " (modified)"
		}
		if bi.Time != "" {
			line += " of " + bi.Time
		}
	}
	return line + " " + bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// serviceVersion is the version stamped into the binary, for the traces'
// service.version.
func serviceVersion() string { return buildinfo.Get().Version }
