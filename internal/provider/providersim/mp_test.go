package providersim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

const mpToken = "TEST-1234567890123456-010203-0123456789abcdef0123456789abcdef-987654321"

// mpAnswer is a decoded Mercado Pago answer.
type mpAnswer struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// mp sends one Mercado Pago API request with a JSON body (nil: none).
func (e *env) mp(t *testing.T, method, path, token, idemKey string, body any) mpAnswer {
	t.Helper()
	a, err := e.tryMP(method, path, token, idemKey, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryMP is mp for any goroutine: it reports what went wrong instead of
// failing the test.
func (e *env) tryMP(method, path, token, idemKey string, body any) (mpAnswer, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return mpAnswer{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		return mpAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idemKey != "" {
		req.Header.Set("X-Idempotency-Key", idemKey)
	}
	res, err := e.http.Do(req)
	if err != nil {
		return mpAnswer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return mpAnswer{}, err
	}
	a := mpAnswer{status: res.StatusCode, header: res.Header, raw: raw}
	if err := json.Unmarshal(raw, &a.body); err != nil && res.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return a, nil
}

func (a mpAnswer) want(t *testing.T, status int) mpAnswer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status = %d, want %d: %s", a.status, status, a.raw)
	}
	return a
}

func (a mpAnswer) id() string { return strconv.FormatInt(int64(a.body["id"].(float64)), 10) }

func (a mpAnswer) state() string {
	return a.body["status"].(string) + "/" + a.body["status_detail"].(string)
}

func mpCard(token string, amount float64) map[string]any {
	return map[string]any{"transaction_amount": amount, "token": token, "installments": 1,
		"payment_method_id": "master", "payer": map[string]any{"email": "buyer@example.com"}}
}

func mpPix(amount float64, ref string) map[string]any {
	return map[string]any{"transaction_amount": amount, "payment_method_id": "pix", "external_reference": ref,
		"payer": map[string]any{"email": "buyer@example.com"}}
}

func TestMPCardsByCardholderName(t *testing.T) {
	e := start(t, Options{})
	want := map[string]string{
		"APRO": "approved/accredited", "OTHE": "rejected/cc_rejected_other_reason",
		"CONT": "pending/pending_contingency", "CALL": "rejected/cc_rejected_call_for_authorize",
		"FUND": "rejected/cc_rejected_insufficient_amount", "SECU": "rejected/cc_rejected_bad_filled_security_code",
		"EXPI": "rejected/cc_rejected_bad_filled_date", "FORM": "rejected/cc_rejected_bad_filled_other",
	}
	for name, state := range want {
		a := e.mp(t, "POST", "/v1/payments", mpToken, "k-"+name, mpCard("tok_"+name, 10.5)).want(t, http.StatusCreated)
		if a.state() != state {
			t.Errorf("%s: %s, want %s", name, a.state(), state)
		}
		if _, err := strconv.ParseInt(a.id(), 10, 64); err != nil || a.body["transaction_amount"] != 10.5 {
			t.Errorf("%s: id %v amount %v", name, a.body["id"], a.body["transaction_amount"])
		}
		if got := a.body["card"].(map[string]any)["cardholder"].(map[string]any)["name"]; got != name {
			t.Errorf("cardholder = %v, want %s", got, name)
		}
	}
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 8, Authorizations: 1, Declines: 6})
	e.mp(t, "POST", "/v1/payments", mpToken, "k-bad", mpCard("tok_NOPE", 1)).want(t, http.StatusBadRequest)
	e.mp(t, "POST", "/v1/payments", "", "k-x", mpCard("tok_APRO", 1)).want(t, http.StatusUnauthorized)
	e.mp(t, "POST", "/v1/payments", keyA, "k-x", mpCard("tok_APRO", 1)).want(t, http.StatusUnauthorized)
	e.sim.RevokeSecret(mpToken)
	e.mp(t, "GET", "/v1/payments/1300000001", mpToken, "", nil).want(t, http.StatusUnauthorized)
}

func TestMPCaptureFalseAuthorizesAndAbsentCaptures(t *testing.T) {
	e := start(t, Options{})
	body := mpCard("tok_APRO", 100)
	body["capture"] = false
	auth := e.mp(t, "POST", "/v1/payments", mpToken, "k1", body).want(t, http.StatusCreated)
	if auth.state() != "authorized/pending_capture" || auth.body["captured"] != false {
		t.Fatalf("capture:false: %s captured=%v", auth.state(), auth.body["captured"])
	}
	now := e.mp(t, "POST", "/v1/payments", mpToken, "k2", mpCard("tok_APRO", 100)).want(t, http.StatusCreated)
	if now.state() != "approved/accredited" || now.body["captured"] != true {
		t.Fatalf("no capture field: %s captured=%v", now.state(), now.body["captured"])
	}
	path := "/v1/payments/" + auth.id()
	e.mp(t, "PUT", path, mpToken, "k3", map[string]any{"capture": true, "transaction_amount": 200}).want(t, http.StatusBadRequest)
	got := e.mp(t, "PUT", path, mpToken, "k4", map[string]any{"capture": true, "transaction_amount": 60}).want(t, http.StatusOK)
	if got.state() != "approved/accredited" || got.body["captured"] != true || got.body["transaction_amount"] != 60.0 {
		t.Fatalf("captured: %s", got.raw)
	}
	e.mp(t, "PUT", path, mpToken, "k5", map[string]any{"capture": true}).want(t, http.StatusBadRequest)
	// An approved payment cannot be cancelled, only refunded.
	e.mp(t, "PUT", path, mpToken, "k6", map[string]any{"status": "cancelled"}).want(t, http.StatusBadRequest)
	if g := e.mp(t, "GET", path, mpToken, "", nil).want(t, http.StatusOK); g.state() != "approved/accredited" {
		t.Fatalf("after refused cancel: %s", g.state())
	}
	other := e.mp(t, "POST", "/v1/payments", mpToken, "k7", body).want(t, http.StatusCreated)
	c := e.mp(t, "PUT", "/v1/payments/"+other.id(), mpToken, "k8", map[string]any{"status": "cancelled"}).want(t, http.StatusOK)
	if c.state() != "cancelled/by_collector" {
		t.Fatalf("cancel authorized: %s", c.state())
	}
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 9, Authorizations: 3, Captures: 1, Cancels: 1})
}

func TestMPIdempotencyRetention(t *testing.T) {
	clock := newClock()
	e := start(t, Options{Now: clock.Now, MPKeyRetention: time.Hour})
	first := e.mp(t, "POST", "/v1/payments", mpToken, "pedido-1:autorizar-v1", mpCard("tok_APRO", 10)).want(t, http.StatusCreated)
	// Same body with its keys in another order: a replay.
	again := e.mp(t, "POST", "/v1/payments", mpToken, "pedido-1:autorizar-v1",
		map[string]any{"payer": map[string]any{"email": "buyer@example.com"}, "payment_method_id": "master",
			"installments": 1, "token": "tok_APRO", "transaction_amount": 10}).want(t, http.StatusCreated)
	if again.id() != first.id() || !bytes.Equal(again.raw, first.raw) {
		t.Fatalf("replay %s, first %s", again.id(), first.id())
	}
	e.mp(t, "POST", "/v1/payments", mpToken, "pedido-1:autorizar-v1", mpCard("tok_APRO", 11)).want(t, http.StatusConflict)
	reqs := e.sim.Requests()
	if r := reqs[1]; !r.Replayed || r.Op != "mp_create" || r.IdempotencyKey != "pedido-1:autorizar-v1" || r.SecretKey != mpToken {
		t.Fatalf("request log: %+v", r)
	}
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 3, Replays: 1, Authorizations: 1})

	clock.Add(time.Hour)
	late := e.mp(t, "POST", "/v1/payments", mpToken, "pedido-1:autorizar-v1", mpCard("tok_APRO", 10)).want(t, http.StatusCreated)
	if late.id() == first.id() {
		t.Fatal("a key past its retention replayed")
	}
	e.sim.SetMPKeyRetention(0)
	x := e.mp(t, "POST", "/v1/payments", mpToken, "k0", mpCard("tok_APRO", 10)).want(t, http.StatusCreated)
	if y := e.mp(t, "POST", "/v1/payments", mpToken, "k0", mpCard("tok_APRO", 10)); y.id() == x.id() {
		t.Fatal("retention 0 replayed")
	}
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 6, Replays: 1, Authorizations: 4})
}

func TestMPSearchLag(t *testing.T) {
	clock := newClock()
	e := start(t, Options{Now: clock.Now, MPSearchLag: 30 * time.Second})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpPix(5, "pay_1:1")).want(t, http.StatusCreated)
	e.mp(t, "POST", "/v1/payments", mpToken, "k2", mpPix(5, "pay_2:1")).want(t, http.StatusCreated)
	search := func(ref string) []any {
		a := e.mp(t, "GET", "/v1/payments/search?external_reference="+ref, mpToken, "", nil).want(t, http.StatusOK)
		return a.body["results"].([]any)
	}
	if got := search("pay_1:1"); len(got) != 0 {
		t.Fatalf("found within the lag: %v", got)
	}
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.status != http.StatusOK {
		t.Fatalf("retrieve has no lag: %d", g.status)
	}
	clock.Add(30 * time.Second)
	got := search("pay_1:1")
	if len(got) != 1 || strconv.FormatFloat(got[0].(map[string]any)["id"].(float64), 'f', 0, 64) != p.id() {
		t.Fatalf("after the lag: %v", got)
	}
	if len(search("nope")) != 0 {
		t.Fatal("unknown reference found")
	}
}
