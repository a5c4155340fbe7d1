package providersim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMPPixPaidAndExpired(t *testing.T) {
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpPix(12.34, "r1")).want(t, http.StatusCreated)
	if p.state() != "pending/pending_waiting_transfer" || p.body["payment_type_id"] != "bank_transfer" {
		t.Fatalf("pix: %s", p.raw)
	}
	td := p.body["point_of_interaction"].(map[string]any)["transaction_data"].(map[string]any)
	png, err := base64.StdEncoding.DecodeString(td["qr_code_base64"].(string))
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") || !strings.HasPrefix(td["qr_code"].(string), "000201") {
		t.Fatalf("qr: %v %q", err, td["qr_code"])
	}
	exp, err := time.Parse(time.RFC3339, p.body["date_of_expiration"].(string))
	if err != nil || !exp.Equal(clock.Now().Add(24*time.Hour)) {
		t.Fatalf("date_of_expiration %v: %v", p.body["date_of_expiration"], err)
	}
	page, err := e.http.Get(td["ticket_url"].(string))
	if err != nil || page.StatusCode != http.StatusOK {
		t.Fatalf("ticket_url: %v %v", err, page)
	}
	page.Body.Close()
	res, err := e.http.Post(e.url+"/_sim/mp/payments/"+p.id()+"/pay", "application/json", nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("pay: %v %v", err, res)
	}
	res.Body.Close()
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "approved/accredited" || g.body["date_approved"] == nil {
		t.Fatalf("paid pix: %s", g.raw)
	}

	late := e.mp(t, "POST", "/v1/payments", mpToken, "k2", mpPix(1, "r2")).want(t, http.StatusCreated)
	e.sim.Advance(24 * time.Hour)
	if g := e.mp(t, "GET", "/v1/payments/"+late.id(), mpToken, "", nil); g.state() != "cancelled/expired" {
		t.Fatalf("expired pix: %s", g.state())
	}
	id, _ := strconv.ParseInt(late.id(), 10, 64)
	if _, err := e.sim.MPPay(id); err == nil {
		t.Fatal("an expired pix was paid")
	}
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 4, Authorizations: 1, Declines: 1})
}

func TestMPBoleto(t *testing.T) {
	e := start(t, Options{})
	body := map[string]any{"transaction_amount": 50, "payment_method_id": "bolbradesco",
		"payer": map[string]any{"email": "b@example.com", "first_name": "Ana", "last_name": "Silva",
			"identification": map[string]any{"type": "CPF", "number": "191.000.000-00"}}}
	b := e.mp(t, "POST", "/v1/payments", mpToken, "k1", body).want(t, http.StatusCreated)
	td := b.body["transaction_details"].(map[string]any)
	if b.state() != "pending/pending_waiting_payment" || td["external_resource_url"] == "" ||
		len(td["barcode"].(map[string]any)["content"].(string)) != 47 || b.body["date_of_expiration"] == nil {
		t.Fatalf("boleto: %s", b.raw)
	}
	delete(body["payer"].(map[string]any), "identification")
	e.mp(t, "POST", "/v1/payments", mpToken, "k2", body).want(t, http.StatusBadRequest)
}

func TestMPThreeDSecureChallenge(t *testing.T) {
	e := start(t, Options{})
	body := mpCard("tok_3DS_APRO", 30)
	if a := e.mp(t, "POST", "/v1/payments", mpToken, "k0", body).want(t, http.StatusCreated); a.state() != "approved/accredited" {
		t.Fatalf("without three_d_secure_mode: %s", a.state())
	}
	body["three_d_secure_mode"] = "optional"
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", body).want(t, http.StatusCreated)
	info, _ := p.body["three_ds_info"].(map[string]any)
	if p.state() != "pending/pending_challenge" || info == nil || info["creq"] == "" {
		t.Fatalf("challenge: %s", p.raw)
	}
	challenge := info["external_resource_url"].(string)
	page, err := e.http.Get(challenge)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(html), `id="approve"`) {
		t.Fatalf("challenge page: %s", html)
	}
	res, err := e.http.PostForm(challenge, url.Values{"action": {"approve"}})
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("approve: %v %v", err, res)
	}
	res.Body.Close()
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "approved/accredited" {
		t.Fatalf("after approve: %s", g.state())
	}
	f := e.mp(t, "POST", "/v1/payments", mpToken, "k2", body).want(t, http.StatusCreated)
	id, _ := strconv.ParseInt(f.id(), 10, 64)
	if got, err := e.sim.MPFail(id); err != nil || got.Status+"/"+got.StatusDetail != "rejected/cc_rejected_3ds_challenge" {
		t.Fatalf("fail: %+v %v", got, err)
	}
}

func TestMPRefunds(t *testing.T) {
	e := start(t, Options{})
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpCard("tok_APRO", 100)).want(t, http.StatusCreated)
	path := "/v1/payments/" + p.id() + "/refunds"
	r1 := e.mp(t, "POST", path, mpToken, "r1", map[string]any{"amount": 30}).want(t, http.StatusCreated)
	if r1.body["payment_id"] != p.body["id"] || r1.body["amount"] != 30.0 || r1.body["status"] != "approved" {
		t.Fatalf("refund: %s", r1.raw)
	}
	e.mp(t, "POST", path, mpToken, "r2", map[string]any{"amount": 80}).want(t, http.StatusBadRequest)
	r2 := e.mp(t, "POST", path, mpToken, "r3", nil).want(t, http.StatusCreated)
	if r2.id() == r1.id() || r2.id() == p.id() || r2.body["amount"] != 70.0 {
		t.Fatalf("full refund: %s", r2.raw)
	}
	g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil)
	if g.state() != "refunded/refunded" || g.body["transaction_amount_refunded"] != 100.0 {
		t.Fatalf("refunded: %s", g.raw)
	}
	var list []map[string]any
	if err := json.Unmarshal(e.mp(t, "GET", path, mpToken, "", nil).want(t, http.StatusOK).raw, &list); err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	e.mp(t, "POST", "/v1/payments/999/refunds", mpToken, "r4", nil).want(t, http.StatusNotFound)
	wantStats(t, e.sim.StatsFor(mpToken), Stats{Requests: 7, Authorizations: 1, Refunds: 2})
}

func TestMPNotificationsAreSigned(t *testing.T) {
	type got struct {
		query   url.Values
		headers http.Header
		body    []byte
	}
	ch := make(chan got, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- got{r.URL.Query(), r.Header, b}
	}))
	t.Cleanup(hook.Close)
	e := start(t, Options{})
	const secret = "mp-webhook-secret"
	e.sim.RegisterWebhookEndpoint(mpToken, hook.URL+"/webhooks/mercadopago/acct_1", secret)
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpPix(9, "r")).want(t, http.StatusCreated)
	id, _ := strconv.ParseInt(p.id(), 10, 64)
	if _, err := e.sim.MPPay(id); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.WaitWebhooks(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"payment.created", "payment.updated"} {
		n := recv(t, ch, action)
		var body struct {
			Action, Type string
			Data         struct{ ID string }
		}
		if err := json.Unmarshal(n.body, &body); err != nil || body.Action != action || body.Type != "payment" ||
			body.Data.ID != p.id() || n.query.Get("data.id") != p.id() || n.query.Get("type") != "payment" {
			t.Fatalf("notification %s: %s %v", n.body, n.query, err)
		}
		// Verify as Mercado Pago documents it: the manifest
		// id:<data.id>;request-id:<x-request-id>;ts:<ts>; under HMAC-SHA256.
		var ts, v1 string
		for _, part := range strings.Split(n.headers.Get("x-signature"), ",") {
			k, v, _ := strings.Cut(part, "=")
			switch k {
			case "ts":
				ts = v
			case "v1":
				v1 = v
			}
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte("id:" + n.query.Get("data.id") + ";request-id:" + n.headers.Get("x-request-id") + ";ts:" + ts + ";"))
		if n.headers.Get("x-request-id") == "" || !hmac.Equal([]byte(v1), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			t.Fatalf("x-signature %q does not verify", n.headers.Get("x-signature"))
		}
	}
}

func TestMPFaultsBeforeAndAfterEffect(t *testing.T) {
	e := start(t, Options{})
	e.sim.Inject(Fault{Op: "mp_create", Kind: Error500BeforeEffect, Times: 1})
	e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpCard("tok_APRO", 10)).want(t, http.StatusInternalServerError)
	if len(e.sim.MPPayments(mpToken)) != 0 {
		t.Fatal("a fault before the effect made a payment")
	}
	first := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpCard("tok_APRO", 10)).want(t, http.StatusCreated)

	drop := e.sim.Inject(Fault{Op: "mp_update", Kind: DropAfterEffect})
	body := mpCard("tok_APRO", 10)
	body["capture"] = false
	auth := e.mp(t, "POST", "/v1/payments", mpToken, "k2", body).want(t, http.StatusCreated)
	req, _ := http.NewRequest("PUT", e.url+"/v1/payments/"+auth.id(), strings.NewReader(`{"capture":true}`))
	req.Header.Set("Authorization", "Bearer "+mpToken)
	req.Header.Set("X-Idempotency-Key", "cap-1")
	if res, err := e.http.Do(req); err == nil {
		res.Body.Close()
		t.Fatal("a dropped answer arrived")
	}
	drop.Remove()
	again := e.mp(t, "PUT", "/v1/payments/"+auth.id(), mpToken, "cap-1", map[string]any{"capture": true}).want(t, http.StatusOK)
	if again.state() != "approved/accredited" || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after a lost answer: %s %v", again.state(), again.header)
	}
	if first.id() == auth.id() {
		t.Fatal("ids repeat")
	}
	st := e.sim.StatsFor(mpToken)
	if st.Captures != 1 || st.Authorizations != 2 {
		t.Fatalf("stats %+v", st)
	}
}
