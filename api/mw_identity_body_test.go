package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/payment"
)

func serveIdentityBody(values []string) (*httptest.ResponseRecorder, *nextHandler) {
	next := &nextHandler{}
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{}`))
	for _, v := range values {
		req.Header.Add("Content-Encoding", v)
	}
	rec := httptest.NewRecorder()
	identityBody(next).ServeHTTP(rec, req)
	return rec, next
}

// Any coding but identity, on any of the field's lines, is 415 before the
// body is read.
func TestIdentityBodyRefusesCodings(t *testing.T) {
	for _, ce := range [][]string{{"gzip"}, {"GZIP"}, {"identity, gzip"}, {"identity", "br"}, {"x-made-up"}, {",deflate,"}} {
		rec, next := serveIdentityBody(ce)
		p := wantRecProblem(t, rec, http.StatusUnsupportedMediaType, payment.CodeUnsupportedMediaType)
		if next.called || p.Detail != "send the body without a Content-Encoding (identity only)" {
			t.Fatalf("Content-Encoding %q: called %v, problem %+v", ce, next.called, p)
		}
	}
}

func TestIdentityBodyLetsIdentityThrough(t *testing.T) {
	for _, ce := range [][]string{nil, {""}, {"identity"}, {"Identity , IDENTITY"}, {" , ,\tidentity"}, {"identity", ""}} {
		rec, next := serveIdentityBody(ce)
		if !next.called || rec.Code != http.StatusNoContent {
			t.Fatalf("Content-Encoding %q: status %d, called %v", ce, rec.Code, next.called)
		}
	}
}
