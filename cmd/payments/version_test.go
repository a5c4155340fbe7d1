package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The real binary reports the version the build stamped (make build, the
// image's VERSION build argument) and, unstamped inside a git checkout,
// the commit Go recorded rather than "(devel)" (the fallback's every case:
// internal/buildinfo's TestResolve).
func TestVersionOfTheBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the real binary; skipped in -short")
	}
	t.Run("Stamped", func(t *testing.T) {
		t.Parallel()
		bin := filepath.Join(t.TempDir(), "payments")
		out, err := exec.Command("go", "build", "-o", bin,
			"-ldflags", "-X github.com/acmepay/payments/internal/buildinfo.Version=v9.8.7-3-gabc1234-dirty", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
		if code, stdout, stderr := runBinary(t, bin, nil, "version"); code != 0 || !strings.HasPrefix(stdout, "payments v9.8.7-3-gabc1234-dirty ") {
			t.Fatalf("version: exit %d, %q %q", code, stdout, stderr)
		}
	})
	t.Run("RevisionWhenUnstamped", func(t *testing.T) {
		t.Parallel()
		bin := filepath.Join(t.TempDir(), "payments")
		if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
		info, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		_, rev, ok := strings.Cut(string(info), "vcs.revision=")
		if !ok {
			// Go stamps a checkout whose .git is a directory, not a git
			// worktree's .git file, nor a tree without git.
			t.Skip("Go recorded no VCS revision in this checkout (a git worktree, or no git): nothing to fall back on")
		}
		rev, _, _ = strings.Cut(rev, "\n")
		_, stdout, _ := runBinary(t, bin, os.Environ(), "version")
		if !strings.HasPrefix(stdout, "payments "+rev[:12]) || !strings.Contains(stdout, " commit "+rev) {
			t.Fatalf("version = %q, want the short revision %s as the version and commit %s", stdout, rev[:12], rev)
		}
	})
}
