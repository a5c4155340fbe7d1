package mercadopago

import (
	"errors"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

func TestVerifySignature(t *testing.T) {
	// The digests were computed apart from this code:
	// printf '<manifest>' | openssl dgst -sha256 -hmac '<secret>'.
	const (
		msVector  = "776a361739f250949fc75c476481d013d1d9b7f203c775a755ff1510c3798c68" // id:123456;request-id:bb56a2f1-…;ts:1742505638683; with your_secret
		secVector = "ac46dda3d5bd98769a6bb38fbb45f6d3d9c81e6c8e16da86e0f3f0523b22642a" // id:abc123;request-id:r-1;ts:1742505638; with s3cr3t
		reqID     = "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"
	)
	at := time.UnixMilli(1742505638683)
	tests := []struct {
		name, sig, reqID, dataID, secret string
		now                              time.Time
		ok                               bool
	}{
		{"ts in milliseconds", "ts=1742505638683,v1=" + msVector, reqID, "123456", "your_secret", at, true},
		{"ts in seconds, data.id in lower case", "ts=1742505638,v1=" + secVector, "r-1", "ABC123", "s3cr3t", at, true},
		{"spaces around the parts", " ts=1742505638 , v1=" + secVector, "r-1", "abc123", "s3cr3t", at, true},
		{"wrong secret", "ts=1742505638683,v1=" + msVector, reqID, "123456", "other", at, false},
		{"other data.id", "ts=1742505638683,v1=" + msVector, reqID, "123457", "your_secret", at, false},
		{"other request id", "ts=1742505638683,v1=" + msVector, "r-2", "123456", "your_secret", at, false},
		{"ts changed", "ts=1742505638684,v1=" + msVector, reqID, "123456", "your_secret", at, false},
		{"too old", "ts=1742505638683,v1=" + msVector, reqID, "123456", "your_secret", at.Add(SignatureTolerance + time.Second), false},
		{"in the future", "ts=1742505638683,v1=" + msVector, reqID, "123456", "your_secret", at.Add(-SignatureTolerance - time.Second), false},
		{"no v1", "ts=1742505638683", reqID, "123456", "your_secret", at, false},
		{"no ts", "v1=" + msVector, reqID, "123456", "your_secret", at, false},
		{"ts not a number", "ts=x,v1=" + msVector, reqID, "123456", "your_secret", at, false},
		{"v1 not hex", "ts=1742505638683,v1=zz", reqID, "123456", "your_secret", at, false},
		{"empty header", "", reqID, "123456", "your_secret", at, false},
		{"no data.id", "ts=1742505638683,v1=" + msVector, reqID, "", "your_secret", at, false},
		{"no secret", "ts=1742505638683,v1=" + msVector, reqID, "123456", "", at, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.sig, tt.reqID, tt.dataID, tt.secret, tt.now)
			if tt.ok && err != nil {
				t.Fatalf("VerifySignature: %v", err)
			}
			if !tt.ok && !errors.Is(err, provider.ErrSignature) {
				t.Fatalf("VerifySignature = %v, want ErrSignature", err)
			}
		})
	}
}

func TestManifestLeavesOutMissingParts(t *testing.T) {
	if got := Manifest("123", "", "17"); got != "id:123;ts:17;" {
		t.Fatalf("Manifest = %q", got)
	}
}

func TestParseNotification(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"payment","action":"payment.updated","data":{"id":"123"}}`: "123",
		`{"type":"payment","data":{"id":123}}`:                              "123",
		`{"type":"payment"}`:                                                "",
	} {
		n, err := ParseNotification([]byte(body))
		if err != nil || n.DataID() != want || n.Type != "payment" {
			t.Fatalf("ParseNotification(%s) = %+v, %q, %v", body, n, n.DataID(), err)
		}
	}
	if _, err := ParseNotification([]byte("{")); err == nil {
		t.Fatal("ParseNotification took a broken body")
	}
}
