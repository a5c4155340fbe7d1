package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each statement the chaos run arms a database fault on is one the service
// still runs: a renamed query would leave its faults armed and never hit.
func TestDBFaultStatementsExist(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "postgres", "queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the queries: %v (%d files)", err, len(files))
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, name := range dbCommits {
		if !strings.Contains(all.String(), name) {
			t.Errorf("no query is %q: rename the fault's statement", strings.TrimSpace(name))
		}
	}
}
