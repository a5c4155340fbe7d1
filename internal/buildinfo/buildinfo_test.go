package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	vcs := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: Devel}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "9955798abc0123456789"}, {Key: "vcs.time", Value: "2026-12-03T06:00:00Z"},
			{Key: "vcs.modified", Value: modified}}}
	}
	cases := []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    Info
	}{
		{"StampWins", "v1.4.0-3-g9955798-dirty", vcs("true"),
			Info{Version: "v1.4.0-3-g9955798-dirty", Revision: "9955798abc0123456789", Modified: true, Time: "2026-12-03T06:00:00Z"}},
		{"ModuleVersion", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, Info{Version: "v1.4.0"}},
		{"RevisionWhenUnstamped", "", vcs("false"),
			Info{Version: "9955798abc01", Revision: "9955798abc0123456789", Time: "2026-12-03T06:00:00Z"}},
		{"DirtyRevision", "", vcs("true"),
			Info{Version: "9955798abc01-dirty", Revision: "9955798abc0123456789", Modified: true, Time: "2026-12-03T06:00:00Z"}},
		{"Nothing", "", &debug.BuildInfo{Main: debug.Module{Version: Devel}}, Info{Version: Devel}},
		{"NoBuildInfo", "", nil, Info{Version: Devel}},
	}
	for _, c := range cases {
		c.want.GoVersion = runtime.Version()
		if got := resolve(c.stamped, c.bi); got != c.want {
			t.Errorf("%s: resolve = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Go 1.24 and later make up a pseudo-version from the VCS state when the
// build is not stamped; the short revision stands for it.
func TestResolvePseudoVersion(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205024339-f67eaf6dc82a+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "f67eaf6dc82aab4ffee4222a6e10b93adb02119c"}, {Key: "vcs.modified", Value: "true"}}}
	if got := resolve("", bi).Version; got != "f67eaf6dc82a-dirty" {
		t.Fatalf("version = %q, want f67eaf6dc82a-dirty", got)
	}
	bi.Main.Version = "v1.4.0"
	if got := resolve("", bi).Version; got != "v1.4.0" {
		t.Fatalf("a release's module version = %q, want v1.4.0", got)
	}
}
