package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
)

const foBilling = `"billing_details":{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}`

func foBody(order string) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL",`+
		`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}},`+foBilling+`}`, order)
}

// foEnv is the real binary with Stripe first and Mercado Pago second on
// the test's account, Mercado Pago at the simulator and Stripe wherever
// stripeBase says.
type foEnv struct {
	*apitest.Env
	p       *proc
	mpToken string
}

func startFailover(t *testing.T, stripeBase string, env ...string) *foEnv {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	f := &foEnv{Env: e, mpToken: "TEST-fo-" + apitest.SecretSuffix(t)}
	if _, err := e.Accounts.SetProvider(context.Background(), e.Account.ID, payment.ProviderMercadoPago,
		account.Secrets{MercadoPagoToken: f.mpToken}); err != nil {
		t.Fatalf("add mercadopago: %v", err)
	}
	if stripeBase == "" {
		stripeBase = e.SimURL
	}
	env = append([]string{"MERCADOPAGO_API_BASE=" + e.SimURL, "RECONCILE_INTERVAL=200ms", "RECONCILE_AFTER=100ms",
		"RECONCILE_MAX_BACKOFF=1s"}, env...)
	// The later STRIPE_API_BASE wins over start's.
	f.p = start(t, e, buildBinary(t, ""), append(env, "STRIPE_API_BASE="+stripeBase)...)
	return f
}

func (f *foEnv) create(key, body string) *apitest.Response {
	return f.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: f.p.url})
}

// trail lists a payment's attempts as "provider key status code".
func (f *foEnv) trail(t *testing.T, paymentID string) string {
	t.Helper()
	as, err := f.ReconcileStore().AttemptListByPayment(context.Background(), paymentID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", a.Provider, a.ProviderKey, a.Status, a.FailureCode)))
	}
	return strings.Join(out, "; ")
}

// closedAddr is an address nothing listens on: a dial is refused.
func closedAddr(t *testing.T) string { return "http://" + freeAddr(t) }

// TestFailoverRealBinary: the real binary fails a create over to Mercado
// Pago only when Stripe provably did nothing with it, and otherwise leaves
// the payment unknown at Stripe for its reconciler.
func TestFailoverRealBinary(t *testing.T) {
	t.Parallel()

	t.Run("StripeRefusesConnections", func(t *testing.T) {
		t.Parallel()
		f := startFailover(t, closedAddr(t))
		r := f.create("k-1", foBody("pedido-fo-1"))
		if r.Status != http.StatusCreated || r.JSON(t)["provider"] != "mercadopago" || r.JSON(t)["status"] != "captured" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if got, want := f.trail(t, r.JSON(t)["id"].(string)),
			"stripe pedido-fo-1:autorizar-v1 failed provider_unreachable; mercadopago pedido-fo-1:autorizar-v2 succeeded"; got != want {
			t.Fatalf("attempts %q, want %q", got, want)
		}
		if mps := f.Sim.MPPayments(f.mpToken); len(mps) != 1 || mps[0].IdempotencyKey != "pedido-fo-1:autorizar-v2" {
			t.Fatalf("at Mercado Pago: %+v", mps)
		}
	})

	t.Run("StripeCredentialsRefused", func(t *testing.T) {
		t.Parallel()
		f := startFailover(t, "")
		f.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
		r := f.create("k-2", foBody("pedido-fo-2"))
		if r.Status != http.StatusCreated || r.JSON(t)["provider"] != "mercadopago" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if got, want := f.trail(t, r.JSON(t)["id"].(string)),
			"stripe pedido-fo-2:autorizar-v1 failed provider_authentication; mercadopago pedido-fo-2:autorizar-v2 succeeded"; got != want {
			t.Fatalf("attempts %q, want %q", got, want)
		}
	})

	t.Run("OnlyAStripeToken", func(t *testing.T) {
		t.Parallel()
		f := startFailover(t, closedAddr(t))
		r := f.create("k-3", `{"order_id":"pedido-fo-3","amount":2500,"currency":"BRL","payment_methods":{"stripe":"pm_card_visa"},`+foBilling+`}`)
		if r.Status != http.StatusCreated || r.JSON(t)["status"] != "failed" || r.JSON(t)["failure_code"] != "provider_unreachable" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if n := len(f.Sim.MPPayments(f.mpToken)); n != 0 {
			t.Fatalf("%d payments at Mercado Pago, want 0", n)
		}
	})

	for _, tc := range []struct {
		name string
		kind providersim.FaultKind
	}{{"StripeAnswers500", providersim.Error500BeforeEffect}, {"StripeTimesOut", providersim.HoldBeforeEffect}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := startFailover(t, "")
			fault := f.Sim.Inject(providersim.Fault{Op: "authorize", Kind: tc.kind, Times: 10})
			r := f.create("k-4", foBody("pedido-fo-4"))
			if r.Status != http.StatusAccepted || r.JSON(t)["status"] != "unknown" || r.JSON(t)["provider"] != "stripe" {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
			if n := len(f.Sim.MPPayments(f.mpToken)); n != 0 {
				t.Fatalf("%d payments at Mercado Pago, want 0", n)
			}
			fault.Remove()
			f.Sim.ClearFaults()
			id := r.JSON(t)["id"].(string)
			got := f.waitFinal(t, id)
			if got["provider"] != "stripe" || len(f.Sim.MPPayments(f.mpToken)) != 0 {
				t.Fatalf("after the reconciler: %v; %d payments at Mercado Pago", got, len(f.Sim.MPPayments(f.mpToken)))
			}
			if tr := f.trail(t, id); strings.Contains(tr, "mercadopago") {
				t.Fatalf("attempts %q", tr)
			}
		})
	}

	t.Run("CircuitOpens", func(t *testing.T) {
		t.Parallel()
		f := startFailover(t, closedAddr(t), "PROVIDER_CIRCUIT_FAILURES=2", "PROVIDER_CIRCUIT_COOLDOWN=1h", "METRICS_ADDR=")
		for i := range 2 {
			r := f.create(fmt.Sprintf("k-c%d", i), foBody(fmt.Sprintf("pedido-fo-c%d", i)))
			if r.Status != http.StatusCreated || r.JSON(t)["attempt"] != float64(2) {
				t.Fatalf("create %d: %d %s", i, r.Status, r.Body)
			}
		}
		r := f.create("k-c2", foBody("pedido-fo-c2"))
		if r.Status != http.StatusCreated || r.JSON(t)["provider"] != "mercadopago" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if got, want := f.trail(t, r.JSON(t)["id"].(string)), "mercadopago pedido-fo-c2:autorizar-v1 succeeded"; got != want {
			t.Fatalf("attempts %q, want %q: an open circuit skips Stripe without an attempt", got, want)
		}
		if m := f.metrics(t); !strings.Contains(m, `payments_provider_circuit_state{provider="stripe",state="open"} 1`) {
			t.Fatalf("metrics lack stripe's open circuit:\n%s", grepLines(m, "circuit"))
		}
	})
}

// waitFinal polls the payment until the binary's reconciler has resolved it.
func (f *foEnv) waitFinal(t *testing.T, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := f.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id, BaseURL: f.p.url})
		p := r.JSON(t)
		if s := p["status"]; s != "unknown" && s != "processing" {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment %s still %v after 30s", id, p["status"])
		}
		time.Sleep(100 * time.Millisecond) // the reconciler's interval is 200ms
	}
}

func (f *foEnv) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(f.p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
