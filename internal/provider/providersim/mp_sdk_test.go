package providersim

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/mercadopago/sdk-go/pkg/config"
	"github.com/mercadopago/sdk-go/pkg/payment"
	mprefund "github.com/mercadopago/sdk-go/pkg/refund"
)

// toSim sends the SDK's requests, addressed to api.mercadopago.com, to the
// simulator.
type toSim struct {
	base   *url.URL
	client *http.Client
}

func (r toSim) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = r.base.Scheme, r.base.Host
	return r.client.Do(req)
}

// TestMPWithTheSDK drives the simulator with mercadopago/sdk-go v1.8.0: it
// decodes every answer, dates included.
func TestMPWithTheSDK(t *testing.T) {
	e := start(t, Options{})
	base, _ := url.Parse(e.url)
	cfg, err := config.New(mpToken, config.WithHTTPClient(toSim{base, e.http}))
	if err != nil {
		t.Fatal(err)
	}
	pc, rc, ctx := payment.NewClient(cfg), mprefund.NewClient(cfg), context.Background()
	payer := &payment.PayerRequest{Email: "buyer@example.com"}
	card, err := pc.Create(ctx, payment.Request{TransactionAmount: 10, Token: "tok_APRO", PaymentMethodID: "visa",
		Installments: 1, Payer: payer, ExternalReference: "pedido-9"})
	if err != nil || card.Status != "approved" || !card.Captured || card.DateCreated.IsZero() || card.DateApproved.IsZero() {
		t.Fatalf("card: %+v %v", card, err)
	}
	pix, err := pc.Create(ctx, payment.Request{TransactionAmount: 10, PaymentMethodID: "pix", Payer: payer})
	td := pix.PointOfInteraction.TransactionData
	if err != nil || td.QRCode == "" || td.QRCodeBase64 == "" || td.TicketURL == "" || pix.DateOfExpiration.IsZero() {
		t.Fatalf("pix: %+v %v", pix, err)
	}
	found, err := pc.Search(ctx, payment.SearchRequest{Filters: map[string]string{"external_reference": "pedido-9"}})
	if err != nil || len(found.Results) != 1 || found.Results[0].ID != card.ID {
		t.Fatalf("search: %+v %v", found, err)
	}
	if _, err := rc.CreatePartialRefund(ctx, card.ID, 3); err != nil {
		t.Fatal(err)
	}
	refunds, err := rc.List(ctx, card.ID)
	if err != nil || len(refunds) != 1 || refunds[0].Amount != 3 || refunds[0].PaymentID != card.ID {
		t.Fatalf("refunds: %+v %v", refunds, err)
	}
	if _, err := pc.Cancel(ctx, card.ID); err == nil {
		t.Fatal("an approved payment was cancelled")
	}
	if got, err := pc.Cancel(ctx, pix.ID); err != nil || got.Status != "cancelled" {
		t.Fatalf("cancel pix: %+v %v", got, err)
	}
	got, err := pc.Get(ctx, card.ID)
	if err != nil || got.StatusDetail != "partially_refunded" || got.TransactionAmountRefunded != 3 || len(got.Refunds) != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	for _, r := range e.sim.Requests() {
		if r.Method != http.MethodGet && r.IdempotencyKey == "" {
			t.Errorf("%s without X-Idempotency-Key in the log", r.Op)
		}
	}
}
