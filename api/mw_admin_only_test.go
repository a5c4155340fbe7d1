package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/payment"
)

const testAdminToken = "admin-token-never-logged"

type adminFixture struct {
	t       *testing.T
	now     time.Time
	limiter *authlimit.Limiter
	handler http.Handler
	next    *nextHandler
	logs    *bytes.Buffer
}

func newAdminFixture(t *testing.T, token string) *adminFixture {
	log, logs := testLogger()
	f := &adminFixture{t: t, now: time.Unix(1_700_000_000, 0), next: &nextHandler{}, logs: logs}
	f.limiter = authlimit.New(authlimit.Config{Max: 3, Window: time.Minute, Now: func() time.Time { return f.now }})
	f.handler = adminOnly(log, token, f.limiter)(f.next)
	return f
}

// do sends a request from 192.0.2.1 with bearer ("": no Authorization).
func (f *adminFixture) do(bearer string) *httptest.ResponseRecorder {
	f.next.called = false
	req := httptest.NewRequest(http.MethodGet, "/admin/v1/payments", nil)
	req.RemoteAddr = "192.0.2.1:4321"
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if strings.Contains(f.logs.String(), testAdminToken) {
		f.t.Fatalf("the admin token is logged: %s", f.logs)
	}
	return rec
}

// Without a token the admin API does not exist, whatever is sent.
func TestAdminOnlyDisabled(t *testing.T) {
	f := newAdminFixture(t, "")
	for _, b := range []string{"", "anything"} {
		p := wantRecProblem(t, f.do(b), http.StatusNotFound, payment.CodeNotFound)
		if f.next.called || p.Detail != "no such resource" {
			t.Fatalf("bearer %q: called %v, problem %+v", b, f.next.called, p)
		}
	}
	if f.limiter.Len() != 0 {
		t.Fatal("a disabled admin API counted failures")
	}
}

func TestAdminOnlyToken(t *testing.T) {
	f := newAdminFixture(t, testAdminToken)
	if rec := f.do(testAdminToken); !f.next.called || rec.Code != http.StatusNoContent {
		t.Fatalf("the admin token: status %d, called %v", rec.Code, f.next.called)
	}
	for _, b := range []string{"", "wrong", testAdminToken + "x", strings.ToUpper(testAdminToken)} {
		f.now = f.now.Add(time.Minute) // each failure alone in its window
		p := wantRecProblem(t, f.do(b), http.StatusUnauthorized, payment.CodeUnauthorized)
		if f.next.called || p.Detail != "missing or invalid admin token" {
			t.Fatalf("bearer %q: called %v, problem %+v", b, f.next.called, p)
		}
	}
}

// Max failures within the window shut the address out, the right token
// too, with Retry-After until the oldest failure leaves the window; the
// limit reached is logged once.
func TestAdminOnlyRateLimited(t *testing.T) {
	f := newAdminFixture(t, testAdminToken)
	for i := range 3 {
		wantRecProblem(t, f.do("guess"), http.StatusUnauthorized, payment.CodeUnauthorized)
		if i == 0 {
			f.now = f.now.Add(20 * time.Second)
		}
	}
	lines := strings.Count(f.logs.String(), `"msg":"admin authentication failures reached the limit"`)
	if lines != 1 || !strings.Contains(f.logs.String(), `"client":"192.0.2.1/32"`) {
		t.Fatalf("logs %s, want one limit line naming 192.0.2.1/32", f.logs)
	}
	rec := f.do(testAdminToken)
	p := wantRecProblem(t, rec, http.StatusTooManyRequests, payment.CodeRateLimited)
	if f.next.called || p.Detail != "too many failed admin authentications from this address; retry later" {
		t.Fatalf("called %v, problem %+v", f.next.called, p)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "40" {
		t.Fatalf("Retry-After %q, want 40", ra)
	}
	f.now = f.now.Add(40 * time.Second)
	if rec := f.do(testAdminToken); !f.next.called || rec.Code != http.StatusNoContent {
		t.Fatalf("once the window passed: status %d, called %v", rec.Code, f.next.called)
	}
}
