package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// git runs git in this checkout and returns its trimmed output.
func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// previousRelease names the code that ran before the newest migration
// added: the parent of the last commit that added a file to migrations/,
// or HEAD while a new migration is not committed yet (a change being
// written). Added, not numbered: branches merge migrations out of number
// order. It skips the test without git history to read.
func previousRelease(t *testing.T) (commit, newest string) {
	t.Helper()
	if _, err := git("rev-parse", "--show-toplevel"); err != nil {
		t.Skip("no git history (not a git checkout, or no git): cannot build the release before the newest migration")
	}
	const sql = "../../migrations/*.sql"
	pending, err := git("status", "--porcelain", "--untracked-files=all", "--", sql)
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	for _, line := range strings.Split(pending, "\n") {
		if strings.HasPrefix(line, "??") || strings.HasPrefix(line, "A") {
			head, err := git("rev-parse", "HEAD")
			if err != nil {
				t.Fatal(err)
			}
			return head, strings.TrimSpace(line[2:])
		}
	}
	added, err := git("log", "-1", "--diff-filter=A", "--format=%H", "--name-only", "--", sql)
	if err != nil || added == "" {
		t.Fatalf("git log of migrations/: %v (%q)", err, added)
	}
	fields := strings.Fields(added)
	parent, err := git("rev-parse", "--verify", "--quiet", fields[0]+"^")
	if err != nil {
		t.Skipf("the commit that added %s (%s) has no parent in this clone (shallow?): cannot build the release before it", fields[1:], fields[0])
	}
	return parent, strings.Join(fields[1:], " ")
}

// buildCommit builds cmd/payments as it was at commit.
func buildCommit(t *testing.T, commit string) string {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "src.tar")
	// From the top: in a subdirectory git archive takes only that one.
	if out, err := exec.Command("git", "-C", "../..", "archive", "-o", archive, commit).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "payments-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/payments")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release (%s): %v\n%s", commit, err, out)
	}
	return bin
}

// TestPreviousReleaseOnNewestSchema is the rolling deploy's middle: the
// binary of the release before the newest migration keeps serving a
// database the new release has migrated, beside a new instance. It starts
// (migrating on start finds nothing it knows left to do), is ready, and
// creates, captures, refunds, reads and serves the events feed; the new
// instance replays its answers byte for byte. A migration that drops or
// renames what that release reads fails here (docs/upgrading.md).
func TestPreviousReleaseOnNewestSchema(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the previous release from git history; skipped in -short")
	}
	commit, newest := previousRelease(t)
	t.Logf("previous release: %s (before %s)", commit, newest)
	old := buildCommit(t, commit)
	e := apitest.New(t, apitest.Options{})
	previous := start(t, e, old)
	current := start(t, e, buildBinary(t, ""))
	if code, body := get(t, previous.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("the previous release on the newest schema: /readyz %d %s", code, body)
	}

	do := func(p *proc, method, path, key, body string, want int) *apitest.Response {
		t.Helper()
		r := e.Do(apitest.Request{Method: method, Path: path, Key: key, Body: body, BaseURL: p.url})
		apitest.WantStatus(t, r, want)
		return r
	}
	created := do(previous, http.MethodPost, "/v1/payments", "k-up-create", crashBody, http.StatusCreated)
	id := created.JSON(t)["id"].(string)
	do(previous, http.MethodPost, "/v1/payments/"+id+"/capture", "k-up-capture", `{}`, http.StatusOK)
	do(previous, http.MethodPost, "/v1/payments/"+id+"/refunds", "k-up-refund", `{"amount":500}`, http.StatusCreated)
	if got := do(previous, http.MethodGet, "/v1/payments/"+id, "", "", http.StatusOK).JSON(t); got["status"] != "captured" || got["amount_refunded"] != float64(500) {
		t.Fatalf("the previous release reads back %v", got)
	}
	e.FeedCaughtUp(t)
	var page struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := json.Unmarshal(do(previous, http.MethodGet, "/v1/events?limit=100", "", "", http.StatusOK).Body, &page); err != nil || len(page.Data) == 0 {
		t.Fatalf("the previous release's events feed: %v, %d events", err, len(page.Data))
	}
	do(previous, http.MethodGet, "/v1/events?limit=100&after="+page.NextCursor, "", "", http.StatusOK)

	// The new instance answers the same keys with what the old one stored.
	again := do(current, http.MethodPost, "/v1/payments", "k-up-create", crashBody, created.Status)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, created.Body) {
		t.Fatalf("the new release replays %s, the previous one answered %s", again.Body, created.Body)
	}
	if got := do(current, http.MethodGet, "/v1/payments/"+id, "", "", http.StatusOK).JSON(t); got["amount_refunded"] != float64(500) {
		t.Fatalf("the new release reads back %v", got)
	}
}
