package payment

import (
	"os/exec"
	"strings"
	"testing"
)

// The core returns typed answers and api/ renders them: nothing it imports,
// directly or not, may bring net/http in (a provider adapter's transport
// belongs in the adapter or in provider/reach).
func TestCoreImportsNoHTTP(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" {
			t.Fatalf("internal/payment depends on net/http")
		}
	}
}
