// Package browsertest drives Debian's Chromium headless for the tests of
// the pages the service and its examples serve.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Find returns the browser to drive: CHROMIUM_BIN, or the first of
// Debian's and others' names on PATH. Without one the test fails where a
// full run is required (CI=true, or REQUIRE_CHROMIUM=1 as scripts/test.sh
// sets it) and skips elsewhere, saying why.
func Find(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no Chromium found (CHROMIUM_BIN, or chromium on PATH): install Debian's chromium (apt-get install -y chromium); scripts/test.sh does so when it is missing"
	if os.Getenv("CI") == "true" || os.Getenv("REQUIRE_CHROMIUM") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// Start starts a fresh headless Chromium (its own profile, no background
// traffic) with a window of width × height and returns a tab's context,
// closed when the test ends.
func Start(t testing.TB, bin string, width, height int) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height))
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	// The first Do starts the browser, and lives as long as its context: no
	// timeout on it. Each step of a test gets its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}
