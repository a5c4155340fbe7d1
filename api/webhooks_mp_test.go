package api_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// mpWebhookEnv is an account with Mercado Pago credentials and webhook
// secret stored, and a Pix waiting at Mercado Pago.
type mpWebhookEnv struct {
	*apitest.Env
	secret    string
	paymentID string
	mpID      string
}

func newMPWebhookEnv(t *testing.T, order string) *mpWebhookEnv {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	w := &mpWebhookEnv{Env: e, secret: "mpwhsec_" + apitest.SecretSuffix(t)}
	_, err := e.Accounts.SetProvider(context.Background(), e.Account.ID, payment.ProviderMercadoPago,
		account.Secrets{MercadoPagoToken: "TEST-" + e.Account.ID, MercadoPagoWebhookSecret: w.secret})
	if err != nil {
		t.Fatalf("set mercadopago: %v", err)
	}
	p := createAt(t, e, mpMerchant(e), "k-"+order, fmt.Sprintf(mpPixBody, order))
	if p["provider"] != "mercadopago" || p["status"] != "requires_action" {
		t.Fatalf("pix payment = %v", p)
	}
	mps := e.Sim.MPPayments("TEST-" + e.Account.ID)
	if len(mps) != 1 {
		t.Fatalf("%d payments at mercadopago, want 1", len(mps))
	}
	w.paymentID, w.mpID = p["id"].(string), strconv.FormatInt(mps[0].ID, 10)
	return w
}

// mpNote is a notification body about a payment.
func mpNote(dataID string) string {
	return `{"action":"payment.updated","api_version":"v1","type":"payment","data":{"id":"` + dataID + `"}}`
}

// mpSign signs a notification as Mercado Pago does, ts given as text.
func mpSign(dataID, requestID, ts, secret string) string {
	return "ts=" + ts + ",v1=" + hex.EncodeToString(mercadopago.Sign(mercadopago.Manifest(dataID, requestID, ts), secret))
}

func (w *mpWebhookEnv) post(body, requestID, sig string) *apitest.Response {
	w.T.Helper()
	h := map[string]string{"x-request-id": requestID}
	if sig != "" {
		h["x-signature"] = sig
	}
	return w.Do(apitest.Request{Method: http.MethodPost, Path: "/webhooks/mercadopago/" + w.Account.ID, Body: body, Bearer: "-", Headers: h})
}

// deliver sends a notification signed now (ts in seconds) and returns the
// 200's outcome.
func (w *mpWebhookEnv) deliver(t *testing.T, body, requestID string) string {
	t.Helper()
	return w.deliverAbout(t, body, w.mpID, requestID)
}

// deliverAbout is deliver for a notification whose data.id is dataID.
func (w *mpWebhookEnv) deliverAbout(t *testing.T, body, dataID, requestID string) string {
	t.Helper()
	r := w.post(body, requestID, mpSign(dataID, requestID, strconv.FormatInt(time.Now().Unix(), 10), w.secret))
	wantStatus(t, r, http.StatusOK)
	outcome, _ := r.JSON(t)["outcome"].(string)
	return outcome
}

func countTypes(t *testing.T, e *apitest.Env, paymentID, typ string) int {
	t.Helper()
	n := 0
	for _, ev := range paymentEvents(t, e, e.APIKey, paymentID) {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func TestMercadoPagoWebhook(t *testing.T) {
	t.Parallel()
	t.Run("PaidPixIsCapturedOnce", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-mpwh-paid")
		if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-1"), "applied")
		if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "captured" {
			t.Fatalf("status = %v, want captured", got)
		}
		// A redelivery comes with a fresh x-request-id; it retrieves the
		// same state and is one delivery with the first.
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-2"), "duplicate")
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-1"), "duplicate")
		if n := countTypes(t, w.Env, w.paymentID, "payment.captured"); n != 1 {
			t.Fatalf("%d payment.captured events, want 1", n)
		}
		if n := countDeliveries(t, w.Env); n != 1 {
			t.Fatalf("%d receipts, want 1", n)
		}
	})
	t.Run("MillisecondsAndQueryID", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-mpwh-ms")
		if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
			t.Fatal(err)
		}
		sig := mpSign(w.mpID, "req-ms", strconv.FormatInt(time.Now().UnixMilli(), 10), w.secret)
		r := w.Do(apitest.Request{Method: http.MethodPost, Path: "/webhooks/mercadopago/" + w.Account.ID + "?data.id=" + w.mpID + "&type=payment",
			Body: mpNote(w.mpID), Bearer: "-", Headers: map[string]string{"x-request-id": "req-ms", "x-signature": sig}})
		wantStatus(t, r, http.StatusOK)
		wantOutcome(t, r.JSON(t)["outcome"].(string), "applied")
	})
	t.Run("BodyIsNotTrusted", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-mpwh-lie")
		lie := `{"action":"payment.updated","type":"payment","data":{"id":"` + w.mpID + `","status":"approved"},"status":"approved"}`
		wantOutcome(t, w.deliver(t, lie, "req-lie"), "ignored")
		if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "requires_action" {
			t.Fatalf("status = %v after a notification claiming approval, want requires_action", got)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.captured"); n != 0 {
			t.Fatalf("%d payment.captured events, want 0", n)
		}
		// The later change is a new state, so it is applied.
		if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-lie"), "applied")
	})
	t.Run("OtherTopicIsIgnored", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-mpwh-topic")
		body := `{"action":"merchant_order.updated","type":"merchant_order","data":{"id":"` + w.mpID + `"}}`
		wantOutcome(t, w.deliver(t, body, "req-mo"), "ignored")
		wantOutcome(t, w.deliver(t, body, "req-mo"), "duplicate")
	})
	t.Run("RefusedWithNothingStored", testMPWebhookRefused)
	t.Run("SimulatorDelivers", testMPWebhookFromSimulator)
	t.Run("RetrieveFailsIsRetried", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-mpwh-down")
		if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
			t.Fatal(err)
		}
		f := w.Sim.Inject(providersim.Fault{Op: "mp_retrieve", Kind: providersim.Error500BeforeEffect})
		r := w.post(mpNote(w.mpID), "req-down", mpSign(w.mpID, "req-down", strconv.FormatInt(time.Now().Unix(), 10), w.secret))
		wantStatus(t, r, http.StatusServiceUnavailable)
		if n := countDeliveries(t, w.Env); n != 0 {
			t.Fatalf("%d receipts after a failed retrieve, want 0", n)
		}
		f.Remove()
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-down"), "applied")
		if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "captured" {
			t.Fatalf("status = %v, want captured", got)
		}
	})
}

func testMPWebhookRefused(t *testing.T) {
	t.Parallel()
	w := newMPWebhookEnv(t, "pedido-mpwh-bad")
	if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
		t.Fatal(err)
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	old := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
	other, _ := w.CreateAccount("other", "sk_test_other"+apitest.SecretSuffix(t))
	cases := []struct{ name, acct, body, sig string }{
		{"wrong secret", w.Account.ID, mpNote(w.mpID), mpSign(w.mpID, "r", now, "mpwhsec_wrong")},
		{"no signature", w.Account.ID, mpNote(w.mpID), ""},
		{"other data.id", w.Account.ID, mpNote(w.mpID), mpSign("1", "r", now, w.secret)},
		{"too old", w.Account.ID, mpNote(w.mpID), mpSign(w.mpID, "r", old, w.secret)},
		{"unknown account", "acct_nope", mpNote(w.mpID), mpSign(w.mpID, "r", now, w.secret)},
		{"no mercadopago secret", other.ID, mpNote(w.mpID), mpSign(w.mpID, "r", now, w.secret)},
	}
	for _, c := range cases {
		r := w.Do(apitest.Request{Method: http.MethodPost, Path: "/webhooks/mercadopago/" + c.acct, Body: c.body, Bearer: "-",
			Headers: map[string]string{"x-request-id": "r", "x-signature": c.sig}})
		wantStatus(t, r, http.StatusBadRequest)
		if got := r.Code(t); got != "invalid_request" {
			t.Fatalf("%s: code %q, want invalid_request", c.name, got)
		}
	}
	if n := countDeliveries(t, w.Env); n != 0 {
		t.Fatalf("%d receipts after refused notifications, want 0", n)
	}
	if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "requires_action" {
		t.Fatalf("status = %v after refused notifications, want requires_action", got)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testMPWebhookFromSimulator has the simulator sign and deliver the
// notification of a paid Pix, then deliver it again.
func testMPWebhookFromSimulator(t *testing.T) {
	t.Parallel()
	w := newMPWebhookEnv(t, "pedido-mpwh-sim")
	token := "TEST-" + w.Account.ID
	w.Sim.RegisterWebhookEndpoint(token, w.URL+"/webhooks/mercadopago/"+w.Account.ID, w.secret)
	if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
		t.Fatal(err)
	}
	wait := func() {
		ctx, cancel := context.WithTimeout(context.Background(), apitest.WaitTimeout)
		defer cancel()
		if err := w.Sim.WaitWebhooks(ctx); err != nil {
			t.Fatalf("notifications not delivered: %v", err)
		}
	}
	wait()
	evs := w.Sim.Events(token)
	if len(evs) == 0 || !w.Sim.Redeliver(evs[len(evs)-1].ID) {
		t.Fatalf("no notification to deliver again: %v", evs)
	}
	wait()
	ds := w.Sim.WebhookDeliveries()
	if len(ds) < 2 {
		t.Fatalf("%d deliveries, want the notification and its redelivery", len(ds))
	}
	for _, d := range ds {
		if d.Status != http.StatusOK {
			t.Fatalf("delivery %+v, want 200", d)
		}
	}
	if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "captured" {
		t.Fatalf("status = %v, want captured", got)
	}
	if n := countTypes(t, w.Env, w.paymentID, "payment.captured"); n != 1 {
		t.Fatalf("%d payment.captured events, want 1", n)
	}
	if n := countDeliveries(t, w.Env); n != 1 {
		t.Fatalf("%d receipts, want 1 (the redelivery is a duplicate)", n)
	}
}
