package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/payment"
)

// FuzzIdempotencyKeyHeader: whatever the header lines, the key is either
// refused with a client error or is 1 to 255 visible ASCII characters taken
// from the one line sent; two lines are always idempotency_key_invalid.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	for _, seed := range []struct {
		a, b  string
		lines uint8
	}{
		{"k-1", "", 1}, {"k-1", "k-1", 2}, {"k-1", "k-2", 2}, {`"abc"`, "", 1}, {`""`, "", 1}, {"", "", 0},
		{"", "k", 2}, {"a b", "", 1}, {strings.Repeat("x", 256), "", 1}, {"\x00", "", 1}, {"é", "", 1}, {`"a\"b"`, "", 1},
	} {
		f.Add(seed.a, seed.b, seed.lines)
	}
	f.Fuzz(func(t *testing.T, a, b string, lines uint8) {
		r := httptest.NewRequest(http.MethodPost, "/v1/payments", nil)
		sent := []string{a, b, a}[:lines%4]
		for _, v := range sent {
			r.Header.Add("Idempotency-Key", v)
		}
		key, err := idempotencyKey(r)
		code := payment.ErrorCode(err)
		switch {
		case len(sent) > 1:
			if code != payment.CodeIdempotencyKeyInvalid {
				t.Fatalf("%d lines %q: got %q, %v; want idempotency_key_invalid", len(sent), sent, key, err)
			}
		case err != nil:
			if code != payment.CodeIdempotencyKeyInvalid && code != payment.CodeIdempotencyKeyMissing {
				t.Fatalf("%q: error %v is not a key error", sent, err)
			}
			if code == payment.CodeIdempotencyKeyMissing && len(sent) == 1 && sent[0] != "" && sent[0] != `""` {
				t.Fatalf("%q: a present key is reported missing", sent)
			}
		default:
			if len(sent) != 1 || (key != sent[0] && `"`+key+`"` != sent[0]) {
				t.Fatalf("%q: key %q is not the one sent", sent, key)
			}
			if len(key) < 1 || len(key) > 255 {
				t.Fatalf("%q: key of %d bytes accepted", sent, len(key))
			}
			for i := 0; i < len(key); i++ {
				if key[i] < 0x21 || key[i] > 0x7e {
					t.Fatalf("%q: key with byte %#x accepted", sent, key[i])
				}
			}
		}
	})
}

// FuzzContentEncoding: only codings that are all identity (in any case,
// with any list white space and empty elements) are accepted, and several
// lines mean the same as one comma-separated line.
func FuzzContentEncoding(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"identity", ""}, {"IDENTITY", "identity"}, {"gzip", ""}, {"identity, gzip", ""}, {" , identity ,", ""},
		{"identity", "br"}, {"identityx", ""}, {"ident ity", ""}, {"\tidentity\t", ""}, {"identity;q=1", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := identityEncoding([]string{a, b})
		if got != identityEncoding([]string{a + "," + b}) {
			t.Fatalf("%q and %q: two lines differ from one joined line", a, b)
		}
		if got != (identityEncoding([]string{a}) && identityEncoding([]string{b})) {
			t.Fatalf("%q and %q: the result is not both lines' together", a, b)
		}
		if !got {
			return
		}
		for _, v := range []string{a, b} {
			for c := range strings.SplitSeq(v, ",") {
				if c = strings.Trim(c, " \t"); c != "" && !strings.EqualFold(c, "identity") {
					t.Fatalf("%q accepted with the coding %q", v, c)
				}
			}
		}
		if identityEncoding([]string{a, b, "gzip"}) {
			t.Fatalf("%q, %q, gzip accepted", a, b)
		}
	})
}
