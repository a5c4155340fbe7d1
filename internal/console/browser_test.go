package console_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// An operator signs in, finds a payment whose provider answer was lost,
// sees the provider's state beside ours, reconciles it to final, and
// replays a declined payment; then resolves a discrepancy the audit found
// (a refund made in the provider's dashboard) and opens a disputed payment. Screenshots of each page are kept with the
// test's artifacts (and in CONSOLE_SCREENSHOTS, when set, for docs/operating.md).
func TestConsoleInBrowser(t *testing.T) {
	bin := browsertest.Find(t)
	e := apitest.New(t, apitest.Options{})
	declined := createPayment(t, e, "pedido-recusado", "pm_card_chargeDeclined", http.StatusCreated)
	dropAuthorize(e)
	stuck := createPayment(t, e, "pedido-perdido", "pm_card_visa", http.StatusAccepted)
	disputed := disputedPayment(t, e, "pedido-contestado")
	refunded, dsc := capturedWithDashboardRefund(t, e, "pedido-painel")
	ctx := browsertest.Start(t, bin, 1280, 800)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		dirs := []string{t.ArtifactDir()}
		if d := os.Getenv("CONSOLE_SCREENSHOTS"); d != "" {
			dirs = append(dirs, d)
		}
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}

	step("sign in",
		chromedp.Navigate(e.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#actor-name`)),
		chromedp.SendKeys(chromedp.CSS(`#actor-name`), "Ana Operadora"),
		chromedp.SendKeys(chromedp.CSS(`#token`), apitest.AdminToken),
		chromedp.Submit(chromedp.CSS(`#sign-in`)),
		chromedp.WaitVisible(chromedp.CSS(`#waiting-by-age`)))
	if got := text(`#open-total`); got != "2" {
		t.Fatalf("open discrepancies on the overview = %q, want 2 (the dashboard refund and the dispute)", got)
	}
	if got := text(`#provider-charts .chart[data-provider="stripe"] h3`); !strings.Contains(got, "payments") {
		t.Fatalf("the overview's chart of stripe reads %q", got)
	}
	shot("overview.png")

	step("search by order id",
		chromedp.SendKeys(chromedp.CSS(`header form.search input`), "pedido-perdido\n"),
		chromedp.WaitVisible(chromedp.CSS(`#search-results tr[data-payment-id="`+stuck+`"]`)))
	shot("search.png")

	step("find the stuck payment",
		chromedp.Navigate(e.URL+"/console/payments"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-payment-id="`+stuck+`"]`)))
	shot("stuck.png")
	step("open it",
		chromedp.Click(chromedp.CSS(`tr[data-payment-id="`+stuck+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#compare`)))
	if got := text(`#compare tr.diff[data-field="Status"]`); !strings.Contains(got, "unknown") || !strings.Contains(got, "authorized") {
		t.Fatalf("status row %q, want ours unknown beside the provider's authorized, highlighted", got)
	}
	shot("payment-unknown.png")

	step("reconcile now",
		chromedp.Click(chromedp.CSS(`#action-reconcile`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason`)))
	shot("confirm.png")
	step("confirm with a reason",
		chromedp.SendKeys(chromedp.CSS(`#reason`), "customer asks whether they were charged"),
		chromedp.Click(chromedp.CSS(`#confirm-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="authorized"]`)))
	if got := text(`#compare`); strings.Contains(got, "differs") {
		t.Fatalf("after reconciling the comparison still differs: %q", got)
	}
	shot("payment-reconciled.png")

	step("replay the declined payment",
		chromedp.Navigate(e.URL+"/console/payments/"+declined),
		chromedp.Click(chromedp.CSS(`#action-replay`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason`)),
		chromedp.SendKeys(chromedp.CSS(`#reason`), "customer updated the card"),
		chromedp.Click(chromedp.CSS(`#confirm-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)))
	if got := text(`#attempts`); !strings.Contains(got, "pedido-recusado:autorizar-v2") {
		t.Fatalf("attempts %q, want a second attempt with the next provider key", got)
	}
	if got := text(`#timeline`); !strings.Contains(got, "replay.new_attempt") || !strings.Contains(got, "Ana Operadora") {
		t.Fatalf("timeline %q, want the replay by Ana Operadora", got)
	}
	shot("payment-replayed.png")

	step("accounts", chromedp.Navigate(e.URL+"/console/accounts"), chromedp.WaitVisible(chromedp.CSS(`#create-account`)))
	shot("accounts.png")

	row := `tr[data-discrepancy-id="` + dsc.ID + `"]`
	step("open discrepancies",
		chromedp.Click(chromedp.CSS(`a[href="/console/discrepancies"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-status="open"]`)))
	if got := text(row); !strings.Contains(got, "amount_refunded_mismatch") || !strings.Contains(got, "amount_refunded: 500") {
		t.Fatalf("discrepancy row %q, want the dashboard refund of 500", got)
	}
	shot("discrepancies.png")
	step("resolve it",
		chromedp.Click(chromedp.CSS(`#resolve-`+dsc.ID)),
		chromedp.WaitVisible(chromedp.CSS(`#reason`)),
		chromedp.Click(chromedp.CSS(`#action-note`)),
		chromedp.SendKeys(chromedp.CSS(`#reason`), "refunded by phone support; nothing to change"))
	shot("resolve.png")
	step("confirm the resolution",
		chromedp.Click(chromedp.CSS(`#confirm-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-status="resolved"]`)))
	if got := text(`#payment-id`); got != refunded {
		t.Fatalf("after resolving the console shows payment %q, want %s", got, refunded)
	}
	if got := text(`#timeline`); !strings.Contains(got, "discrepancy.resolved") || !strings.Contains(got, "refunded by phone support") {
		t.Fatalf("timeline %q, want the resolution with its reason", got)
	}
	shot("payment-discrepancy-resolved.png")

	step("open the disputed payment",
		chromedp.Navigate(e.URL+"/console/payments/"+disputed),
		chromedp.WaitVisible(chromedp.CSS(`#disputes tr[data-dispute-id]`)))
	if got := text(`#disputes tbody`); !strings.Contains(got, "product_not_received") || !strings.Contains(got, "needs_response") ||
		!strings.Contains(got, "15.00 BRL") {
		t.Fatalf("disputes %q, want 15.00 BRL product_not_received needing a response", got)
	}
	shot("payment-disputed.png")

	v, err := e.Operations.AdminGet(context.Background(), stuck)
	if err != nil {
		t.Fatal(err)
	}
	if v.Payment.Status != "authorized" {
		t.Fatalf("payment %s is %s, want authorized", stuck, v.Payment.Status)
	}
	if st := e.Sim.Stats(); st.Authorizations != 3 || st.Declines != 2 || st.Refunds != 0 {
		t.Fatalf("the simulator made %d authorizations, %d declines and %d API refunds, want 3 (the stuck, disputed and dashboard-refunded payments: reconciling never charges again), 2 (the declined payment and its replay) and 0",
			st.Authorizations, st.Declines, st.Refunds)
	}
}
