package payment

import "testing"

// BenchmarkParseCreateRequest: the strict decode and checks of a typical
// create body.
func BenchmarkParseCreateRequest(b *testing.B) {
	body := []byte(`{"order_id":"pedido-842","amount":2000,"currency":"BRL","payment_method":"pm_card_visa",` +
		`"capture_method":"manual","customer_id":"cus_1","description":"order 842","metadata":{"k":"v","cart":"c-17"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCreateRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
