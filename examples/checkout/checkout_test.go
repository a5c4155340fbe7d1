package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/chromedp/chromedp"
)

// findChromium returns the browser to drive: CHROMIUM_BIN, or the first of
// Debian's and others' names on PATH. Without one the test fails where a
// full run is required (CI=true, or REQUIRE_CHROMIUM=1 as scripts/test.sh
// sets it) and skips elsewhere, saying why.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no Chromium found (CHROMIUM_BIN, or chromium on PATH): install Debian's chromium (apt-get install -y chromium); scripts/test.sh does so when it is missing"
	if os.Getenv("CI") == "true" || os.Getenv("REQUIRE_CHROMIUM") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// browser starts a fresh headless Chromium and returns a tab's context.
func browser(t *testing.T, bin string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(800, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	// The first Do starts the browser, and lives as long as its context: no
	// timeout on it. Each step below gets its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// The example page, driven as a customer would: pay with Pix, the QR image
// loads from the provider, the customer pays (the simulator's control API),
// the provider's signed webhook reaches the service, and the page's polling
// shows "paid".
func TestCheckoutPagePixPaid(t *testing.T) {
	bin := findChromium(t)
	e := apitest.New(t, apitest.Options{})

	// A merchant whose provider webhooks reach the service, as make run sets up.
	const whsec = "whsec_checkout_example_test"
	sk := "sk_test_shop_" + apitest.SecretSuffix(t)
	acct, apiKey, err := e.Accounts.Create(context.Background(), "Loja Checkout", sk, whsec)
	if err != nil {
		t.Fatal(err)
	}
	e.Sim.RegisterWebhookEndpoint(sk, e.URL+"/webhooks/stripe/"+acct.ID, whsec)

	shop := httptest.NewServer(newHandler(config{API: e.URL, APIKey: apiKey}))
	t.Cleanup(shop.Close)

	ctx := browser(t, bin)
	// Each step is bounded: a page that never reaches a state fails the
	// test naming that step, instead of hanging.
	within := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := f(sctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(ctx context.Context, expr string, out *string) (err error) {
		*out, err = chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		return err
	}
	within("open the page and choose Pix", func(ctx context.Context) error {
		return chromedp.Do(ctx,
			chromedp.Navigate(shop.URL+"/"),
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
	for name, shot := range map[string][]byte{"checkout-pix-qr.png": qrShot, "checkout-pix-paid.png": png} {
		path := filepath.Join(t.ArtifactDir(), name)
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (kept with go test -artifacts)", path)
	}

	if p := getPayment(t, e.URL, apiKey, paymentID); p.Status != "captured" {
		t.Fatalf("payment %s is %q at the service, want captured", paymentID, p.Status)
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
