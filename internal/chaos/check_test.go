package chaos

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// world is a synthetic end state: the provider's intents, the database and
// what clients were shown.
type world struct {
	intents []providersim.Intent
	mp      []providersim.MPPayment // Mercado Pago's payments
	st      *localState
	f       *fleet
	reqs    []providersim.Request // the provider's log
}

func newWorld() *world {
	return &world{st: newLocalState(), f: newFleet(nil, "", "", "test")}
}

// t0 is when the synthetic provider log begins.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testKeys is a six-second re-send window.
var testKeys = keysFor(time.Second, 6*time.Second, libraryRetries)

// sent logs a request with a provider key, at an offset from t0.
func (w *world) sent(op, key string, at time.Duration, status int, fault providersim.FaultKind) {
	w.reqs = append(w.reqs, providersim.Request{Op: op, Method: http.MethodPost, IdempotencyKey: key,
		Status: status, Fault: fault, Time: t0.Add(at)})
}

// attempt adds a Stripe attempt, numbered by its key's -v{n}.
func (w *world) attempt(id, paymentID, op, key, status, failureCode string) {
	n, _ := strconv.Atoi(key[strings.LastIndex(key, "-v")+2:])
	w.st.Attempts[id] = &localAttempt{ID: id, PaymentID: paymentID, Operation: op, ProviderKey: key, Status: status,
		FailureCode: failureCode, Provider: provStripe, Number: n}
}

func (w *world) intent(id, order, paymentID, status string, amount int64) {
	in := providersim.Intent{ID: id, Status: status, Amount: amount, PaymentMethod: "pm_card_visa", LatestCharge: "ch_" + id,
		Metadata: map[string]string{"order_id": order, "payment_id": paymentID, "attempt": "1"}}
	switch status {
	case "succeeded":
		in.AmountReceived = amount
	case "requires_payment_method":
		in.PaymentMethod = "" // a decline detaches the card
	}
	w.intents = append(w.intents, in)
}

// mpPayment adds a Mercado Pago payment made by attempt 1 of an order.
func (w *world) mpPayment(id int64, order, paymentID, typeID, status, detail string, amount, refunded int64) {
	w.mp = append(w.mp, providersim.MPPayment{ID: id, Status: status, StatusDetail: detail, Amount: amount, Refunded: refunded,
		PaymentTypeID: typeID, PaymentMethodID: map[string]string{"bank_transfer": "pix", "credit_card": "visa"}[typeID],
		ExternalReference: paymentID + ":1", IdempotencyKey: order + ":autorizar-v1", Captured: status == "approved"})
}

// mpLocal adds a local payment at Mercado Pago.
func (w *world) mpLocal(id, order, status, providerID string, captured int64) {
	w.payment(id, order, status, providerID, captured)
	w.st.Payments[id].Provider = provMP
}

func (w *world) payment(id, order, status, providerID string, captured int64) {
	p := &localPayment{ID: id, OrderID: order, Status: status, ProviderID: providerID, Provider: provStripe, Attempt: 1, AmountCaptured: captured}
	w.st.Payments[id] = p
	if providerID != "" {
		w.st.ByProviderID[providerID] = p
	}
}

func (w *world) shown(order, paymentID, status string) {
	w.f.obs = append(w.f.obs, observation{Order: order, PaymentID: paymentID, Status: status, Via: "test"})
}

func (w *world) check() *Report {
	r := &Report{}
	recs := append(stripeRecords(w.intents), mpRecords(w.mp)...)
	r.check(recs, w.st, w.f)
	r.checkRaces(w.reqs)
	r.checkResends(w.reqs, testKeys, keySettings{})
	r.checkNoEffect(w.reqs, recs, w.st)
	return r
}

func TestCheckRaces(t *testing.T) {
	t.Parallel()
	r := &Report{}
	r.checkRaces([]providersim.Request{
		{Op: "capture", IdempotencyKey: "o1:capturar-v1"}, {Op: "capture", IdempotencyKey: "o1:capturar-v1"},
		{Op: "cancel", IdempotencyKey: "o2:cancelar-v1"},
		{Op: "capture", IdempotencyKey: "o3:capturar-v1"}, {Op: "cancel", IdempotencyKey: "o3:cancelar-v1"},
		// The cancel of a declined attempt's intent, then a capture of attempt 2's.
		{Op: "cancel", IdempotencyKey: "o5:cancelar-v1", Path: "/v1/payment_intents/pi_5a/cancel"},
		{Op: "capture", IdempotencyKey: "o5:capturar-v1", Path: "/v1/payment_intents/pi_5b/capture"},
		// Refused for a revoked key before anything happened: not sent.
		{Op: "capture", IdempotencyKey: "o4:capturar-v1", Status: http.StatusUnauthorized}, {Op: "cancel", IdempotencyKey: "o4:cancelar-v1"},
	})
	if r.BothSent != 1 || !strings.Contains(strings.Join(r.Samples, ""), "order o3") {
		t.Fatalf("BothSent %d, samples %v; want order o3 only", r.BothSent, r.Samples)
	}
}

// violation is one mutation of the consistent world and the figure and
// sample it must show.
type violation struct {
	name   string
	mutate func(w *world)
	got    func(r *Report) int
	want   string
}

// cleanWorld is consistent: at Stripe an auto capture, a manual
// authorization captured later by its client, a decline followed by a
// second card, a first send refused for the credentials and a second key
// captured; at Mercado Pago a Pix paid and part refunded, a Pix not paid
// yet, and a card held and then released by its client.
func cleanWorld() *world {
	w := newWorld()
	w.intent("pi_1", "o1", "pay_1", "succeeded", 1000)
	w.payment("pay_1", "o1", "captured", "pi_1", 1000)
	w.shown("o1", "pay_1", "captured")
	w.intent("pi_2", "o2", "pay_2", "succeeded", 500)
	w.payment("pay_2", "o2", "captured", "pi_2", 500)
	w.shown("o2", "pay_2", "authorized")
	w.f.noteOp("pay_2", "capture")
	w.intent("pi_3", "o3", "pay_3", "requires_payment_method", 700)
	w.payment("pay_3", "o3", "declined", "pi_3", 0)
	w.shown("o3", "pay_3", "declined")
	w.intent("pi_4", "o3", "pay_4", "requires_capture", 700)
	w.payment("pay_4", "o3", "authorized", "pi_4", 0)
	w.shown("o3", "pay_4", "authorized")

	// The provider's log: pay_1's key was dropped after the effect,
	// refused on a re-send while the secret key was revoked, then
	// replayed inside the window.
	w.attempt("att_1", "pay_1", "autorizar", "o1:autorizar-v1", "succeeded", "")
	w.sent("authorize", "o1:autorizar-v1", 0, 0, providersim.DropAfterEffect)
	w.sent("authorize", "o1:autorizar-v1", 2*time.Second, http.StatusUnauthorized, "")
	w.sent("authorize", "o1:autorizar-v1", 4*time.Second, http.StatusOK, "")
	// pay_2's capture failed past its window, having never acted.
	w.attempt("att_2c", "pay_2", "capturar", "o2:capturar-v1", "failed", codeNoEffect)
	w.sent("capture", "o2:capturar-v1", 0, http.StatusInternalServerError, providersim.Error500BeforeEffect)
	w.sent("capture", "o2:capturar-v1", 3*time.Second, http.StatusUnauthorized, "")
	w.attempt("att_2d", "pay_2", "capturar", "o2:capturar-v2", "succeeded", "")
	w.sent("capture", "o2:capturar-v2", 10*time.Second, http.StatusOK, "")
	// Order o5: the first send was refused for revoked credentials;
	// the shopper's new key (attempt 2) was captured.
	w.payment("pay_5", "o5", "failed", "", 0)
	w.st.Payments["pay_5"].FailureCode = codeAuthentication
	w.shown("o5", "pay_5", "failed")
	w.attempt("att_5", "pay_5", "autorizar", "o5:autorizar-v1", "failed", codeAuthentication)
	w.sent("authorize", "o5:autorizar-v1", 20*time.Second, http.StatusUnauthorized, "")
	w.intent("pi_5b", "o5", "pay_5b", "succeeded", 900)
	w.payment("pay_5b", "o5", "captured", "pi_5b", 900)
	w.shown("o5", "pay_5b", "captured")
	w.attempt("att_5b", "pay_5b", "autorizar", "o5:autorizar-v2", "succeeded", "")
	w.sent("authorize", "o5:autorizar-v2", 23*time.Second, http.StatusOK, "")

	// Mercado Pago: a Pix paid and captured, part refunded; a Pix the
	// customer has not paid; a card held and then released by its
	// client.
	w.mpPayment(1300000001, "o10", "pay_10", "bank_transfer", "approved", "partially_refunded", 800, 300)
	w.mpLocal("pay_10", "o10", "captured", "1300000001", 800)
	w.st.Payments["pay_10"].AmountRefunded = 300
	w.shown("o10", "pay_10", "captured")
	w.attempt("att_10", "pay_10", "autorizar", "o10:autorizar-v1", "succeeded", "")
	w.st.Attempts["att_10"].Provider = provMP
	w.sent("mp_create", "o10:autorizar-v1", 30*time.Second, http.StatusCreated, "")
	w.mpPayment(1300000002, "o11", "pay_11", "bank_transfer", "pending", "pending_waiting_transfer", 500, 0)
	w.mpLocal("pay_11", "o11", "requires_action", "1300000002", 0)
	w.mpPayment(1300000003, "o12", "pay_12", "credit_card", "cancelled", "by_collector", 650, 0)
	w.mpLocal("pay_12", "o12", "canceled", "1300000003", 0)
	w.shown("o12", "pay_12", "authorized")
	// Failed over: Mercado Pago refused the credentials on attempt 1,
	// Stripe captured attempt 2 of the same payment.
	w.payment("pay_15", "o15", "captured", "pi_15", 900)
	w.st.Payments["pay_15"].Attempt = 2
	w.intents = append(w.intents, providersim.Intent{ID: "pi_15", Status: "succeeded", Amount: 900, AmountReceived: 900,
		PaymentMethod: "pm_card_visa", LatestCharge: "ch_15", Metadata: map[string]string{"order_id": "o15", "payment_id": "pay_15", "attempt": "2"}})
	w.attempt("att_15", "pay_15", "autorizar", "o15:autorizar-v1", "failed", codeAuthentication)
	w.st.Attempts["att_15"].Provider = provMP
	w.sent("mp_create", "o15:autorizar-v1", 40*time.Second, http.StatusUnauthorized, "")
	w.attempt("att_15b", "pay_15", "autorizar", "o15:autorizar-v2", "succeeded", "")
	w.sent("authorize", "o15:autorizar-v2", 40*time.Second+100*time.Millisecond, http.StatusOK, "")
	w.shown("o15", "pay_15", "captured")
	w.f.noteOp("pay_12", "cancel")
	w.shown("o12", "pay_12", "canceled")
	return w
}

// detects runs each violation on a fresh consistent world.
func detects(t *testing.T, cases []violation) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := cleanWorld()
			c.mutate(w)
			r := w.check()
			if c.got(r) == 0 {
				t.Fatalf("not detected; samples %v", r.Samples)
			}
			if !strings.Contains(strings.Join(r.Samples, "\n"), c.want) {
				t.Fatalf("samples %v lack %q", r.Samples, c.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if r := cleanWorld().check(); r.Violations() != 0 {
		t.Fatalf("a consistent world has %d violations: %v", r.Violations(), r.Samples)
	} else if want := (refusals{FirstSends: 2, Resends: 2, Recovered: 2, Settled: 2}); r.Refused != want || r.AuthFailed != 2 || r.ProviderFailovers != 1 {
		t.Fatalf("refusals %+v, authorizations failed %d, failovers %d; want %+v, 2 and 1", r.Refused, r.AuthFailed, r.ProviderFailovers, want)
	} else if mp := r.of(provMP); mp.Records != 3 || mp.Authorized != 2 || mp.Payments != 3 || mp.Captured != 1 {
		t.Fatalf("Mercado Pago figures %+v; want 3 records (2 authorized), 3 payments (1 captured)", *mp)
	}

	detects(t, []violation{
		{"DoubleChargeOfOneOrder", func(w *world) {
			w.intent("pi_9", "o1", "pay_9", "succeeded", 1000)
			w.payment("pay_9", "o1", "failed", "", 0)
		}, func(r *Report) int { return r.DoubleCharges }, "double charge: order o1"},
		{"LostPaymentWhenTheProviderCharged", func(w *world) {
			w.intent("pi_5", "o5", "pay_5", "succeeded", 300)
			w.payment("pay_5", "o5", "failed", "", 0)
		}, func(r *Report) int { return r.LostPayments }, "lost payment: intent pi_5"},
		{"LostPaymentWithNoLocalRecord", func(w *world) {
			w.intent("pi_6", "o6", "pay_6", "requires_capture", 300)
		}, func(r *Report) int { return r.LostPayments }, "has no local payment"},
		{"PhantomSuccess", func(w *world) {
			w.payment("pay_7", "o7", "captured", "pi_nowhere", 300)
		}, func(r *Report) int { return r.Phantoms }, "phantom: payment pay_7"},
		{"LieAuthorizedThenCanceledByNobody", func(w *world) {
			w.st.Payments["pay_4"].Status = "canceled"
			w.intents[3].Status = "canceled"
		}, func(r *Report) int { return r.Lies }, "lie: order o3 was shown payment pay_4 authorized"},
		{"LieFailedWhileTheProviderCharged", func(w *world) {
			w.intent("pi_8", "o8", "pay_8", "succeeded", 300)
			w.payment("pay_8", "o8", "failed", "", 0)
			w.shown("o8", "pay_8", "failed")
		}, func(r *Report) int { return r.Lies }, "the provider has it captured"},
		{"AmountsDiffer", func(w *world) {
			w.st.Payments["pay_1"].AmountRefunded = 10
		}, func(r *Report) int { return r.AmountMismatches }, "amounts: payment pay_1"},
		{"Stranded", func(w *world) {
			w.st.UnresolvedPayments = 1
		}, func(r *Report) int { return r.Stranded }, "stranded: 1 payments"},
		{"ChargedButCanceledLocally", func(w *world) {
			w.st.Payments["pay_5b"].Status = "canceled"
		}, func(r *Report) int { return r.LostPayments }, "lost payment: intent pi_5b is succeeded at the provider, payment pay_5b is canceled"},
		{"SecondKeyChargedTwice", func(w *world) {
			w.intent("pi_5", "o5", "pay_5", "succeeded", 900)
		}, func(r *Report) int { return r.DoubleCharges }, "double charge: order o5 authorized 2 times"},
		{"CredentialFailureTheProviderCharged", func(w *world) {
			w.intent("pi_5", "o5", "pay_5", "succeeded", 900)
		}, func(r *Report) int { return r.FalseNoEffect }, "attempt att_5 (payment pay_5) failed provider_authentication, but the provider has pi_5 succeeded for the attempt"},
		{"CredentialFailureOnARecovery", func(w *world) {
			// The first send acted and lost its answer; a 401 on the
			// re-send proves nothing about it.
			w.sent("authorize", "o5:autorizar-v1", 19*time.Second, 0, providersim.DropAfterEffect)
		}, func(r *Report) int { return r.FalseNoEffect }, "failed provider_authentication, but the provider answered that key 0 at"},
		{"CredentialFailureNeverSent", func(w *world) {
			w.attempt("att_7", "pay_1", "estornar", "o1:estornar-v1", "failed", codeAuthentication)
		}, func(r *Report) int { return r.FalseNoEffect }, "attempt att_7 (payment pay_1, key o1:estornar-v1) failed provider_authentication, but its key never reached"},
		{"UnreachableFailureTheProviderSaw", func(w *world) {
			// A refund recorded as never having reached the provider,
			// whose key the provider answered.
			w.attempt("att_8", "pay_1", "estornar", "o1:estornar-v1", "failed", codeUnreachable)
			w.sent("refund", "o1:estornar-v1", 5*time.Second, http.StatusInternalServerError, providersim.Error500BeforeEffect)
		}, func(r *Report) int { return r.FalseNoEffect }, "attempt att_8 (payment pay_1, key o1:estornar-v1) failed provider_unreachable, but the provider answered that key 500"},
		{"NoEffectCaptureThatActed", func(w *world) {
			w.sent("capture", "o2:capturar-v1", 5*time.Second, http.StatusOK, "")
		}, func(r *Report) int { return r.FalseNoEffect }, "attempt att_2c (payment pay_2, key o2:capturar-v1) failed no_effect_at_provider"},
		{"LateResend", func(w *world) {
			w.sent("authorize", "o1:autorizar-v1", 8*time.Second, http.StatusOK, "")
		}, func(r *Report) int { return r.LateResends }, "late re-send: key o1:autorizar-v1 reached stripe 8s after its first send"},
	})
}

// TestCheckMercadoPago: every invariant reads Mercado Pago's payments too,
// and counts at its provider.
func TestCheckMercadoPago(t *testing.T) {
	t.Parallel()
	detects(t, []violation{
		{"MPDoubleChargeAcrossProviders", func(w *world) {
			w.intent("pi_10", "o10", "pay_10s", "succeeded", 800)
			w.payment("pay_10s", "o10", "failed", "", 0)
		}, func(r *Report) int { return r.of(provMP).DoubleCharges }, "double charge: order o10 authorized 2 times at the providers: stripe pi_10, mercadopago 1300000001"},
		{"MPPixPaidButWaitingLocally", func(w *world) {
			w.mp[1].Status, w.mp[1].StatusDetail = "approved", "accredited"
		}, func(r *Report) int { return r.of(provMP).LostPayments }, "lost payment: Mercado Pago payment 1300000002 is succeeded at the provider, payment pay_11 is requires_action locally"},
		{"MPChargeWithoutLocalPayment", func(w *world) {
			w.mpPayment(1300000004, "o13", "pay_13", "credit_card", "authorized", "pending_capture", 400, 0)
		}, func(r *Report) int { return r.of(provMP).LostPayments }, "Mercado Pago payment 1300000004 (requires_capture, order o13, payment_id pay_13) has no local payment"},
		{"MPPhantom", func(w *world) {
			w.mpLocal("pay_14", "o14", "captured", "1300000099", 700)
		}, func(r *Report) int { return r.of(provMP).Phantoms }, "phantom: payment pay_14 (order o14) is captured locally; the provider shows no such authorization (Mercado Pago payment \"1300000099\")"},
		{"MPRefundedAmountsDiffer", func(w *world) {
			w.mp[0].Refunded = 800
			w.mp[0].Status = "refunded"
		}, func(r *Report) int { return r.of(provMP).AmountMismatches }, "amounts: payment pay_10 captured 800 refunded 300 locally, 800 and 800 at the provider (Mercado Pago payment 1300000001)"},
		{"MPLieCapturedWhileWaiting", func(w *world) {
			w.shown("o11", "pay_11", "captured")
		}, func(r *Report) int { return r.of(provMP).Lies }, "lie: order o11 was shown payment pay_11 captured"},
		{"MPCardCancelledByNobody", func(w *world) {
			w.f.ops["pay_12"]["cancel"] = false
		}, func(r *Report) int { return r.of(provMP).Lies }, "lie: order o12 was shown payment pay_12 authorized"},
		{"MPKeyResent", func(w *world) {
			// Mercado Pago keeps no key: any second arrival may charge again.
			w.sent("mp_create", "o10:autorizar-v1", 30*time.Second+500*time.Millisecond, http.StatusCreated, "")
		}, func(r *Report) int { return r.of(provMP).LateResends }, "late re-send: key o10:autorizar-v1 reached mercadopago 2 times, the last 500ms after the first"},
		{"MPStranded", func(w *world) {
			w.st.Attempts["att_10"].Status = "unknown"
			w.st.UnresolvedAttempts = 1
		}, func(r *Report) int { return r.of(provMP).Stranded }, "stranded: 0 payments, 1 attempts"},
		{"MPNotFoundWhileThePixExists", func(w *world) {
			w.attempt("att_11", "pay_11", "autorizar", "o11:autorizar-v1", "failed", codeNotFound)
			w.st.Attempts["att_11"].Provider = provMP
		}, func(r *Report) int { return r.of(provMP).FalseNoEffect }, "attempt att_11 (payment pay_11) failed not_found_at_provider, but the provider has 1300000002 requires_action for the attempt"},
		{"FailedOverButMercadoPagoCharged", func(w *world) {
			// The refused first send had in fact charged at Mercado Pago.
			w.mpPayment(1300000015, "o15", "pay_15", "credit_card", "approved", "accredited", 900, 0)
		}, func(r *Report) int { return r.DoubleCharges * r.of(provMP).FalseNoEffect }, "false no-effect failure: attempt att_15 (payment pay_15) failed provider_authentication, but the provider has 1300000015 succeeded for the attempt"},
		{"MPCaptureAndCancelBothSent", func(w *world) {
			w.reqs = append(w.reqs, providersim.Request{Op: "mp_update", Method: http.MethodPut, IdempotencyKey: "o12:capturar-v1", Path: "/v1/payments/1300000003"},
				providersim.Request{Op: "mp_update", Method: http.MethodPut, IdempotencyKey: "o12:cancelar-v1", Path: "/v1/payments/1300000003"})
		}, func(r *Report) int { return r.BothSent }, "race: order o12 (intent 1300000003) had both a capture and a cancel sent"},
	})
}

func TestCheckMerchant(t *testing.T) {
	t.Parallel()
	feed := []string{"evt_a", "evt_b", "evt_c"}

	// Duplicates are allowed, and so is an event written after the feed
	// was read.
	r := &Report{}
	r.checkMerchant(feed, map[string]int{"evt_a": 1, "evt_b": 3, "evt_c": 2, "evt_later": 1}, nil)
	want := merchantTally{Events: 3, Received: 3, Duplicates: 3, Later: 1}
	if r.Merchant != want || r.Violations() != 0 {
		t.Errorf("all delivered: %+v, %d violations; want %+v and none", r.Merchant, r.Violations(), want)
	}

	// An event never delivered and a bad signature are violations.
	r = &Report{}
	r.checkMerchant(feed, map[string]int{"evt_a": 2, "evt_c": 1}, []string{"evt_b: no matching signature"})
	want = merchantTally{Events: 3, Received: 2, Lost: 1, Duplicates: 1, BadSignatures: 1}
	if r.Merchant != want || r.Violations() != 2 {
		t.Errorf("one lost, one bad: %+v, %d violations; want %+v and 2", r.Merchant, r.Violations(), want)
	}
	if len(r.Samples) != 2 || !strings.Contains(r.Samples[0], "evt_b") {
		t.Errorf("samples %q, want the lost event named", r.Samples)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "lost webhooks:         1") || !strings.Contains(out.String(), "1 duplicate deliveries") {
		t.Errorf("the report does not show the lost event and the duplicates:\n%s", out.String())
	}
}

// TestCheckFeed: an event the feed did not serve at some page size, or
// served twice, is a violation; each read is held against the events
// stored, not against another read.
func TestCheckFeed(t *testing.T) {
	stored := []string{"evt_a", "evt_b", "evt_c", "evt_d"}
	var r Report
	r.checkFeed(stored, map[int][]string{1: stored, 3: stored, 100: stored})
	if r.Feed.Errors() != 0 || r.Violations() != 0 || r.Feed.Served[3] != 4 {
		t.Fatalf("a feed that served every event once: %+v, %d violations", r.Feed, r.Violations())
	}

	r = Report{}
	r.checkFeed(stored, map[int][]string{
		1:   {"evt_a", "evt_b", "evt_c", "evt_d"},
		3:   {"evt_a", "evt_c", "evt_d"},          // evt_b lost across a page
		100: {"evt_a", "evt_b", "evt_b", "evt_d"}, // evt_b twice, evt_c lost
	})
	if r.Feed.Missed != 2 || r.Feed.Repeated != 1 || r.Violations() != 3 {
		t.Fatalf("missed %d (want 2), repeated %d (want 1), violations %d (want 3)", r.Feed.Missed, r.Feed.Repeated, r.Violations())
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "feed errors:           3 (4 events stored;") || !strings.Contains(out.String(), "FAIL: 3 violations") {
		t.Errorf("the report does not show the feed errors:\n%s", out.String())
	}
	if !strings.Contains(strings.Join(r.Samples, "\n"), "at limit 3 event evt_b is stored but was never served") {
		t.Errorf("samples %q do not name the lost event", r.Samples)
	}
}

// A payment with an object at both providers is a failover without
// proof, whatever the objects' states; two payments, one at each, are not.
func TestCheckTwoProviders(t *testing.T) {
	t.Parallel()
	at := func(prov, id, paymentID, status string) record {
		return record{Provider: prov, Intent: providersim.Intent{ID: id, Status: status,
			Metadata: map[string]string{"payment_id": paymentID, "order_id": "o-" + paymentID}}}
	}
	r := &Report{}
	r.checkTwoProviders([]record{at(provStripe, "pi_1", "pay_1", "requires_payment_method"), at(provMP, "101", "pay_1", "succeeded"),
		at(provStripe, "pi_2", "pay_2", "succeeded"), at(provMP, "102", "pay_3", "succeeded")})
	if r.TwoProviders != 1 || r.Violations() != 1 {
		t.Fatalf("two providers %d, violations %d; want 1 and 1", r.TwoProviders, r.Violations())
	}
}
