package operations

import (
	"strings"
	"testing"
)

// TestNewRefusesMissingDependencies: a Service without its dependencies
// is refused at wiring, not at the first operator's request.
func TestNewRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("New(Config{}) = %v, want the required dependencies named", err)
	}
}

func TestParseStatuses(t *testing.T) {
	t.Parallel()
	got, err := ParseStatuses("unknown, processing")
	if err != nil || len(got) != 2 || got[0] != "unknown" || got[1] != "processing" {
		t.Fatalf("ParseStatuses = %v, %v", got, err)
	}
	if _, err := ParseStatuses("unknown,nope"); err == nil {
		t.Fatal("an unknown status was accepted")
	}
}
