package operations

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
)

func TestCursorCodec(t *testing.T) {
	t.Parallel()
	id := "pay_0123456789abcdef0123456789abcdef"
	c := StuckCursor{UpdatedAt: time.Date(2026, 12, 4, 10, 0, 0, 123456000, time.UTC), ID: id}
	got, err := StuckCursors.Decode(StuckCursors.Encode(c))
	if err != nil || !got.UpdatedAt.Equal(c.UpdatedAt) || got.ID != id {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, c)
	}
	if got, err := DiscrepancyCursors.Decode(DiscrepancyCursors.Encode("dsc_0123456789abcdef0123456789abcdef")); err != nil || got == "" {
		t.Fatalf("discrepancy round trip = %q, %v", got, err)
	}
	b := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, token := range []string{
		"zz", "_w", "%FF", b("\xff\xfe"), b("1.stuck.-1." + id), b("1.stuck.-9223372036854775808." + id),
		b("1.stuck.253402300800000000." + id), b("1.stuck.01." + id), b("1.stuck.1.pay_x"), b("2.stuck.1." + id),
		b("1.discrepancy.1." + id), b("-9223372036854775808." + id), StuckCursors.Encode(c) + "=",
		base64.URLEncoding.EncodeToString([]byte("1.stuck.1." + id)),
	} {
		if _, err := StuckCursors.Decode(token); payment.ErrorCode(err) != payment.CodeInvalidRequest {
			t.Errorf("Decode(%q) = %v, want invalid_request", token, err)
		}
	}
	if _, err := DiscrepancyCursors.Decode(StuckCursors.Encode(c)); payment.ErrorCode(err) != payment.CodeInvalidRequest {
		t.Errorf("a stuck-list token was taken as a discrepancy cursor")
	}
}
