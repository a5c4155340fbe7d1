package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/settings"
)

// The table is one block: a row for every setting, in order, and no line
// between its rows that would split it in two.
func TestTableIsOneBlockWithEverySetting(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := render(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| variable |") {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatal("no settings table")
	}
	rows := lines[start+2:]
	for i, s := range settings.All {
		if i >= len(rows) || !strings.HasPrefix(rows[i], "| `"+s.Name+"` |") || strings.Count(rows[i], " | ") < 2 {
			t.Fatalf("row %d is %q, want %s's", i, rows[min(i, len(rows)-1)], s.Name)
		}
	}
	if next := rows[len(settings.All)]; next != "" {
		t.Fatalf("the table goes on with %q", next)
	}
}

// docs/configuration.md is what gendoc writes (make config-diff checks the
// same in make verify).
func TestConfigurationDocIsCurrent(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := render(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatal("docs/configuration.md is stale: run go generate ./internal/settings")
	}
}
