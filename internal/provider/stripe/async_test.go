package stripe

import (
	"context"
	"reflect"
	"testing"

	"github.com/acmepay/payments/internal/provider"
)

var billing = &provider.BillingDetails{Name: "Ana", Email: "ana@example.com", TaxID: "52998224725",
	Address: provider.Address{Line1: "Rua A, 1", City: "São Paulo", State: "SP", PostalCode: "01310-100", Country: "BR"}}

func pixReq() provider.AuthorizeRequest {
	r := authReq()
	r.PaymentMethod, r.CaptureMethod, r.ExpiresIn = provider.MethodPix, "automatic", 3600
	return r
}

func boletoReq() provider.AuthorizeRequest {
	r := authReq()
	r.PaymentMethod, r.CaptureMethod, r.ExpiresIn, r.BillingDetails = provider.MethodBoleto, "automatic", 3, billing
	return r
}

// TestAuthorizeSendsMethodFields: Pix and Boleto are created from
// payment_method_data with their expiry and the payer; a card with a
// return_url may redirect, one without may not.
func TestAuthorizeSendsMethodFields(t *testing.T) {
	t.Parallel()
	card3DS := authReq()
	card3DS.PaymentMethod, card3DS.ReturnURL = "pm_card_threeDSecure2Required", "https://shop.example/back"
	for _, c := range []struct {
		name    string
		req     provider.AuthorizeRequest
		want    map[string]string
		without []string
	}{
		{"pix", pixReq(), map[string]string{
			"payment_method_data[type]": "pix", "payment_method_types[0]": "pix",
			"payment_method_options[pix][expires_after_seconds]": "3600", "capture_method": "automatic",
		}, []string{"payment_method", "automatic_payment_methods[enabled]", "return_url"}},
		{"boleto", boletoReq(), map[string]string{
			"payment_method_data[type]": "boleto", "payment_method_types[0]": "boleto",
			"payment_method_options[boleto][expires_after_days]":         "3",
			"payment_method_data[boleto][tax_id]":                        "52998224725",
			"payment_method_data[billing_details][name]":                 "Ana",
			"payment_method_data[billing_details][email]":                "ana@example.com",
			"payment_method_data[billing_details][address][postal_code]": "01310-100",
			"payment_method_data[billing_details][address][country]":     "BR",
		}, []string{"payment_method"}},
		{"card with return_url", card3DS, map[string]string{
			"payment_method": "pm_card_threeDSecure2Required", "return_url": "https://shop.example/back",
			"automatic_payment_methods[enabled]": "true",
		}, []string{"automatic_payment_methods[allow_redirects]", "payment_method_data[type]"}},
		{"card without return_url", authReq(), map[string]string{
			"automatic_payment_methods[allow_redirects]": "never",
		}, []string{"return_url"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStripe{status: 200, body: intentJSON}
			if res := newFake(t, f).Authorize(context.Background(), creds, c.req); res.Answer != provider.AnswerObject {
				t.Fatalf("answer %q (%v)", res.Answer, res.Err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for k, want := range c.want {
				if got := f.form.Get(k); got != want {
					t.Errorf("form %s: got %q, want %q", k, got, want)
				}
			}
			for _, k := range c.without {
				if f.form.Has(k) {
					t.Errorf("form %s sent", k)
				}
			}
		})
	}
}

func TestCancelAbandonedSendsReason(t *testing.T) {
	t.Parallel()
	f := &fakeStripe{status: 200, body: intentJSON}
	newFake(t, f).Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: "k", IntentID: "pi_1", Abandoned: true})
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.form.Get("cancellation_reason"); got != "abandoned" {
		t.Fatalf("cancellation_reason %q", got)
	}
}

// TestIntentStatesAndNextActions: every Stripe status and next_action the
// service meets maps to the service's own terms.
func TestIntentStatesAndNextActions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       provider.Intent
	}{
		{"redirect", `{"id":"pi_1","status":"requires_action","client_secret":"pi_1_secret_x",
"next_action":{"type":"redirect_to_url","redirect_to_url":{"url":"https://hooks.example/3ds","return_url":"https://shop.example/back"}}}`,
			provider.Intent{ID: "pi_1", State: provider.IntentRequiresAction, ClientSecret: "pi_1_secret_x",
				NextAction: &provider.NextAction{Type: provider.NextRedirectToURL, RedirectToURL: &provider.RedirectToURL{URL: "https://hooks.example/3ds", ReturnURL: "https://shop.example/back"}}}},
		{"sdk", `{"id":"pi_1","status":"requires_action","client_secret":"s","next_action":{"type":"use_stripe_sdk","use_stripe_sdk":{"type":"three_d_secure_redirect"}}}`,
			provider.Intent{ID: "pi_1", State: provider.IntentRequiresAction, ClientSecret: "s", NextAction: &provider.NextAction{Type: provider.NextUseStripeSDK}}},
		{"pix", `{"id":"pi_1","status":"requires_action","client_secret":"s","next_action":{"type":"pix_display_qr_code",
"pix_display_qr_code":{"data":"000201","image_url_png":"https://q/png","hosted_instructions_url":"https://q/i","expires_at":1767225600}}}`,
			provider.Intent{ID: "pi_1", State: provider.IntentRequiresAction, ClientSecret: "s", NextAction: &provider.NextAction{Type: provider.NextPixQRCode,
				PixQRCode: &provider.PixQRCode{Data: "000201", ImageURLPNG: "https://q/png", HostedInstructionsURL: "https://q/i", ExpiresAt: "2026-01-01T00:00:00Z"}}}},
		{"boleto", `{"id":"pi_1","status":"requires_action","client_secret":"s","next_action":{"type":"boleto_display_details",
"boleto_display_details":{"number":"2379","hosted_voucher_url":"https://b/v","pdf":"https://b/pdf","expires_at":1767225600}}}`,
			provider.Intent{ID: "pi_1", State: provider.IntentRequiresAction, ClientSecret: "s", NextAction: &provider.NextAction{Type: provider.NextBoletoDetails,
				BoletoDetails: &provider.BoletoDetails{Number: "2379", HostedVoucherURL: "https://b/v", PDF: "https://b/pdf", ExpiresAt: "2026-01-01T00:00:00Z"}}}},
		{"processing", `{"id":"pi_1","status":"processing","client_secret":"s"}`,
			provider.Intent{ID: "pi_1", State: provider.IntentProcessing, ClientSecret: "s"}},
		{"requires_confirmation", `{"id":"pi_1","status":"requires_confirmation","client_secret":"s"}`,
			provider.Intent{ID: "pi_1", State: provider.IntentRequiresConfirmation}},
		{"authentication failed", `{"id":"pi_1","status":"requires_payment_method","client_secret":"s",
"last_payment_error":{"type":"invalid_request_error","code":"payment_intent_authentication_failure","message":"auth failed"}}`,
			provider.Intent{ID: "pi_1", State: provider.IntentNeedsPaymentMethod, FailureCode: provider.FailureAuthentication, FailureMessage: "auth failed"}},
		{"succeeded keeps no secret", `{"id":"pi_1","status":"succeeded","client_secret":"s","amount_received":10}`,
			provider.Intent{ID: "pi_1", State: provider.IntentCaptured, AmountReceived: 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in, err := newFake(t, &fakeStripe{status: 200, body: c.body}).RetrieveIntent(context.Background(), creds, "pi_1")
			if err != nil {
				t.Fatal(err)
			}
			in.Metadata = nil
			if !reflect.DeepEqual(*in, c.want) {
				t.Fatalf("got %+v\nwant %+v", *in, c.want)
			}
		})
	}
}

// TestStripeMockAsyncWire checks the new request shapes against Stripe's
// OpenAPI spec.
func TestStripeMockAsyncWire(t *testing.T) {
	t.Parallel()
	p := New(Config{APIBase: stripeMock(t)})
	card3DS := authReq()
	card3DS.PaymentMethod, card3DS.ReturnURL = "pm_card_threeDSecure2Required", "https://shop.example/back"
	for name, r := range map[string]provider.AuthorizeRequest{"pix": pixReq(), "boleto": boletoReq(), "card with return_url": card3DS} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if res := p.Authorize(context.Background(), creds, r); res.Answer != provider.AnswerObject {
				t.Fatalf("got %q code=%q msg=%q err=%v", res.Answer, res.FailureCode, res.FailureMessage, res.Err)
			}
		})
	}
	t.Run("cancel abandoned", func(t *testing.T) {
		t.Parallel()
		res := p.Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: "pedido-1:cancelar-v1", IntentID: "pi_123", Abandoned: true})
		if res.Answer != provider.AnswerObject {
			t.Fatalf("got %q code=%q msg=%q err=%v", res.Answer, res.FailureCode, res.FailureMessage, res.Err)
		}
	})
}
