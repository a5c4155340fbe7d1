// Command goclient creates a payment with api/client's Creator, which
// survives a lost answer by retrying with the intent's one key, then
// verifies merchant webhooks (Standard Webhooks). See docs/clients.md.
package main

import (
	"context"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/acmepay/payments/api/client"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	c, err := client.NewClientWithResponses(os.Getenv("PAYMENTS_URL"),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+os.Getenv("PAYMENTS_API_KEY"))
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	// Keys: nil keeps each intent's key in memory; give a store that writes
	// it beside the order to survive a restart of this process too.
	creator := &client.Creator{Client: c}
	method := "pm_card_visa"
	r, err := creator.Create(context.Background(), "pedido-842", client.CreatePaymentJSONRequestBody{
		OrderId: "pedido-842", Amount: 2000, Currency: "BRL", PaymentMethod: &method})
	if err != nil { // network errors, 202 and 409 in use were retried with the same key
		log.Fatal(err)
	}
	log.Printf("create answered %d: %s", r.StatusCode(), r.Body)

	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("POST /webhooks", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 1<<20))
		if err != nil || wh.Verify(body, req.Header) != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		log.Printf("event %s verified", req.Header.Get("webhook-id")) // deduplicate by this id
	})
	log.Fatal(http.ListenAndServe(os.Getenv("LISTEN_ADDR"), nil))
}
