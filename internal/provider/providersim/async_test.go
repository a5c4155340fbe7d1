package providersim

import (
	"bytes"
	"errors"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	stripe "github.com/stripe/stripe-go/v76"
)

func challenge(idemKey, pm, captureMethod, returnURL string) *stripe.PaymentIntentParams {
	p := authorize(idemKey, pm, captureMethod, 5000, "pay_3ds")
	if returnURL != "" {
		p.ReturnURL = stripe.String(returnURL)
	}
	return p
}

func pixParams(idemKey string, expiresAfter int64) *stripe.PaymentIntentParams {
	p := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(12345), Currency: stripe.String("brl"), Confirm: stripe.Bool(true),
		PaymentMethodTypes: stripe.StringSlice([]string{"pix"}),
		PaymentMethodData:  &stripe.PaymentIntentPaymentMethodDataParams{Type: stripe.String("pix")},
		PaymentMethodOptions: &stripe.PaymentIntentPaymentMethodOptionsParams{
			Pix: &stripe.PaymentIntentPaymentMethodOptionsPixParams{ExpiresAfterSeconds: stripe.Int64(expiresAfter)}},
		Metadata: map[string]string{"payment_id": "pay_pix"},
	}
	p.SetIdempotencyKey(idemKey)
	return p
}

func boletoParams(idemKey, taxID string, days int64) *stripe.PaymentIntentParams {
	p := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(9900), Currency: stripe.String("brl"), Confirm: stripe.Bool(true),
		PaymentMethodTypes: stripe.StringSlice([]string{"boleto"}),
		PaymentMethodData: &stripe.PaymentIntentPaymentMethodDataParams{
			Type:   stripe.String("boleto"),
			Boleto: &stripe.PaymentMethodBoletoParams{TaxID: stripe.String(taxID)},
			BillingDetails: &stripe.PaymentIntentPaymentMethodDataBillingDetailsParams{
				Name: stripe.String("Maria Silva"), Email: stripe.String("maria@example.com"),
				Address: &stripe.AddressParams{Line1: stripe.String("Av. Paulista 1000"), City: stripe.String("São Paulo"),
					State: stripe.String("SP"), PostalCode: stripe.String("01310-100"), Country: stripe.String("BR")}},
		},
		PaymentMethodOptions: &stripe.PaymentIntentPaymentMethodOptionsParams{
			Boleto: &stripe.PaymentIntentPaymentMethodOptionsBoletoParams{ExpiresAfterDays: stripe.Int64(days)}},
	}
	p.SetIdempotencyKey(idemKey)
	return p
}

// noRedirects is a client that shows redirects instead of following them.
func (e *env) noRedirects() *http.Client {
	c := *e.http
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func get200(t *testing.T, c *http.Client, u, wantType string) []byte {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), wantType) {
		t.Fatalf("GET %s = %d %s, want 200 %s: %s", u, res.StatusCode, res.Header.Get("Content-Type"), wantType, body)
	}
	return body
}

func TestChallengeRedirectsToReturnURLAfterApproval(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	const ret = "https://shop.example/return?order=pedido-1"
	pi, err := sc.PaymentIntents.New(challenge("k3ds", "pm_card_threeDSecure2Required", "manual", ret))
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != "requires_action" || pi.NextAction == nil || pi.NextAction.Type != "redirect_to_url" {
		t.Fatalf("intent = %s %+v, want requires_action redirect_to_url", pi.Status, pi.NextAction)
	}
	page := pi.NextAction.RedirectToURL.URL
	if page != e.url+"/_sim/3ds/"+pi.ID || pi.NextAction.RedirectToURL.ReturnURL != ret {
		t.Fatalf("redirect_to_url = %+v", pi.NextAction.RedirectToURL)
	}
	if !strings.HasPrefix(pi.ClientSecret, pi.ID+"_secret_") {
		t.Fatalf("client_secret = %q", pi.ClientSecret)
	}
	again, err := sc.PaymentIntents.New(challenge("k3ds", "pm_card_threeDSecure2Required", "manual", ret))
	if err != nil || again.ID != pi.ID || again.NextAction.RedirectToURL.URL != page || again.ClientSecret != pi.ClientSecret {
		t.Fatalf("replay = %+v, %v; want the same intent and challenge", again, err)
	}
	if len(e.sim.Intents(keyA)) != 1 {
		t.Fatal("the retry made a second intent")
	}

	if body := get200(t, e.http, page, "text/html"); !bytes.Contains(body, []byte(`value="approve"`)) || !bytes.Contains(body, []byte(`value="fail"`)) {
		t.Fatalf("challenge page lacks Approve and Fail: %s", body)
	}
	res, err := e.noRedirects().PostForm(page, url.Values{"action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || loc == nil || loc.Host != "shop.example" || loc.Path != "/return" {
		t.Fatalf("approve answered %d Location %q, want 303 to the return_url", res.StatusCode, res.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("order") != "pedido-1" || q.Get("payment_intent") != pi.ID ||
		q.Get("payment_intent_client_secret") != pi.ClientSecret || q.Get("redirect_status") != "succeeded" {
		t.Fatalf("return query = %v", q)
	}
	got, err := sc.PaymentIntents.Get(pi.ID, nil)
	if err != nil || got.Status != "requires_capture" || got.AmountCapturable != 5000 || got.NextAction != nil {
		t.Fatalf("after approval: %+v, %v; want requires_capture without next_action", got, err)
	}
	wantEventTypes(t, e.sim.Events(keyA), "payment_intent.requires_action", "payment_intent.amount_capturable_updated")
	if _, err := e.sim.Pay(pi.ID); !errors.Is(err, ErrUnexpectedState) {
		t.Fatalf("second approval: %v, want ErrUnexpectedState", err)
	}
}

func TestChallengeWithoutReturnURLUsesStripeSDKAndFails(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(challenge("k", "pm_card_authenticationRequired", "automatic", ""))
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != "requires_action" || pi.NextAction.Type != "use_stripe_sdk" || pi.NextAction.UseStripeSDK == nil {
		t.Fatalf("intent = %s %+v, want use_stripe_sdk", pi.Status, pi.NextAction)
	}
	res, err := e.noRedirects().PostForm(e.url+"/_sim/3ds/"+pi.ID, url.Values{"action": {"fail"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Authentication failed")) {
		t.Fatalf("fail answered %d %s", res.StatusCode, body)
	}
	got, err := sc.PaymentIntents.Get(pi.ID, nil)
	if err != nil || got.Status != "requires_payment_method" || got.LastPaymentError == nil ||
		got.LastPaymentError.Code != "payment_intent_authentication_failure" || got.PaymentMethod != nil {
		t.Fatalf("after failure: %+v, %v", got, err)
	}
	wantEventTypes(t, e.sim.Events(keyA), "payment_intent.requires_action", "payment_intent.payment_failed")
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 2, Declines: 1})

	// Automatic capture: approval charges at once.
	pi2, err := sc.PaymentIntents.New(challenge("k2", "pm_card_threeDSecure2Required", "automatic", "http://localhost:3000/back"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.sim.Pay(pi2.ID); err != nil || got.Status != "succeeded" || got.AmountReceived != 5000 {
		t.Fatalf("approve: %+v, %v", got, err)
	}
}

func TestPixQRCodeIsServedAndPaid(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(pixParams("kpix", 600))
	if err != nil {
		t.Fatal(err)
	}
	na := pi.NextAction
	if pi.Status != "requires_action" || na == nil || na.Type != "pix_display_qr_code" || na.PixDisplayQRCode == nil {
		t.Fatalf("intent = %s %+v, want pix_display_qr_code", pi.Status, na)
	}
	pix := na.PixDisplayQRCode
	if pix.ExpiresAt != clock.Now().Add(600*time.Second).Unix() || pix.Data == "" ||
		pix.ImageURLPNG != e.url+"/_sim/pix/"+pi.ID+"/qr.png" || pix.HostedInstructionsURL != e.url+"/_sim/pix/"+pi.ID {
		t.Fatalf("pix_display_qr_code = %+v", pix)
	}
	if len(pi.PaymentMethodTypes) != 1 || pi.PaymentMethodTypes[0] != "pix" || pi.PaymentMethod == nil {
		t.Fatalf("payment method = %v %v", pi.PaymentMethodTypes, pi.PaymentMethod)
	}
	again, err := sc.PaymentIntents.New(pixParams("kpix", 600))
	if err != nil || again.ID != pi.ID || again.NextAction.PixDisplayQRCode.Data != pix.Data {
		t.Fatalf("replay = %+v, %v; want the same QR code", again, err)
	}

	// The PNG is the QR code of data, module for module.
	img, err := png.Decode(bytes.NewReader(get200(t, e.http, pix.ImageURLPNG, "image/png")))
	if err != nil {
		t.Fatal(err)
	}
	want, err := qrcode.New(pix.Data, qrcode.Medium)
	if err != nil {
		t.Fatal(err)
	}
	bm := want.Bitmap()
	size := img.Bounds().Dx()
	for y := range bm {
		for x := range bm[y] {
			px := img.Bounds().Min.X + (2*x+1)*size/(2*len(bm))
			py := img.Bounds().Min.Y + (2*y+1)*size/(2*len(bm))
			r, _, _, _ := img.At(px, py).RGBA()
			if dark := r < 0x8000; dark != bm[y][x] {
				t.Fatalf("module (%d,%d) dark=%v, want %v", x, y, dark, bm[y][x])
			}
		}
	}
	if svg := get200(t, e.http, pix.ImageURLSVG, "image/svg+xml"); !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Fatalf("svg = %.60s", svg)
	}
	if page := get200(t, e.http, pix.HostedInstructionsURL, "text/html"); !bytes.Contains(page, []byte("qr.png")) {
		t.Fatalf("instructions page lacks the QR image: %s", page)
	}

	clock.Add(599 * time.Second)
	got, err := e.sim.Pay(pi.ID)
	if err != nil || got.Status != "succeeded" || got.AmountReceived != 12345 {
		t.Fatalf("pay a second before expiry: %+v, %v", got, err)
	}
	wantEventTypes(t, e.sim.Events(keyA), "payment_intent.requires_action", "payment_intent.succeeded")
}

func TestPixExpiresByTheClockAndCannotBePaid(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(pixParams("kpix", 60))
	if err != nil {
		t.Fatal(err)
	}
	e.sim.Advance(60 * time.Second)
	// Advance expired it and sent the event before anyone asked.
	wantEventTypes(t, e.sim.Events(keyA), "payment_intent.requires_action", "payment_intent.payment_failed")
	got, err := sc.PaymentIntents.Get(pi.ID, nil)
	if err != nil || got.Status != "requires_payment_method" || got.NextAction != nil ||
		got.LastPaymentError == nil || got.LastPaymentError.Code != "payment_intent_payment_attempt_expired" {
		t.Fatalf("after expiry: %+v, %v", got, err)
	}
	if _, err := e.sim.Pay(pi.ID); !errors.Is(err, ErrUnexpectedState) {
		t.Fatalf("paying an expired Pix: %v, want ErrUnexpectedState", err)
	}
	// The service makes sure: the expired intent can still be canceled.
	if got, err := sc.PaymentIntents.Cancel(pi.ID, nil); err != nil || got.Status != "canceled" {
		t.Fatalf("cancel after expiry: %+v, %v", got, err)
	}

	// Expire forces it whatever the clock.
	pi2, err := sc.PaymentIntents.New(pixParams("kpix2", 3600))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.sim.Expire(pi2.ID); err != nil || got.Status != "requires_payment_method" {
		t.Fatalf("Expire: %+v, %v", got, err)
	}
}

func TestBoletoVoucherProcessingAndPaid(t *testing.T) {
	t.Parallel()
	clock := newClock() // 2025-01-02 03:04:05 UTC, 2025-01-02 00:04:05 in São Paulo
	e := start(t, Options{Now: clock.Now})
	sc := e.client(keyA)

	_, err := sc.PaymentIntents.New(boletoParams("bad", "123", 3))
	if se := stripeErr(t, err, http.StatusBadRequest); se.Param != "payment_method_data[boleto][tax_id]" {
		t.Fatalf("param = %q", se.Param)
	}
	missing := boletoParams("nomail", "123.456.789-09", 3)
	missing.PaymentMethodData.BillingDetails.Email = nil
	_, err = sc.PaymentIntents.New(missing)
	if se := stripeErr(t, err, http.StatusBadRequest); se.Param != "payment_method_data[billing_details][email]" {
		t.Fatalf("param = %q", se.Param)
	}
	if n := len(e.sim.Intents(keyA)); n != 0 {
		t.Fatalf("%d intents stored by rejected requests", n)
	}

	pi, err := sc.PaymentIntents.New(boletoParams("kb", "123.456.789-09", 3))
	if err != nil {
		t.Fatal(err)
	}
	b := pi.NextAction.BoletoDisplayDetails
	due := time.Date(2025, 1, 5, 23, 59, 59, 0, time.FixedZone("", -3*3600))
	if pi.NextAction.Type != "boleto_display_details" || b.ExpiresAt != due.Unix() || len(b.Number) != 47 ||
		b.HostedVoucherURL != e.url+"/_sim/boleto/"+pi.ID || b.PDF != b.HostedVoucherURL+"/voucher.pdf" {
		t.Fatalf("boleto_display_details = %+v (due %d)", b, due.Unix())
	}
	if page := get200(t, e.http, b.HostedVoucherURL, "text/html"); !bytes.Contains(page, []byte(b.Number)) {
		t.Fatalf("voucher page lacks the number: %s", page)
	}
	if pdf := get200(t, e.http, b.PDF, "application/pdf"); !bytes.HasPrefix(pdf, []byte("%PDF-")) || !bytes.Contains(pdf, []byte(b.Number)) {
		t.Fatalf("pdf = %.80q", pdf)
	}

	e.sim.Advance(48 * time.Hour) // still before the due date
	if got, err := e.sim.MarkProcessing(pi.ID); err != nil || got.Status != "processing" {
		t.Fatalf("processing: %+v, %v", got, err)
	}
	e.sim.Advance(10 * 24 * time.Hour) // processing never expires
	if got, err := e.sim.Pay(pi.ID); err != nil || got.Status != "succeeded" {
		t.Fatalf("pay: %+v, %v", got, err)
	}
	wantEventTypes(t, e.sim.Events(keyA), "payment_intent.requires_action", "payment_intent.processing", "payment_intent.succeeded")
}

func TestCancelWhileWaitingVersusPay(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	waiting, err := sc.PaymentIntents.New(pixParams("k1", 600))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sc.PaymentIntents.Cancel(waiting.ID, nil); err != nil || got.Status != "canceled" || got.NextAction != nil {
		t.Fatalf("cancel requires_action: %+v, %v", got, err)
	}
	if _, err := e.sim.Pay(waiting.ID); !errors.Is(err, ErrUnexpectedState) {
		t.Fatalf("paying a canceled intent: %v", err)
	}

	paid, err := sc.PaymentIntents.New(pixParams("k2", 600))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay(paid.ID); err != nil {
		t.Fatal(err)
	}
	_, err = sc.PaymentIntents.Cancel(paid.ID, nil)
	if se := stripeErr(t, err, http.StatusBadRequest); se.Code != "payment_intent_unexpected_state" ||
		se.PaymentIntent == nil || se.PaymentIntent.Status != "succeeded" {
		t.Fatalf("cancel of a paid intent: %+v", se)
	}

	processing, err := sc.PaymentIntents.New(boletoParams("k3", "11.222.333/0001-81", 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.MarkProcessing(processing.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := sc.PaymentIntents.Cancel(processing.ID, nil); err != nil || got.Status != "canceled" {
		t.Fatalf("cancel processing: %+v, %v", got, err)
	}
	wantEventTypes(t, e.sim.Events(keyA),
		"payment_intent.requires_action", "payment_intent.canceled",
		"payment_intent.requires_action", "payment_intent.succeeded",
		"payment_intent.requires_action", "payment_intent.processing", "payment_intent.canceled")
}

func TestControlTransitionEndpoints(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	pi, err := e.client(keyA).PaymentIntents.New(pixParams("k", 600))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/_sim/intents/" + pi.ID + "/fail", http.StatusConflict}, // a waiting Pix has nothing to fail
		{"/_sim/intents/" + pi.ID + "/processing", http.StatusOK},
		{"/_sim/intents/" + pi.ID + "/expire", http.StatusConflict},
		{"/_sim/intents/" + pi.ID + "/pay", http.StatusOK},
		{"/_sim/intents/" + pi.ID + "/pay", http.StatusConflict},
		{"/_sim/intents/pi_nope/pay", http.StatusNotFound},
	} {
		if res, body := e.raw(t, http.MethodPost, c.path, "", "", nil); res.StatusCode != c.want {
			t.Fatalf("POST %s = %d %s, want %d", c.path, res.StatusCode, body, c.want)
		}
	}
	if got := e.sim.Intents(keyA)[0]; got.Status != "succeeded" || got.MethodType != "pix" {
		t.Fatalf("intent = %+v", got)
	}
}

func wantEventTypes(t *testing.T, evs []Event, want ...string) {
	t.Helper()
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = ev.Type
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events = %v, want %v", got, want)
	}
}
