package client

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// TestTypeScriptClient runs clients/typescript's node test against the
// real service: the provider loses its first answer (the service answers
// 202) and the client's fetch loses that answer too; createPayment
// retries with the intent's one key and the provider charged once.
// It needs node and `npm ci` in clients/typescript (make ts does both).
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "clients", "typescript")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript client's test is skipped")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "tsc")); err != nil {
		t.Skip("clients/typescript has no node_modules: run make ts (npm ci) to test the TypeScript client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}

	e := apitest.New(t, apitest.Options{})
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 1})
	run := exec.CommandContext(ctx, node, "--test", filepath.Join("dist", "test", "create.test.js"))
	run.Dir = dir
	run.Env = append(os.Environ(), "PAYMENTS_URL="+e.URL, "PAYMENTS_API_KEY="+e.APIKey, "ORDER_ID=pedido-ts-1")
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# pass 2") {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	apitest.WantAuthorizations(t, e.Sim, 1)
	sends := 0
	for _, r := range e.Sim.Requests() {
		if r.Op == "authorize" {
			sends++
		}
	}
	if sends < 2 {
		t.Fatalf("%d authorize requests at the provider, want the lost one re-sent", sends)
	}
}
