package providersim

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMPSettingsThroughControlAPI(t *testing.T) {
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	res, err := e.http.Post(e.url+"/_sim/mp/settings", "application/json",
		strings.NewReader(`{"key_retention":"10m","search_lag":"1m"}`))
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("settings: %v %v", err, res)
	}
	res.Body.Close()
	first := e.mp(t, "POST", "/v1/payments", mpToken, "k", mpPix(1, "ref")).want(t, http.StatusCreated)
	if got := e.mp(t, "GET", "/v1/payments/search?external_reference=ref", mpToken, "", nil); len(got.body["results"].([]any)) != 0 {
		t.Fatal("found within the lag")
	}
	clock.Add(9 * time.Minute)
	if again := e.mp(t, "POST", "/v1/payments", mpToken, "k", mpPix(1, "ref")); again.id() != first.id() {
		t.Fatal("no replay within the retention")
	}
	clock.Add(time.Minute)
	if again := e.mp(t, "POST", "/v1/payments", mpToken, "k", mpPix(1, "ref")); again.id() == first.id() {
		t.Fatal("replay after the retention")
	}
	if got := e.mp(t, "GET", "/v1/payments/search?external_reference=ref", mpToken, "", nil); got.body["paging"].(map[string]any)["total"] != 1.0 {
		t.Fatalf("search after the lag: %s", got.raw)
	}
	res, err = e.http.Post(e.url+"/_sim/mp/settings", "application/json", strings.NewReader(`{"search_lag":"-1s"}`))
	if err != nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("negative lag: %v %v", err, res)
	}
	res.Body.Close()
}

func TestMPCustomerActions(t *testing.T) {
	e := start(t, Options{})
	body := mpPix(2, "r")
	body["capture"] = false // not for Pix: paid is captured
	pix := e.mp(t, "POST", "/v1/payments", mpToken, "k1", body).want(t, http.StatusCreated)
	res, err := e.http.PostForm(e.url+"/_sim/mp/pix/"+pix.id(), url.Values{"action": {"pay"}})
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("pix page pay: %v %v", err, res)
	}
	res.Body.Close()
	if g := e.mp(t, "GET", "/v1/payments/"+pix.id(), mpToken, "", nil); g.state() != "approved/accredited" {
		t.Fatalf("pix paid on its page: %s", g.state())
	}
	boleto := map[string]any{"transaction_amount": 50, "payment_method_id": "bolbradesco",
		"payer": map[string]any{"email": "b@example.com", "first_name": "Ana", "last_name": "Silva",
			"identification": map[string]any{"type": "CNPJ", "number": "12345678000195"}}}
	b := e.mp(t, "POST", "/v1/payments", mpToken, "k2", boleto).want(t, http.StatusCreated)
	res, err = e.http.Post(e.url+"/_sim/mp/payments/"+b.id()+"/expire", "application/json", nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("expire: %v %v", err, res)
	}
	res.Body.Close()
	res, err = e.http.Post(e.url+"/_sim/mp/payments/"+b.id()+"/pay", "application/json", nil)
	if err != nil || res.StatusCode != http.StatusConflict {
		t.Fatalf("pay an expired boleto: %v %v", err, res)
	}
	res.Body.Close()
	if g := e.mp(t, "GET", "/v1/payments/"+b.id(), mpToken, "", nil); g.state() != "cancelled/expired" {
		t.Fatalf("expired boleto: %s", g.state())
	}
	cont := e.mp(t, "POST", "/v1/payments", mpToken, "k3", mpCard("tok_CONT", 5)).want(t, http.StatusCreated)
	id, _ := strconv.ParseInt(cont.id(), 10, 64)
	if p, err := e.sim.MPPay(id); err != nil || p.Status != "approved" || !p.Captured {
		t.Fatalf("contingency settled: %+v %v", p, err)
	}
	if got := e.sim.MPPayments(mpToken); len(got) != 3 || got[0].IdempotencyKey != "k1" {
		t.Fatalf("payments: %+v", got)
	}
}

func TestMPKeyInFlightIsAConflict(t *testing.T) {
	e := start(t, Options{})
	hold := e.sim.Inject(Fault{Op: "mp_create", Kind: HoldBeforeEffect, Times: 1})
	type answered struct {
		a   mpAnswer
		err error
	}
	done := make(chan answered, 1)
	go func() {
		a, err := e.tryMP("POST", "/v1/payments", mpToken, "k", mpCard("tok_APRO", 1))
		done <- answered{a, err}
	}()
	recv(t, hold.Reached(), "the held request")
	e.mp(t, "POST", "/v1/payments", mpToken, "k", mpCard("tok_APRO", 1)).want(t, http.StatusConflict)
	hold.Release()
	got := recv(t, done, "the first answer")
	if got.err != nil {
		t.Fatal(got.err)
	}
	first := got.a.want(t, http.StatusCreated)
	if again := e.mp(t, "POST", "/v1/payments", mpToken, "k", mpCard("tok_APRO", 1)).want(t, http.StatusCreated); again.id() != first.id() {
		t.Fatal("no replay after the first request ended")
	}
}

func TestMPChallengeReturnsToCallbackURL(t *testing.T) {
	e := start(t, Options{})
	body := mpCard("tok_3DS_FUND", 7)
	body["three_d_secure_mode"] = "optional"
	body["callback_url"] = "https://shop.example/back"
	p := e.mp(t, "POST", "/v1/payments", mpToken, "k1", body).want(t, http.StatusCreated)
	if p.body["callback_url"] != "https://shop.example/back" {
		t.Fatalf("callback_url not echoed: %s", p.raw)
	}
	noFollow := *e.http
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	challenge := p.body["three_ds_info"].(map[string]any)["external_resource_url"].(string)
	res, err := noFollow.PostForm(challenge, url.Values{"action": {"approve"}})
	if err != nil || res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "https://shop.example/back" {
		t.Fatalf("approve: %v %v", err, res)
	}
	res.Body.Close()
	// After the challenge the cardholder name decides.
	if g := e.mp(t, "GET", "/v1/payments/"+p.id(), mpToken, "", nil); g.state() != "rejected/cc_rejected_insufficient_amount" {
		t.Fatalf("after approve: %s", g.state())
	}
}

func TestMPSearchOrderAndChargebacks(t *testing.T) {
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	first := e.mp(t, "POST", "/v1/payments", mpToken, "k1", mpPix(1, "same")).want(t, http.StatusCreated)
	clock.Add(time.Second)
	second := e.mp(t, "POST", "/v1/payments", mpToken, "k2", mpPix(1, "same")).want(t, http.StatusCreated)
	ids := func(query string) []string {
		a := e.mp(t, "GET", "/v1/payments/search?"+query, mpToken, "", nil).want(t, http.StatusOK)
		var out []string
		for _, r := range a.body["results"].([]any) {
			out = append(out, strconv.FormatFloat(r.(map[string]any)["id"].(float64), 'f', 0, 64))
		}
		return out
	}
	if got := ids("external_reference=same"); len(got) != 2 || got[0] != first.id() {
		t.Fatalf("ascending: %v", got)
	}
	if got := ids("external_reference=same&sort=date_created&criteria=desc&limit=1"); len(got) != 1 || got[0] != second.id() {
		t.Fatalf("newest first, one: %v", got)
	}
	cb := e.mp(t, "GET", "/v1/chargebacks/search?payment_id="+first.id(), mpToken, "", nil).want(t, http.StatusOK)
	if len(cb.body["results"].([]any)) != 0 {
		t.Fatalf("chargebacks: %s", cb.raw)
	}
}
