package payment

import (
	stdjson "encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

func TestContainsCardNumber(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"4242424242424242":            true,
		"pm_4242424242424242":         true,
		"card 4242 4242 4242 4242":    true,
		"4242-4242-4242-4242 12/30":   true,
		"4242 4242 4242 4242 1":       true, // the first four groups
		"378282246310005":             true, // 15 digits (Amex)
		"6011111111111117":            true,
		"4000056655665556":            true,
		"4242424242424241":            false, // Luhn fails
		"424242424242":                false, // 12 digits
		"42424242424242424242":        false, // 20 digits in one run
		"4242  4242 4242 4242":        false, // a double space ends the run
		"pedido-842":                  false,
		"order 2026-12-03 amount 100": false,
		"":                            false,
	} {
		if got := ContainsCardNumber(s); got != want {
			t.Errorf("ContainsCardNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"1": 1, "2000": 2000, "2e3": 2000, "2E+3": 2000, "2000.0": 2000, "0.5e2": 50, "20000e-1": 2000,
		"99999999": MaxAmount, "9.9999999e7": MaxAmount,
		"0": 0, "-1": 0, "100000000": 0, "1e8": 0, "20.5": 0, "1999.99999999999999999": 0,
		"1e-2": 0, "1e100000": 0, "1e-100000": 0, `"1"`: 0, "true": 0, "null": 0,
	} {
		got, ok := ParseAmount(jsontext.Value(in))
		if want == 0 && ok || want != 0 && (!ok || got != want) {
			t.Errorf("ParseAmount(%s) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	if got := Excerpt("card_4242424242424242\x00\xff"); got != "card_################??" {
		t.Errorf("Excerpt = %q", got)
	}
	if got := Excerpt(strings.Repeat("a", 100)); utf8.RuneCountInString(got) != 33 {
		t.Errorf("Excerpt of 100 characters = %q, want 32 and an ellipsis", got)
	}
	// A metadata key is client text: masked in the field it names.
	_, err := ParseCreateRequest([]byte(`{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa",` +
		`"metadata":{"k123":"` + strings.Repeat("v", MaxMetadataValLen+1) + `"}}`))
	if e, ok := err.(*Error); !ok || len(e.Fields) != 1 || e.Fields[0].Field != "metadata.k###" {
		t.Errorf("long metadata value: %v, want the field metadata.k###", err)
	}
}

var longDigits = regexp.MustCompile(`[0-9]{13,}`)

// FuzzDecodeStrict: whatever the body, the strict decoder never panics,
// refuses with invalid_request only, never echoes four digits in a row, and
// what it accepts means the same to encoding/json: no duplicate or
// case-folded names, no trailing data, no NUL, no card number.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":100,"amount":999,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","Amount":100,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","AMOUNT":100,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa"}{}`,
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa"} x`,
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","capture_method":null}`,
		`{"order_id":"o","amount":1e2,"currency":"BRL","payment_method":"pm_4242424242424242"}`,
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"4242424242424242":"v"}}`,
		`{"4242424242424242":1}`,
		`{"order_id":"a\u0000b","amount":1,"currency":"BRL","payment_method":"pm_card_visa"}`,
		"{\"order_id\":\"a\xffb\",\"amount\":1,\"currency\":\"BRL\",\"payment_method\":\"pm_card_visa\"}",
		`{"order_id":"a\ud800b","amount":1,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":1999.99999999999999999,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":1e999999999,"currency":"BRL","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":100,"currency":"XXX","payment_method":"pm_card_visa","metadata":{"a":"1","a":"2"}}`,
		`{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","description":"4242 4242 4242 4242"}`,
		`[]`, `null`, ``, `{}`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCreateRequest(body)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Code != CodeInvalidRequest {
				t.Fatalf("error %v, want invalid_request", err)
			}
			// Field names are the only client text an error carries: never
			// a digit. Messages are the service's own, with its limits.
			for _, fe := range e.Fields {
				if strings.ContainsAny(fe.Field, "0123456789") || longDigits.MatchString(fe.Message) {
					t.Fatalf("the error echoes digits: %+v", fe)
				}
			}
			if longDigits.MatchString(e.Message) {
				t.Fatalf("the error echoes digits: %s", e.Message)
			}
			return
		}
		// Accepted: encoding/json must read the same request, and nothing
		// stored may carry a NUL or a card number.
		var v1 struct {
			OrderID       string            `json:"order_id"`
			Amount        stdjson.Number    `json:"amount"`
			Currency      string            `json:"currency"`
			PaymentMethod string            `json:"payment_method"`
			CaptureMethod *string           `json:"capture_method"`
			CustomerID    string            `json:"customer_id"`
			Description   string            `json:"description"`
			Metadata      map[string]string `json:"metadata"`
		}
		if err := stdjson.Unmarshal(body, &v1); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %v", err)
		}
		if v1.OrderID != r.OrderID || v1.PaymentMethod != r.PaymentMethod || v1.CustomerID != r.CustomerID ||
			v1.Description != r.Description || !strings.EqualFold(v1.Currency, r.Currency) {
			t.Fatalf("parsers disagree: %+v vs %+v", v1, r)
		}
		if n, ok := ParseAmount(jsontext.Value(v1.Amount.String())); !ok || n != r.Amount {
			t.Fatalf("parsers disagree on the amount: %s vs %d", v1.Amount, r.Amount)
		}
		if v1.CaptureMethod != nil && *v1.CaptureMethod != r.CaptureMethod {
			t.Fatalf("parsers disagree on capture_method")
		}
		for k, v := range v1.Metadata {
			if r.Metadata[k] != v {
				t.Fatalf("parsers disagree on metadata %q", k)
			}
		}
		all := []string{r.OrderID, r.PaymentMethod, r.CustomerID, r.Description}
		for k, v := range r.Metadata {
			all = append(all, k, v)
		}
		for _, s := range all {
			if !ValidText(s) || ContainsCardNumber(s) {
				t.Fatalf("accepted a string that must never be stored: %q", s)
			}
		}
		if !supportedCurrencies[r.Currency] {
			t.Fatalf("accepted currency %q", r.Currency)
		}
	})
}
