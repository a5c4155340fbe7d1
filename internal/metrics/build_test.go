package metrics

import (
	"testing"

	"github.com/acmepay/payments/internal/buildinfo"
)

// payments_build_info is one series at 1 naming the running build.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	m := New(nil, nil, nil)
	bi := buildinfo.Get()
	sum, n := series(t, m, "payments_build_info", map[string]string{
		"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion})
	if n != 1 || sum != 1 {
		t.Fatalf("payments_build_info %+v: %d series summing to %v, want one at 1", bi, n, sum)
	}
	if _, all := series(t, m, "payments_build_info", nil); all != 1 {
		t.Fatalf("%d payments_build_info series, want 1", all)
	}
}
