package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestCreateLogLinesNameThePayment: every line a create writes carries the
// request id the client sent, the account and the payment, and the
// provider call names its attempt and provider; no line carries the raw
// key or the payment method.
func TestCreateLogLinesNameThePayment(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	const reqID, key = "merchant-req-0042", "client-key-never-logged-42"
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key,
		Headers: map[string]string{"X-Request-Id": reqID}, Body: createBody("pedido-logs-42", 2000)})
	wantStatus(t, r, http.StatusCreated)
	if got := r.Header.Get("X-Request-Id"); got != reqID {
		t.Fatalf("X-Request-Id echoed %q, want %q", got, reqID)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(e.Logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["request_id"] == reqID {
			lines = append(lines, l)
		}
	}
	msgs := map[string]bool{}
	for _, l := range lines {
		msgs[l["msg"].(string)] = true
		if l["payment_id"] != p.ID || l["account_id"] != e.Account.ID || l["key_hash"] == nil {
			t.Errorf("line lacks payment_id %s, account_id %s or key_hash: %v", p.ID, e.Account.ID, l)
		}
		if l["msg"] == "provider call" && (l["attempt_id"] == nil || l["provider"] != "stripe") {
			t.Errorf("provider call line lacks its attempt or provider: %v", l)
		}
	}
	for _, want := range []string{"request", "provider call", "stripe call"} {
		if !msgs[want] {
			t.Errorf("no %q line with the request id; got %v", want, msgs)
		}
	}
	for _, s := range []string{key, "pm_card_visa", e.APIKey} {
		if strings.Contains(e.Logs.String(), s) {
			t.Errorf("logs contain %q", s)
		}
	}
}
