package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/payment"
)

func serveRejectBadText(t *testing.T, req *http.Request) (*httptest.ResponseRecorder, *nextHandler) {
	t.Helper()
	log, logs := testLogger()
	next := &nextHandler{}
	rec := httptest.NewRecorder()
	rejectBadText(log)(next).ServeHTTP(rec, req)
	if logs.Len() != 0 {
		t.Fatalf("a refusal was logged: %s", logs)
	}
	return rec, next
}

// A path that is not text names no resource: 404.
func TestRejectBadTextPath(t *testing.T) {
	for _, path := range []string{"/v1/payments/pay_\xff", "/v1/payments/pay_\x00"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = path
		rec, next := serveRejectBadText(t, req)
		p := wantRecProblem(t, rec, http.StatusNotFound, payment.CodeNotFound)
		if next.called || p.Detail != "no such resource" {
			t.Fatalf("path %q: called %v, problem %+v", path, next.called, p)
		}
	}
}

// A header or query parameter that is not text is a 400 naming it, never
// echoing it; a query that does not parse is a 400 too.
func TestRejectBadTextHeaderAndQuery(t *testing.T) {
	cases := []struct {
		query, header, field, detail string
	}{
		{header: "X-Anything", field: "X-Anything", detail: "the request has invalid fields"},
		{query: "order_id=a%FFb", field: "order_id", detail: "the request has invalid fields"},
		{query: "order_id=a%00b", field: "order_id", detail: "the request has invalid fields"},
		{query: "k%FF=v", field: "k?", detail: "the request has invalid fields"},
		{query: "order_id=%zz", detail: "the query string is malformed"},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodGet, "/v1/payments?"+c.query, nil)
		if c.header != "" {
			req.Header.Set(c.header, "a\xffb")
		}
		rec, next := serveRejectBadText(t, req)
		p := wantRecProblem(t, rec, http.StatusBadRequest, payment.CodeInvalidRequest)
		if next.called || p.Detail != c.detail || strings.Contains(rec.Body.String(), "\xff") {
			t.Fatalf("%+v: called %v, body %s", c, next.called, rec.Body)
		}
		if c.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != c.field) {
			t.Fatalf("%+v: errors %+v, want one naming %q", c, p.Errors, c.field)
		}
	}
}

func TestRejectBadTextLetsTextThrough(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/v1/payments/pay_ação?order_id=pedido%20%C3%A7", nil)
	req.Header.Set("X-Anything", "ação")
	rec, next := serveRejectBadText(t, req)
	if !next.called || rec.Code != http.StatusNoContent {
		t.Fatalf("status %d %s, called %v", rec.Code, rec.Body, next.called)
	}
}
