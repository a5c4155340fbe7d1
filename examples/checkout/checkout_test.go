package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// shop is the example's world: the service and the simulator (apitest),
// a merchant whose provider webhooks reach the service as make run sets
// them up, the example backend, and a browser tab.
type shop struct {
	t      *testing.T
	e      *apitest.Env
	apiKey string
	url    string
	ctx    context.Context
}

func newShop(t *testing.T) *shop {
	bin := browsertest.Find(t)
	e := apitest.New(t, apitest.Options{})
	const whsec = "whsec_checkout_example_test"
	sk := "sk_test_shop_" + apitest.SecretSuffix(t)
	acct, apiKey, err := e.Accounts.Create(context.Background(), "Loja Checkout", sk, whsec)
	if err != nil {
		t.Fatal(err)
	}
	e.Sim.RegisterWebhookEndpoint(sk, e.URL+"/webhooks/stripe/"+acct.ID, whsec)
	srv := httptest.NewServer(newHandler(config{API: e.URL, APIKey: apiKey}))
	t.Cleanup(srv.Close)
	return &shop{t: t, e: e, apiKey: apiKey, url: srv.URL, ctx: browsertest.Start(t, bin, 800, 900)}
}

// within runs one step, bounded: a page that never reaches a state fails
// the test naming that step, instead of hanging.
func (s *shop) within(what string, f func(ctx context.Context) error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

func eval(ctx context.Context, expr string, out *string) (err error) {
	*out, err = chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	return err
}

// save keeps a screenshot with the test's artifacts.
func (s *shop) save(name string, png []byte) {
	s.t.Helper()
	path := filepath.Join(s.t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("screenshot: %s (kept with go test -artifacts)", path)
}

// The example page, driven as a customer would: pay with Pix, the QR image
// loads from the provider, the customer pays (the simulator's control API),
// the provider's signed webhook reaches the service, and the page's polling
// shows "paid".
func TestCheckoutPagePixPaid(t *testing.T) {
	s := newShop(t)
	e, apiKey, within := s.e, s.apiKey, s.within
	within("open the page and choose Pix", func(ctx context.Context) error {
		return chromedp.Do(ctx,
			chromedp.Navigate(s.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#pay-pix`)),
			chromedp.Click(chromedp.CSS(`#pay-pix`)),
		)
	})
	var paymentID, intentID, qrSrc, qrWidth string
	var qrShot []byte
	within("the QR image loads", func(ctx context.Context) error {
		err := chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.CSS(`#qr[data-loaded="true"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#status[data-state="waiting"]`)),
		)
		if err != nil {
			return err
		}
		qrShot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		return errors.Join(err,
			eval(ctx, `String(document.getElementById("qr").naturalWidth)`, &qrWidth),
			eval(ctx, `document.getElementById("qr").src`, &qrSrc),
			eval(ctx, `document.body.dataset.paymentId`, &paymentID),
			eval(ctx, `document.body.dataset.providerPaymentId`, &intentID),
		)
	})
	if qrWidth == "0" || intentID == "" || !strings.HasPrefix(qrSrc, e.SimURL+"/_sim/pix/"+intentID+"/qr.png") {
		t.Fatalf("QR image %q (width %s), want the simulator's PNG of %q", qrSrc, qrWidth, intentID)
	}

	// The service says the same as the page.
	p := getPayment(t, e.URL, apiKey, paymentID)
	if p.Status != "requires_action" || p.NextAction.Type != "pix_display_qr_code" || p.NextAction.Pix.ImageURLPNG != qrSrc {
		t.Fatalf("payment %s: status %q, next_action %+v; want requires_action with the page's QR image", paymentID, p.Status, p.NextAction)
	}

	// The customer pays in the bank's app.
	res, err := http.Post(e.SimURL+"/_sim/intents/"+intentID+"/pay", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("pay %s at the simulator: %s", intentID, res.Status)
	}

	var text string
	var png []byte
	within("the page reaches paid", func(ctx context.Context) (err error) {
		if err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#status[data-state="paid"]`))); err != nil {
			return err
		}
		if text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#status`))); err != nil {
			return err
		}
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		return err
	})
	if !strings.Contains(text, "Paid") || !strings.Contains(text, paymentID) {
		t.Fatalf("status text %q", text)
	}
	s.save("checkout-pix-qr.png", qrShot)
	s.save("checkout-pix-paid.png", png)

	if p := getPayment(t, e.URL, apiKey, paymentID); p.Status != "captured" {
		t.Fatalf("payment %s is %q at the service, want captured", paymentID, p.Status)
	}
}

// The card flow with 3-D Secure: the page follows the redirect to the
// provider's challenge, the customer approves (or fails) it, the provider
// sends the customer back to return_url, and the page polls its order's
// payment until it is final.
func TestCheckoutPageThreeDSecure(t *testing.T) {
	s := newShop(t)
	for _, tc := range []struct {
		button, state, want string
	}{
		{"#approve", "paid", "captured"},
		{"#fail", "failed", "authentication_failed"},
	} {
		var text, back string
		var png []byte
		s.within("pay by card and "+tc.button+" the challenge", func(ctx context.Context) (err error) {
			err = chromedp.Do(ctx,
				chromedp.Navigate(s.url+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#pay-card`)),
				chromedp.Click(chromedp.CSS(`#pay-card`)),
				// The provider's challenge page.
				chromedp.WaitVisible(chromedp.CSS(tc.button)),
				chromedp.Click(chromedp.CSS(tc.button)),
				chromedp.WaitVisible(chromedp.CSS(`#status[data-state="`+tc.state+`"]`)),
			)
			if err != nil {
				return err
			}
			if text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#status`))); err != nil {
				return err
			}
			if back, err = chromedp.Run(ctx, chromedp.Location()); err != nil {
				return err
			}
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
			return err
		})
		if !strings.Contains(text, tc.want) || !strings.HasPrefix(back, s.url+"/") {
			t.Fatalf("%s: the page at %s says %q, want the shop's page saying %s", tc.button, back, text, tc.want)
		}
		s.save("checkout-3ds-"+tc.state+".png", png)
	}
}

type paymentView struct {
	Status     string `json:"status"`
	NextAction struct {
		Type string `json:"type"`
		Pix  struct {
			ImageURLPNG string `json:"image_url_png"`
		} `json:"pix_display_qr_code"`
	} `json:"next_action"`
}

func getPayment(t *testing.T, api, key, id string) paymentView {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, api+"/v1/payments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p paymentView
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET payment %s: %s %v", id, res.Status, err)
	}
	return p
}
