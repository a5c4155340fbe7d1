package providersim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

func TestAuthorizeAutomaticAndManual(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	p := authorize("pedido-1:autorizar-v1", "pm_card_visa", "automatic", 2000, "pay_1")
	p.Customer, p.Description = stripe.String("cus_1"), stripe.String("order 1")
	auto, err := sc.PaymentIntents.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(auto.ID, "pi_") || auto.Object != "payment_intent" || auto.Livemode {
		t.Fatalf("intent = %s %s livemode=%v", auto.ID, auto.Object, auto.Livemode)
	}
	if auto.Status != stripe.PaymentIntentStatusSucceeded || auto.AmountReceived != 2000 || auto.AmountCapturable != 0 {
		t.Fatalf("automatic: status %s received %d capturable %d", auto.Status, auto.AmountReceived, auto.AmountCapturable)
	}
	if auto.Currency != "brl" || auto.Metadata["payment_id"] != "pay_1" || auto.Customer.ID != "cus_1" || auto.Description != "order 1" {
		t.Fatalf("automatic: currency %s metadata %v customer %+v description %q", auto.Currency, auto.Metadata, auto.Customer, auto.Description)
	}
	if auto.LatestCharge == nil || !strings.HasPrefix(auto.LatestCharge.ID, "ch_") || auto.PaymentMethod.ID != "pm_card_visa" {
		t.Fatalf("automatic: latest_charge %+v payment_method %+v", auto.LatestCharge, auto.PaymentMethod)
	}

	manual, err := sc.PaymentIntents.New(authorize("pedido-2:autorizar-v1", "pm_card_visa", "manual", 1500, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}
	if manual.Status != stripe.PaymentIntentStatusRequiresCapture || manual.AmountCapturable != 1500 || manual.AmountReceived != 0 ||
		manual.CaptureMethod != stripe.PaymentIntentCaptureMethodManual {
		t.Fatalf("manual: status %s capturable %d received %d method %s", manual.Status, manual.AmountCapturable, manual.AmountReceived, manual.CaptureMethod)
	}

	got, err := sc.PaymentIntents.Get(manual.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != manual.ID || got.Status != manual.Status || got.Created != manual.Created {
		t.Fatalf("retrieve = %s %s %d, want %s %s %d", got.ID, got.Status, got.Created, manual.ID, manual.Status, manual.Created)
	}

	intents := e.sim.Intents(keyA)
	if len(intents) != 2 || intents[0].ID != auto.ID || intents[0].IdempotencyKey != "pedido-1:autorizar-v1" || intents[1].AmountCapturable != 1500 {
		t.Fatalf("Intents = %+v", intents)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 3, Authorizations: 2})
}

func TestDeclineIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	for _, tc := range []struct{ pm, declineCode string }{
		{"pm_card_chargeDeclined", "generic_decline"},
		{"pm_card_chargeDeclinedInsufficientFunds", "insufficient_funds"},
	} {
		key := "decline-" + tc.pm
		var firstID string
		for attempt := range 2 {
			_, err := sc.PaymentIntents.New(authorize(key, tc.pm, "manual", 2000, "pay_d"))
			se := stripeErr(t, err, http.StatusPaymentRequired)
			if se.Type != stripe.ErrorTypeCard || se.Code != stripe.ErrorCodeCardDeclined || string(se.DeclineCode) != tc.declineCode {
				t.Fatalf("%s: error %s %s %s", tc.pm, se.Type, se.Code, se.DeclineCode)
			}
			if _, ok := se.Err.(*stripe.CardError); !ok {
				t.Fatalf("%s: typed error %T, want *stripe.CardError", tc.pm, se.Err)
			}
			pi := se.PaymentIntent
			if pi == nil || pi.Status != stripe.PaymentIntentStatusRequiresPaymentMethod || pi.LastPaymentError == nil ||
				string(pi.LastPaymentError.DeclineCode) != tc.declineCode || pi.Metadata["payment_id"] != "pay_d" {
				t.Fatalf("%s: error.payment_intent = %+v", tc.pm, pi)
			}
			if attempt == 0 {
				firstID = pi.ID
			} else if pi.ID != firstID {
				t.Fatalf("%s: replayed intent %s, want %s", tc.pm, pi.ID, firstID)
			}
		}
		stored, err := sc.PaymentIntents.Get(firstID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != stripe.PaymentIntentStatusRequiresPaymentMethod || stored.LastPaymentError.Code != stripe.ErrorCodeCardDeclined {
			t.Fatalf("stored decline = %s %+v", stored.Status, stored.LastPaymentError)
		}
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 6, Replays: 2, Declines: 2})
}

func TestRejectedParametersAreNotStored(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	_, err := sc.PaymentIntents.New(authorize("k1", "pm_card_nope", "manual", 100, "pay_1"))
	se := stripeErr(t, err, http.StatusBadRequest)
	if se.Type != stripe.ErrorTypeInvalidRequest || se.Code != "resource_missing" || se.Param != "payment_method" {
		t.Fatalf("unknown payment method: %s %s %s", se.Type, se.Code, se.Param)
	}

	p := authorize("k1", "pm_card_visa", "manual", 100, "pay_1")
	p.Amount = nil
	_, err = sc.PaymentIntents.New(p)
	if se := stripeErr(t, err, http.StatusBadRequest); se.Code != stripe.ErrorCodeParameterMissing || se.Param != "amount" {
		t.Fatalf("missing amount: %s %s", se.Code, se.Param)
	}

	res, body := e.raw(t, "POST", "/v1/payment_intents", keyA, "k1",
		url.Values{"amount": {"12.5"}, "currency": {"brl"}, "confirm": {"true"}, "payment_method": {"pm_card_visa"}})
	if res.StatusCode != 400 || !strings.Contains(body, `"code":"parameter_invalid_integer"`) {
		t.Fatalf("invalid amount: %d %s", res.StatusCode, body)
	}
	res, body = e.raw(t, "POST", "/v1/payment_intents", keyA, "k1",
		url.Values{"amount": {"100"}, "confirm": {"true"}, "payment_method": {"pm_card_visa"}})
	if res.StatusCode != 400 || !strings.Contains(body, `"param":"currency"`) {
		t.Fatalf("missing currency: %d %s", res.StatusCode, body)
	}

	// None of the rejections took the key: a corrected request executes.
	pi, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Fatalf("status %s", pi.Status)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 5, Authorizations: 1})
}

func TestCaptureCancelRefundRules(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	code := func(err error) stripe.ErrorCode { return stripeErr(t, err, http.StatusBadRequest).Code }

	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "manual", 2000, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Refunds.New(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID)})
	if got := code(err); got != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("refund before capture: %s", got)
	}
	_, err = sc.PaymentIntents.Capture(pi.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(2001)})
	if got := code(err); got != stripe.ErrorCodeAmountTooLarge {
		t.Fatalf("capture too much: %s", got)
	}
	captured, err := sc.PaymentIntents.Capture(pi.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(1500)})
	if err != nil {
		t.Fatal(err)
	}
	if captured.Status != stripe.PaymentIntentStatusSucceeded || captured.AmountReceived != 1500 || captured.AmountCapturable != 0 {
		t.Fatalf("captured: %s received %d capturable %d", captured.Status, captured.AmountReceived, captured.AmountCapturable)
	}
	_, err = sc.PaymentIntents.Capture(pi.ID, nil)
	if se := stripeErr(t, err, 400); se.Code != stripe.ErrorCodePaymentIntentUnexpectedState || se.PaymentIntent.ID != pi.ID {
		t.Fatalf("second capture: %s %+v", se.Code, se.PaymentIntent)
	}
	_, err = sc.PaymentIntents.Cancel(pi.ID, nil)
	if got := code(err); got != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("cancel after capture: %s", got)
	}

	rp := &stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(1000)}
	rp.AddMetadata("refund_id", "ref_1")
	re, err := sc.Refunds.New(rp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(re.ID, "re_") || re.Object != "refund" || re.Status != stripe.RefundStatusSucceeded || re.Amount != 1000 ||
		re.PaymentIntent.ID != pi.ID || re.Charge.ID != captured.LatestCharge.ID || re.Currency != "brl" || re.Metadata["refund_id"] != "ref_1" {
		t.Fatalf("refund = %+v", re)
	}
	_, err = sc.Refunds.New(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(501)})
	if got := code(err); got != stripe.ErrorCodeAmountTooLarge {
		t.Fatalf("refund too much: %s", got)
	}
	rest, err := sc.Refunds.New(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID)})
	if err != nil || rest.Amount != 500 {
		t.Fatalf("refund rest = %v, %v", rest, err)
	}
	_, err = sc.Refunds.New(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID)})
	if got := code(err); got != stripe.ErrorCodeChargeAlreadyRefunded {
		t.Fatalf("refund of refunded: %s", got)
	}
	got, err := sc.Refunds.Get(re.ID, nil)
	if err != nil || got.ID != re.ID || got.Amount != 1000 {
		t.Fatalf("retrieve refund = %v, %v", got, err)
	}
	_, err = sc.Refunds.Get("re_missing", nil)
	if se := stripeErr(t, err, http.StatusNotFound); se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("missing refund: %s", se.Code)
	}
	if in := e.sim.Intents(keyA)[0]; in.AmountRefunded != 1500 {
		t.Fatalf("AmountRefunded = %d", in.AmountRefunded)
	}

	other, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "manual", 700, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}
	canceled, err := sc.PaymentIntents.Cancel(other.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("requested_by_customer")})
	if err != nil {
		t.Fatal(err)
	}
	if canceled.Status != stripe.PaymentIntentStatusCanceled || canceled.CanceledAt == 0 || canceled.CancellationReason != "requested_by_customer" {
		t.Fatalf("canceled = %s %d %s", canceled.Status, canceled.CanceledAt, canceled.CancellationReason)
	}
	_, err = sc.PaymentIntents.Capture(other.ID, nil)
	if got := code(err); got != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("capture after cancel: %s", got)
	}
	_, err = sc.PaymentIntents.Cancel(other.ID, nil)
	if got := code(err); got != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("second cancel: %s", got)
	}

	// A declined intent can be canceled.
	_, err = sc.PaymentIntents.New(authorize("", "pm_card_chargeDeclined", "manual", 700, "pay_3"))
	declined := stripeErr(t, err, http.StatusPaymentRequired).PaymentIntent
	if c, err := sc.PaymentIntents.Cancel(declined.ID, nil); err != nil || c.Status != stripe.PaymentIntentStatusCanceled {
		t.Fatalf("cancel declined = %v, %v", c, err)
	}
	_, err = sc.PaymentIntents.Capture("pi_missing", nil)
	if se := stripeErr(t, err, http.StatusNotFound); se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("capture missing: %s", se.Code)
	}

	st := e.sim.Stats()
	if st.Authorizations != 2 || st.Captures != 1 || st.Refunds != 2 || st.Cancels != 2 || st.Declines != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSearchByPaymentID(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now, SearchLag: time.Minute})
	sc := e.client(keyA)

	var ids []string
	for i, pid := range []string{"pay_x", "pay_y", "pay_x", "pay_x"} {
		clock.Add(time.Second)
		pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "automatic", int64(100+i), pid))
		if err != nil {
			t.Fatal(err)
		}
		if pid == "pay_x" {
			ids = append(ids, pi.ID)
		}
	}
	search := func(key, query string) []string {
		t.Helper()
		p := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: query, Limit: stripe.Int64(2)}}
		it := e.client(key).PaymentIntents.Search(p)
		var found []string
		for it.Next() {
			found = append(found, it.PaymentIntent().ID)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return found
	}
	query := "metadata['payment_id']:'pay_x'"

	if got := search(keyA, query); len(got) != 0 {
		t.Fatalf("within search lag found %v", got)
	}
	clock.Add(time.Minute)
	got := search(keyA, query) // limit 2 makes the iterator follow next_page
	if want := []string{ids[2], ids[1], ids[0]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("search = %v, want newest first %v", got, want)
	}
	if got := search(keyA, `metadata["payment_id"]:"pay_y" AND status:"succeeded"`); len(got) != 1 {
		t.Fatalf("double-quoted AND search = %v", got)
	}
	if got := search(keyB, query); len(got) != 0 {
		t.Fatalf("other account found %v", got)
	}
	it := sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "amount>1"}})
	if it.Next() {
		t.Fatal("unsupported query returned results")
	}
	if se := stripeErr(t, it.Err(), http.StatusBadRequest); se.Param != "query" {
		t.Fatalf("unsupported query: %+v", se)
	}
}

func TestSecretKeysAreIsolated(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	a, b := e.client(keyA), e.client(keyB)

	piA, err := a.PaymentIntents.New(authorize("same-key", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.PaymentIntents.Get(piA.ID, nil)
	if se := stripeErr(t, err, http.StatusNotFound); se.Code != stripe.ErrorCodeResourceMissing || se.Type != stripe.ErrorTypeInvalidRequest {
		t.Fatalf("other account's intent: %s %s", se.Type, se.Code)
	}
	_, err = b.PaymentIntents.Capture(piA.ID, nil)
	stripeErr(t, err, http.StatusNotFound)

	// The same idempotency key under another secret key is a new request,
	// even with different parameters.
	piB, err := b.PaymentIntents.New(authorize("same-key", "pm_card_visa", "automatic", 999, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}
	if piB.ID == piA.ID || piB.Amount != 999 {
		t.Fatalf("account B got %s amount %d", piB.ID, piB.Amount)
	}
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 1, Authorizations: 1})
	wantStats(t, e.sim.StatsFor(keyB), Stats{Requests: 3, Authorizations: 1})
	if len(e.sim.Intents(keyA)) != 1 || len(e.sim.Intents(keyB)) != 1 || e.sim.Intents("sk_unknown") != nil {
		t.Fatal("Intents not per key")
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	form := url.Values{"amount": {"100"}, "currency": {"brl"}, "confirm": {"true"}, "payment_method": {"pm_card_visa"}}

	for _, auth := range []string{"", "pk_test_publishable", "rk_x"} {
		res, body := e.raw(t, "POST", "/v1/payment_intents", auth, "", form)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"type":"invalid_request_error"`) {
			t.Fatalf("auth %q: %d %s", auth, res.StatusCode, body)
		}
	}
	_, err := e.client("pk_test_x").PaymentIntents.Get("pi_1", nil)
	stripeErr(t, err, http.StatusUnauthorized)

	req, _ := http.NewRequest("POST", e.url+"/v1/payment_intents", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(keyA, "")
	res, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("basic auth: %d", res.StatusCode)
	}
	res, body := e.raw(t, "GET", "/v1/customers", keyA, "", nil)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, "Unrecognized request URL") {
		t.Fatalf("unknown route: %d %s", res.StatusCode, body)
	}
	if st := e.sim.Stats(); st.Requests != 6 || st.Authorizations != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
