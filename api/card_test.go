package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// cardForms are one Luhn-valid number written in every form CONTRACT §16
// refuses: each listed separator, NBSP, full-width and Arabic-Indic digits.
var cardForms = []string{
	"4111111111111111",
	"4111 1111 1111 1111",
	"4111-1111-1111-1111",
	"4111_1111_1111_1111",
	"4111.1111.1111.1111",
	"4111/1111/1111/1111",
	"4111,1111,1111,1111",
	"4111:1111:1111:1111",
	"4111\u00a01111\u00a01111\u00a01111",
	"４１１１１１１１１１１１１１１１",
	"٤١١١١١١١١١١١١١١١",
}

// TestCardNumbersRefusedInEveryField sends a card number in every form in
// every string field of a create, a webhook endpoint and an X-Request-Id:
// each is refused, nothing is stored, the provider is never called and
// the number reaches neither an answer nor a log line.
func TestCardNumbersRefusedInEveryField(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	for i, card := range cardForms {
		bodies := map[string]map[string]any{}
		for _, f := range []string{"payment_method", "order_id", "description", "customer_id"} {
			b := map[string]any{"order_id": fmt.Sprint("pedido-card-", i), "amount": 2000, "currency": "BRL", "payment_method": "pm_card_visa"}
			b[f] = card
			bodies[f] = b
		}
		bodies["metadata value"] = map[string]any{"order_id": "pedido-card", "amount": 2000, "currency": "BRL",
			"payment_method": "pm_card_visa", "metadata": map[string]string{"note": card}}
		bodies["metadata key"] = map[string]any{"order_id": "pedido-card", "amount": 2000, "currency": "BRL",
			"payment_method": "pm_card_visa", "metadata": map[string]string{"c" + card: "v"}}
		for field, b := range bodies {
			body, err := json.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			r := e.Create(fmt.Sprintf("k-card-%d-%s", i, strings.ReplaceAll(field, " ", "-")), string(body))
			wantRefused(t, r, card, field)
		}
		for field, body := range map[string]string{
			"webhook description": fmt.Sprintf(`{"url":"https://example.com/hook","enabled_events":["*"],"description":%q}`, card),
			"webhook url":         fmt.Sprintf(`{"url":"https://example.com/%s","enabled_events":["*"]}`, card),
		} {
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: fmt.Sprint("k-card-hook-", i, field[8:]), Body: body})
			wantRefused(t, r, card, field)
		}
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=pedido-card", Headers: map[string]string{"X-Request-Id": card}})
		if got := r.Header.Get("X-Request-Id"); got == card {
			t.Errorf("X-Request-Id %q was adopted", card)
		}
	}
	payments, keys := countRows(t, e)
	var hooks int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_endpoints`).Scan(&hooks); err != nil {
		t.Fatal(err)
	}
	if payments != 0 || keys != 0 || hooks != 0 {
		t.Fatalf("stored %d payments, %d idempotency keys, %d webhook endpoints; want none", payments, keys, hooks)
	}
	if n := e.PaymentCalls(); n != 0 {
		t.Fatalf("the provider received %d requests, want 0", n)
	}
	logs := e.Logs.String()
	for _, card := range cardForms {
		if strings.Contains(logs, card) {
			t.Fatalf("the log holds the card number %q", card)
		}
	}
}

func wantRefused(t *testing.T, r *apitest.Response, card, field string) {
	t.Helper()
	if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
		t.Errorf("%s = %q: %d %s, want 400 invalid_request", field, card, r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), card) {
		t.Errorf("%s = %q: the answer echoes the number: %s", field, card, r.Body)
	}
}
