package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
)

// fakeAccounts authenticates like account.Service: an unknown or empty key
// is payment.ErrNotFound; err, when set, is every answer.
type fakeAccounts struct {
	keys map[string]account.Account
	err  error
	got  []string
}

func (f *fakeAccounts) Authenticate(_ context.Context, key string) (account.Account, error) {
	f.got = append(f.got, key)
	if f.err != nil {
		return account.Account{}, f.err
	}
	a, ok := f.keys[key]
	if !ok {
		return account.Account{}, payment.ErrNotFound
	}
	return a, nil
}

const testAPIKey = "sk_api_key_never_logged"

func serveAuthenticate(t *testing.T, f *fakeAccounts, authorization string) (*httptest.ResponseRecorder, *nextHandler, string) {
	t.Helper()
	log, logs := testLogger()
	next := &nextHandler{}
	req := httptest.NewRequest(http.MethodGet, "/v1/payments", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	authenticate(log, f)(next).ServeHTTP(rec, req)
	if strings.Contains(logs.String(), testAPIKey) {
		t.Fatalf("the API key is logged: %s", logs)
	}
	return rec, next, logs.String()
}

// The bearer is found in any case of the scheme, trimmed, and the account
// is in the request's context.
func TestAuthenticateAccount(t *testing.T) {
	for _, h := range []string{"Bearer " + testAPIKey, "bearer " + testAPIKey, "BEARER   " + testAPIKey + " "} {
		f := &fakeAccounts{keys: map[string]account.Account{testAPIKey: {ID: "acct_1"}}}
		rec, next, _ := serveAuthenticate(t, f, h)
		if !next.called || rec.Code != http.StatusNoContent || accountFrom(next.req).ID != "acct_1" {
			t.Fatalf("Authorization %q: status %d, called %v", h, rec.Code, next.called)
		}
	}
}

// A missing, malformed or unknown key is 401 unauthorized, whatever the
// store says about it.
func TestAuthenticateRefuses(t *testing.T) {
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic " + testAPIKey, testAPIKey, "Bearer sk_unknown"} {
		f := &fakeAccounts{keys: map[string]account.Account{testAPIKey: {ID: "acct_1"}}}
		rec, next, logs := serveAuthenticate(t, f, h)
		p := wantRecProblem(t, rec, http.StatusUnauthorized, payment.CodeUnauthorized)
		if next.called || p.Detail != "missing or invalid API key" || logs != "" {
			t.Fatalf("Authorization %q: called %v, problem %+v, logs %q", h, next.called, p, logs)
		}
	}
	if accountFrom(httptest.NewRequest(http.MethodGet, "/", nil)).ID != "" {
		t.Fatal("an account outside authenticate")
	}
}

// A store that cannot answer is not a wrong key: 503 when unavailable, a
// domain error as it is, anything else a logged 500.
func TestAuthenticateStoreErrors(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   payment.Code
		logged string
	}{
		{fmt.Errorf("%w: reset", payment.ErrUnavailable), http.StatusServiceUnavailable, payment.CodeUnavailable, "database unavailable"},
		{account.ErrProviderUnreachable, http.StatusServiceUnavailable, payment.CodeUnavailable, ""},
		{errors.New("decrypt: bad"), http.StatusInternalServerError, payment.CodeInternal, "internal error"},
	}
	for _, c := range cases {
		rec, next, logs := serveAuthenticate(t, &fakeAccounts{err: c.err}, "Bearer "+testAPIKey)
		wantRecProblem(t, rec, c.status, c.code)
		if next.called || (c.logged == "") != (logs == "") || !strings.Contains(logs, c.logged) {
			t.Fatalf("%v: called %v, logs %q, want %q", c.err, next.called, logs, c.logged)
		}
	}
}
